"""Exceptions as error replies, and back: what a caller raises when its callee failed.

A pickled error reply carries the exception object itself. A JSON reply carries its
type name, message, traceback and, when they are plain JSON values, its
constructor arguments (`args`); the caller rebuilds the original type only if it
is on an allow-list (builtin exceptions and the types registered with
`register_error_type`), so that nothing from the wire picks which class to build.
Anything else becomes a RemoteError that names the type.

An error reply is bounded in size whatever the exception holds: its message and
traceback are shortened, and its arguments or pickled object left out when too
large (the limits below), so that bad input is never echoed back whole.
"""
from __future__ import annotations

import builtins
import json
import pickle
import traceback
from typing import Any, Dict

from .bounded import MESSAGE_LIMIT, shorten, text_of
from ..errors import (ActorStoppedError, PeerLostError, ProtocolError, RemoteError,
                      RequestTimeoutError, SafeModeError, UnknownKindError)
from .serialization import dumps_in_band, pickle_allowed

# What an error reply holds at most besides its message (`bounded.MESSAGE_LIMIT`):
# it never echoes unbounded input (characters, but bytes for the pickled exception
# object, left out when larger).
TRACEBACK_LIMIT = 8000
ARGS_LIMIT = 8000
EXCEPTION_LIMIT = 32 * 1024


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


_rebuildable: Dict[str, type] = {
    _qualified(cls): cls for cls in vars(builtins).values()
    if isinstance(cls, type) and issubclass(cls, Exception)
}


def register_error_type(cls: type) -> type:
    """Let JSON error replies rebuild `cls` from its constructor arguments (a decorator too)."""
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        raise TypeError(f"{cls!r} is not an Exception subclass")
    _rebuildable[_qualified(cls)] = cls
    return cls


for _cls in (ProtocolError, UnknownKindError, SafeModeError, PeerLostError,
             RequestTimeoutError, ActorStoppedError):
    register_error_type(_cls)


def error_payload(exc: BaseException, *, include_object: bool) -> dict:
    """Describe an exception for an error reply, bounded in size (the limits above).

    Pickled peers also get the exception object, pickled on its own (`exception`),
    so that a caller which cannot rebuild its type still reads type, message and
    traceback; a class of the running script goes by name as in calls, so a caller
    running the same script raises its own class. JSON peers get the constructor
    arguments when JSON can hold them.
    """
    payload: Dict[str, Any] = {
        "type": _qualified(type(exc)),
        "message": text_of(exc),
        "traceback": _traceback_text(exc),
    }
    if include_object:
        try:
            pickled = dumps_in_band(exc)
        except Exception:  # noqa: BLE001 - type name and message remain
            pickled = b""
        if 0 < len(pickled) <= EXCEPTION_LIMIT:
            payload["exception"] = pickled
    else:
        args = _constructor_args(exc)
        if args is not None:
            payload["args"] = args
    return payload


def _traceback_text(exc: BaseException) -> str:
    """The formatted traceback, each part and the whole shortened; the end is kept,
    where the innermost frames and the exception are."""
    parts = traceback.TracebackException(type(exc), exc, exc.__traceback__).format()
    text = "".join(part if len(part) <= MESSAGE_LIMIT else shorten(part, MESSAGE_LIMIT) + "\n"
                   for part in parts)
    return shorten(text, TRACEBACK_LIMIT, keep_end=True)


def _constructor_args(exc: BaseException) -> Any:
    try:
        reduced = exc.__reduce__()
        if reduced[0] is not type(exc):
            return None
        args = [shorten(arg, MESSAGE_LIMIT) if isinstance(arg, str) else arg
                for arg in reduced[1]]
        if len(json.dumps(args)) > ARGS_LIMIT:
            return None
    except Exception:  # noqa: BLE001 - no arguments: the caller gets a RemoteError
        return None
    return args


def exception_from_payload(payload: Any) -> BaseException:
    """Rebuild the exception an error reply describes, with `remote_traceback` attached.

    The original type comes back when it can be rebuilt here (see the module doc) and
    is an Exception; otherwise a RemoteError naming it.
    """
    if not isinstance(payload, dict):
        return RemoteError("unknown", repr(payload))
    remote_tb = payload.get("traceback")
    exc = None
    if isinstance(payload.get("exception"), bytes) and pickle_allowed():
        try:
            exc = pickle.loads(payload["exception"])
        except Exception:  # noqa: BLE001 - the type is not importable here
            exc = None
    elif isinstance(payload.get("args"), list):
        exc = _rebuild(payload.get("type"), payload["args"])
    # Nor is a SystemExit or KeyboardInterrupt raised here for the peer's: the caller's
    # program would end, or seem interrupted, by what happened on the peer.
    if not isinstance(exc, Exception):
        exc = RemoteError(str(payload.get("type", "unknown")), str(payload.get("message", "")),
                          remote_tb)
    try:
        exc.remote_traceback = remote_tb
    except AttributeError:
        pass
    return exc


def _rebuild(type_name: Any, args: list) -> Any:
    cls = _rebuildable.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        return None
    try:
        return cls(*args)
    except Exception:  # noqa: BLE001 - arguments that do not fit: a RemoteError instead
        return None
