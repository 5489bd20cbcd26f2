"""How a call's failure reads at the caller: its own lost connection or timeout, told
apart from the same errors that the callee answered with (a worker further down a
chain of calls was lost, or timed out), and named after the worker it called."""
from __future__ import annotations

from typing import Any, Optional, Tuple, Union

from actors.runtime import PeerLostError, RequestTimeoutError

from .directory import WorkerInfo
from .errors import RemoteTraceback
from .inflight import called_name


def raised_here(exc: Optional[BaseException], kind: Union[type, Tuple[type, ...]]) -> bool:
    """Whether `exc` is a `kind` raised on this worker, not an error the callee answered
    with (the callee's own call to another worker may have failed the same way)."""
    return isinstance(exc, kind) and not hasattr(exc, "remote_traceback")


def lost_here(exc: Optional[BaseException]) -> bool:
    """Whether `exc` says this worker's connection to the callee was lost."""
    return raised_here(exc, PeerLostError)


def timed_out(peer: WorkerInfo, what: Any, seconds: float) -> RequestTimeoutError:
    """An RPC's timeout, naming the worker and what it called (torch names neither)."""
    return RequestTimeoutError(f"{called_name(what)} on worker {peer.name!r} got no reply "
                               f"within {seconds:g}s")


def name_raiser(exc: BaseException, peer: WorkerInfo) -> None:
    """Make the traceback of `exc`, an exception that `peer` answered a call with, the
    cause of `exc`, named after `peer` (see RemoteTraceback)."""
    text = getattr(exc, "remote_traceback", None)
    if isinstance(text, str) and text:
        exc.__cause__ = RemoteTraceback(peer.name, text)
