"""actorgrad's actors: the runtime every worker and store server runs on, and the services on it.

Names are loaded on first use so that importing the runtime never pulls in the
services layer (DESIGN §1).
"""
from __future__ import annotations

import importlib
from typing import Any, List

_EXPORTS = {
    "Actor": "actors.runtime",
    "Future": "actors.runtime",
    "wait_all": "actors.runtime",
    "Message": "actors.runtime",
    "Kind": "actors.runtime",
    "PeerLostError": "actors.runtime",
    "RemoteError": "actors.runtime",
    "RequestTimeoutError": "actors.runtime",
    "SafeModeError": "actors.runtime",
    "Security": "actors.runtime.io.security",
    "set_security": "actors.runtime.io.security",
    **{name: "actors.rpc" for name in (
        "init_rpc", "shutdown", "rpc_sync", "rpc_async", "remote", "RRef", "WorkerInfo",
        "get_worker_info", "async_execution", "RpcHook", "RpcEnvelope", "register_hook",
        "unregister_hook", "RpcError", "RpcInitError", "RpcNotInitializedError", "RRefError",
        "WorkerLostError", "register_service", "call_service", "call_service_async",
        "notify_service", "run_on_pool", "run_on_pool_later", "UNSET_RPC_TIMEOUT", "BackendType",
        "TensorPipeRpcBackendOptions", "get_rpc_timeout", "is_available", "expose",
        "exposed_names", "ExposedClient", "UnknownFunctionError", "functions")},
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'actors' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> List[str]:
    """The loaded names and the ones loaded on first use, for help() and completion."""
    return sorted(set(globals()) | set(__all__))
