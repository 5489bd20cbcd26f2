"""Distributed autograd: gradients across RPC boundaries (DESIGN §3, §9).

```python
from engine import dist_autograd
with dist_autograd.context() as context_id:
    loss = ...                                  # forward, RPCs included
    dist_autograd.backward(context_id, [loss])  # or mode="smart" (see `backward`)
    grads = dist_autograd.get_gradients(context_id)   # {Tensor: np.ndarray}
```

Importing this module registers its RPC hook, its two services (backward steps
and context releases, kinds ``0x03xx``) and `RRef.backward`'s pass; a worker that
receives a message tagged by the hook imports it on its own.
"""
from actors.rpc import register_distributed_backward, register_hook, register_service
from actors.runtime import Kind
from actors.runtime.protocol import serialization
from engine.tensor import Tensor

from .backward import backward, context, get_gradients
from .release import release
from .context import container
from .errors import ContextActiveError, DistBackwardError, UnknownContextError
from .exchange import serve_backward_step
from .recording import HOOK_NAME, DistAutogradHook
from .release import serve_release

register_hook(HOOK_NAME, DistAutogradHook())
register_service(Kind.AUTOGRAD_BACKWARD_STEP, serve_backward_step)
register_service(Kind.AUTOGRAD_CONTEXT_RELEASE, serve_release)
register_distributed_backward(backward)  # RRef.backward(context_id)
# A tensor pickles as its array and a flag: messages holding tensors can take the
# standard pickler, several times faster than cloudpickle.
serialization.register_plain_type(Tensor)

__all__ = ["backward", "context", "get_gradients", "release", "container",
           "ContextActiveError", "DistBackwardError", "UnknownContextError"]
