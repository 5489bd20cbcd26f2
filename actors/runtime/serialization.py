"""Payload codecs: cloudpickle protocol 5 with out-of-band buffers, or JSON with buffer frames.

Every numpy (or other PEP 574) buffer of at least `INBAND_LIMIT` bytes leaves the
pickle and travels as its own frame; the receiver rebuilds arrays on top of the
received frames without a copy (frames of 1 MiB and more are also sent without one:
`sockets.COPY_THRESHOLD`). Smaller buffers stay inside the body: a frame of its own
costs more than copying a few hundred bytes.
"""
from __future__ import annotations

import io
import json
import pickle
import sys
import traceback
import types
from typing import Any, List, Sequence, Tuple

import cloudpickle
import numpy as np

from .errors import ProtocolError, RemoteError
from .script_refs import MAIN_MODULES, lookup_qualname, reduce_script_definition

PICKLE_PROTOCOL = 5
INBAND_LIMIT = 1024


# Payloads made only of these (and of functions importable by name) pickle identically
# with the standard pickler, which is several times faster than cloudpickle on small
# messages (store operations, calls, acks).
_PLAIN_TYPES = {type(None), bool, int, float, str, bytes, np.ndarray}
_PLAIN_CONTAINERS = frozenset({list, tuple, dict})
_PLAIN_MAX_ITEMS = 64


# Only positive answers are kept: module-level functions are few, lambdas are not.
_by_reference: set = set()


def _importable(fn: Any) -> bool:
    """True if `fn` is a module-level function the receiver imports by name."""
    if fn in _by_reference:
        return True
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    if module is None or fn.__module__ in MAIN_MODULES \
            or lookup_qualname(module, getattr(fn, "__qualname__", "<")) is not fn:
        return False
    _by_reference.add(fn)
    return True


def register_plain_type(cls: type) -> None:
    """Let the standard pickler take instances of `cls` on the fast path.

    For importable classes whose ``__reduce__`` yields only plain data and
    importable functions (a tensor: its array and a flag).
    """
    _PLAIN_TYPES.add(cls)


def _is_plain(value: Any, depth: int = 6) -> bool:
    kind = type(value)
    if kind in _PLAIN_TYPES:
        return kind is not np.ndarray or not value.dtype.hasobject
    if kind is types.FunctionType:
        return _importable(value)
    if kind not in _PLAIN_CONTAINERS or depth == 0 or len(value) > _PLAIN_MAX_ITEMS:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not _is_plain(item, depth - 1):
                return False
        return True
    for item in value:
        if not _is_plain(item, depth - 1):
            return False
    return True


def dumps(payload: Any) -> Tuple[bytes, List[memoryview]]:
    """Pickle `payload`; returns the body and its out-of-band buffers (one frame each).

    Functions, classes and other objects go through cloudpickle: definitions of the
    running script travel by reference with their value beside (`script_refs`),
    code defined interactively or inside functions by value.
    """
    buffers: List[memoryview] = []

    def keep_in_body(buffer: pickle.PickleBuffer) -> bool:
        raw = buffer.raw()
        if raw.nbytes < INBAND_LIMIT:
            return True
        buffers.append(raw)
        return False

    if _is_plain(payload):
        return pickle.dumps(payload, protocol=PICKLE_PROTOCOL,
                            buffer_callback=keep_in_body), buffers
    out = io.BytesIO()
    _ScriptAwarePickler(out, protocol=PICKLE_PROTOCOL, buffer_callback=keep_in_body).dump(payload)
    return out.getvalue(), buffers


_cloudpickle_override = cloudpickle.Pickler.reducer_override


class _ScriptAwarePickler(cloudpickle.Pickler):
    """cloudpickle, except that the script's own definitions go by reference first."""

    def reducer_override(self, obj: Any) -> Any:
        # Called for every object pickled: the test that rules most out comes first.
        if isinstance(obj, (types.FunctionType, type)) and obj.__module__ in MAIN_MODULES:
            reduction = reduce_script_definition(obj)
            if reduction is not None:
                return reduction
        return _cloudpickle_override(self, obj)


def loads(body: Any, buffers: Sequence[Any] = ()) -> Any:
    """Unpickle a body whose out-of-band buffers are `buffers` (memoryviews, not copied)."""
    try:
        return pickle.loads(body, buffers=buffers)
    except Exception as exc:
        raise ProtocolError(f"undecodable pickle body: {type(exc).__name__}: {exc}") from exc


def dumps_json(payload: Any) -> Tuple[bytes, List[bytes]]:
    """Encode `payload` as JSON; every bytes value becomes a buffer frame ``{"$buf": i}``."""
    buffers: List[bytes] = []

    def lift(value: Any) -> Any:
        if isinstance(value, (bytes, bytearray, memoryview)):
            buffers.append(bytes(value))
            return {"$buf": len(buffers) - 1}
        if isinstance(value, dict):
            return {str(k): lift(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [lift(v) for v in value]
        return value

    return json.dumps(lift(payload), separators=(",", ":")).encode("utf-8"), buffers


def loads_json(body: Any, buffers: Sequence[Any] = ()) -> Any:
    """Decode a JSON body, putting buffer frames back in place of ``{"$buf": i}``."""
    try:
        document = json.loads(bytes(body).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"undecodable JSON body: {exc}") from exc

    def lower(value: Any) -> Any:
        if isinstance(value, dict):
            if len(value) == 1 and "$buf" in value:
                index = value["$buf"]
                if not isinstance(index, int) or not 0 <= index < len(buffers):
                    raise ProtocolError(f"JSON body refers to missing buffer frame {index!r}")
                return bytes(buffers[index])
            return {k: lower(v) for k, v in value.items()}
        if isinstance(value, list):
            return [lower(v) for v in value]
        return value

    return lower(document)


def error_payload(exc: BaseException, *, include_object: bool) -> dict:
    """Describe an exception for an error reply.

    Pickled peers also get the exception object, pickled on its own (`exception`),
    so that a caller which cannot rebuild its type still reads type, message and
    traceback.
    """
    payload = {
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }
    if include_object:
        try:
            payload["exception"] = cloudpickle.dumps(exc, protocol=PICKLE_PROTOCOL)
        except Exception:  # noqa: BLE001 - type name and message remain
            pass
    return payload


def exception_from_payload(payload: Any) -> BaseException:
    """Rebuild the exception an error reply describes, with `remote_traceback` attached.

    The original type comes back when it unpickles here; otherwise a RemoteError
    naming it.
    """
    if not isinstance(payload, dict):
        return RemoteError("unknown", repr(payload))
    remote_tb = payload.get("traceback")
    exc = None
    if isinstance(payload.get("exception"), bytes):
        try:
            exc = pickle.loads(payload["exception"])
        except Exception:  # noqa: BLE001 - the type is not importable here
            exc = None
    if not isinstance(exc, BaseException):
        exc = RemoteError(str(payload.get("type", "unknown")), str(payload.get("message", "")),
                          remote_tb)
    try:
        exc.remote_traceback = remote_tb
    except AttributeError:
        pass
    return exc
