"""RPC services on actors: init_rpc, rpc_sync, rpc_async, remote, RRef, shutdown."""
from . import functions
from .api import (async_execution, get_rpc_timeout, get_worker_info, init_rpc, is_available,
                  remote, rpc_async, rpc_sync, shutdown)
from .directory import WorkerInfo
from .errors import (RpcError, RpcInitError, RpcNotInitializedError, RRefError,
                     WorkerLostError)
from .named import ExposedClient, UnknownFunctionError, expose, exposed_names
from .hooks import RpcEnvelope, RpcHook, register_hook, unregister_hook
from .options import BackendType, TensorPipeRpcBackendOptions
from .rref import RRef, register_distributed_backward
from .services import (call_service, call_service_async, notify_service, register_service,
                       run_on_pool, run_on_pool_later)
from .timeouts import UNSET_RPC_TIMEOUT

__all__ = [
    "RRef", "RRefError", "RpcEnvelope", "RpcError", "RpcHook", "RpcInitError",
    "RpcNotInitializedError", "WorkerInfo", "WorkerLostError", "async_execution",
    "get_worker_info", "init_rpc", "register_hook", "remote", "rpc_async", "rpc_sync",
    "shutdown", "unregister_hook", "register_service", "call_service", "call_service_async",
    "notify_service", "run_on_pool", "run_on_pool_later", "UNSET_RPC_TIMEOUT", "BackendType",
    "TensorPipeRpcBackendOptions", "get_rpc_timeout", "is_available",
    "register_distributed_backward", "ExposedClient", "UnknownFunctionError", "expose",
    "exposed_names", "functions",
]
