"""Encoding a request for one worker of the world."""
from __future__ import annotations

from typing import Any, Optional

import zmq

from actors.runtime import ActorError, PeerLostError
from actors.runtime.protocol.script_refs import same_script_receiver

from .directory import WorkerInfo
from .errors import RpcNotInitializedError


class Sending:
    """Encodes a request for worker `info`: the script's definitions by name alone when
    it runs this script, and a failure to pickle as a TypeError that names the callee.

    A class rather than a generator context manager: it wraps every call.
    """

    __slots__ = ("info", "script")
    _PASS = (RpcNotInitializedError, PeerLostError, TimeoutError, ActorError, zmq.ZMQError)

    def __init__(self, info: WorkerInfo, same_script: bool):
        self.info = info
        self.script = same_script_receiver(True) if same_script else None

    def __enter__(self) -> None:
        if self.script is not None:
            self.script.__enter__()

    def __exit__(self, kind: Any, exc: Optional[BaseException], tb: Any) -> bool:
        if self.script is not None:
            self.script.__exit__()
        if exc is None or not isinstance(exc, Exception) or isinstance(exc, self._PASS) \
                or getattr(exc, "remote_traceback", None) is not None:  # raised by the callee
            return False
        raise TypeError(f"the call to {self.info.name!r} cannot be sent: {exc}") from exc
