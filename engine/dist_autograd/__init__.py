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
from actors.runtime import serialization
from engine.tensor import Tensor

from .backward import backward, context, get_gradients
from .release import release
from .context import container
from .errors import ContextActiveError, DistBackwardError, UnknownContextError
from .recording import HOOK_NAME, DistAutogradHook

register_hook(HOOK_NAME, DistAutogradHook())
# A tensor pickles as its array and a flag: messages holding tensors can take the
# standard pickler, several times faster than cloudpickle.
serialization.register_plain_type(Tensor)

__all__ = ["backward", "context", "get_gradients", "release", "container",
           "ContextActiveError", "DistBackwardError", "UnknownContextError"]
