"""torch's `torch.distributed.rpc.functions` namespace: ``@rpc.functions.async_execution``
in a torch script runs as written once ``import actors as rpc`` replaces its import."""
from .api import async_execution

__all__ = ["async_execution"]
