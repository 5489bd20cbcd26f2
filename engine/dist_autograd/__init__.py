"""Distributed autograd, FAST mode: gradients across RPC boundaries (DESIGN §3).

```python
from engine import dist_autograd
with dist_autograd.context() as context_id:
    loss = ...                                  # forward, RPCs included
    dist_autograd.backward(context_id, [loss])
    grads = dist_autograd.get_gradients(context_id)   # {Tensor: np.ndarray}
```

Importing this module registers its RPC hook; a worker that receives a message
tagged by it imports it on its own.
"""
from actors.rpc import register_hook

from .backward import backward, context, get_gradients, release
from .context import container
from .errors import ContextActiveError, DistBackwardError, UnknownContextError
from .recording import HOOK_NAME, DistAutogradHook

register_hook(HOOK_NAME, DistAutogradHook())

__all__ = ["backward", "context", "get_gradients", "release", "container",
           "ContextActiveError", "DistBackwardError", "UnknownContextError"]
