"""torch's RPC backend names, so that `init_rpc` calls written for torch run as they are.

There is one backend; `BackendType.TENSORPIPE` names it. `TensorPipeRpcBackendOptions`
carries what `init_rpc` takes itself (worker threads, the default timeout, the init
method). actorgrad runs on CPUs only: device maps must stay empty.
"""
from __future__ import annotations

import enum
from datetime import timedelta
from typing import Any, Dict, List, Optional, Union

from store.base import to_seconds


class BackendType(enum.Enum):
    """torch's RPC backend names, for ``init_rpc(backend=...)``.

    TENSORPIPE, the one there is, names our actors' transport; any other backend
    raises ValueError.
    """

    TENSORPIPE = "TENSORPIPE"


class TensorPipeRpcBackendOptions:
    """torch's options object: `num_worker_threads`, `rpc_timeout` (seconds),
    `init_method`; ValueError for device maps or devices, which a CPU world has not."""

    def __init__(self, *, num_worker_threads: int = 16,
                 rpc_timeout: Union[float, timedelta] = 60.0, init_method: str = "env://",
                 device_maps: Optional[Dict[Any, Any]] = None,
                 devices: Optional[List[Any]] = None,
                 _transports: Optional[List[str]] = None,
                 _channels: Optional[List[str]] = None):
        if device_maps or devices:
            raise ValueError("device_maps and devices need accelerators; actorgrad runs on "
                             "CPUs only")
        self.num_worker_threads = num_worker_threads
        self.rpc_timeout = to_seconds(rpc_timeout, "rpc_timeout")
        self.init_method = init_method
        self.device_maps: Dict[Any, Any] = {}
        self.devices: List[Any] = []

    def __repr__(self) -> str:
        return (f"TensorPipeRpcBackendOptions(num_worker_threads={self.num_worker_threads}, "
                f"rpc_timeout={self.rpc_timeout:g}, init_method={self.init_method!r})")


def check_backend(backend: Any) -> None:
    """ValueError unless `backend` names the one backend (or is None)."""
    if backend is None or backend is BackendType.TENSORPIPE \
            or (isinstance(backend, str) and backend.upper() == "TENSORPIPE"):
        return
    raise ValueError(f"unknown RPC backend {backend!r}; the one backend is "
                     f"BackendType.TENSORPIPE")
