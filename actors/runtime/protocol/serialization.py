"""The pickle body codec: protocol 5 with out-of-band buffers, and safe mode, which refuses it.

Every numpy (or other PEP 574) buffer of at least `INBAND_LIMIT` bytes leaves the
pickle and travels as its own frame; the receiver rebuilds arrays on top of the
received frames without a copy (frames of 1 MiB and more are also sent without one:
`sockets.COPY_THRESHOLD`). Smaller buffers stay inside the body: a frame of its own
costs more than copying a few hundred bytes.
"""
from __future__ import annotations

import io
import pickle
import sys
import types
from typing import Any, List, Sequence, Tuple

import cloudpickle
import numpy as np

from .bounded import text_of
from ..errors import ProtocolError, SafeModeError
from .script_refs import (MAIN_MODULES, goes_by_name, lookup_qualname,
                          reduce_script_definition)

PICKLE_PROTOCOL = 5
INBAND_LIMIT = 1024


# Payloads made only of these (and of functions importable by name, or definitions of
# the script that go by name) pickle identically with the standard pickler, which is
# several times faster than cloudpickle on small messages (store operations, calls, acks).
_PLAIN_TYPES = {type(None), bool, int, float, str, bytes, np.ndarray}
_PLAIN_CONTAINERS = frozenset({list, tuple, dict})
_SCALARS = frozenset({type(None), bool, int, float, str, bytes})
_STR = frozenset({str})
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


# What `_plainness` finds: the standard pickler cannot take it, takes it as it is, or
# takes it with the script's definitions by name (`_ScriptNamesPickler`).
_NOT_PLAIN, _PLAIN, _PLAIN_WITH_SCRIPT_NAMES = 0, 1, 2


def _plainness(value: Any, depth: int = 6) -> int:
    kind = type(value)
    if kind in _PLAIN_TYPES:
        return _PLAIN if kind is not np.ndarray or not value.dtype.hasobject else _NOT_PLAIN
    if kind is types.FunctionType:
        return _function_plainness(value)
    if kind not in _PLAIN_CONTAINERS or depth == 0 or len(value) > _PLAIN_MAX_ITEMS:
        return _NOT_PLAIN
    if kind is dict:
        if not _STR.issuperset(map(type, value)):
            return _NOT_PLAIN
        value = value.values()
    if _SCALARS.issuperset(map(type, value)):  # one pass in C: the common leaf
        return _PLAIN
    found = _PLAIN
    for item in value:
        kind = type(item)
        if kind in _SCALARS or (kind in _PLAIN_CONTAINERS and not item):
            continue
        inner = _plainness(item, depth - 1)
        if inner == _NOT_PLAIN:
            return _NOT_PLAIN
        found = max(found, inner)
    return found


def _function_plainness(fn: types.FunctionType) -> int:
    if fn in _by_reference:
        return _PLAIN
    if goes_by_name(fn):
        # The standard pickler names a function of `__main__` the way a receiver running
        # the same script finds it; one of a spawned child's `__mp_main__` needs renaming.
        return _PLAIN if fn.__module__ == "__main__" else _PLAIN_WITH_SCRIPT_NAMES
    return _PLAIN if _importable(fn) else _NOT_PLAIN


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

    plainness = _plainness(payload)
    if plainness == _PLAIN:
        return pickle.dumps(payload, protocol=PICKLE_PROTOCOL,
                            buffer_callback=keep_in_body), buffers
    out = io.BytesIO()
    pickler = _ScriptNamesPickler if plainness == _PLAIN_WITH_SCRIPT_NAMES else _ScriptAwarePickler
    pickler(out, protocol=PICKLE_PROTOCOL, buffer_callback=keep_in_body).dump(payload)
    return out.getvalue(), buffers


def dumps_in_band(value: Any) -> bytes:
    """Pickle `value` into one bytes object, its buffers inside, with the script's own
    definitions by reference as `dumps` sends them: for a value carried within another
    message's body, such as the exception of an error reply, which the caller then
    catches by its own class when it runs the same script."""
    out = io.BytesIO()
    _ScriptAwarePickler(out, protocol=PICKLE_PROTOCOL).dump(value)
    return out.getvalue()


class _ScriptNamesPickler(pickle.Pickler):
    """The standard pickler, with the script's definitions by reference (`script_refs`)."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is types.FunctionType and obj.__module__ in MAIN_MODULES:
            reduction = reduce_script_definition(obj)
            if reduction is not None:
                return reduction
        return NotImplemented


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


# Safe mode (`allow_pickle(False)`): this process never unpickles what it receives.
_pickle_allowed = True


def allow_pickle(allowed: bool) -> None:
    """Switch safe mode off (True) or on (False) for the whole process.

    In safe mode every pickled body this process receives, request or reply, is
    refused with SafeModeError before a byte of it is read; JSON bodies still work.
    """
    global _pickle_allowed
    _pickle_allowed = bool(allowed)


def pickle_allowed() -> bool:
    """False in safe mode: clients of this process should speak JSON."""
    return _pickle_allowed


def loads(body: Any, buffers: Sequence[Any] = ()) -> Any:
    """Unpickle a body whose out-of-band buffers are `buffers` (memoryviews, not copied).

    SafeModeError in safe mode; ProtocolError for a body that is not a pickle.
    """
    if not _pickle_allowed:
        raise SafeModeError("this process runs in safe mode (allow_pickle=False) and never "
                            "loads a pickle: send a JSON body (flag 0x08), e.g. a named call "
                            "(RPC_CALL_NAMED, docs/PROTOCOL.md)")
    try:
        return pickle.loads(body, buffers=buffers)
    except Exception as exc:
        raise ProtocolError(f"undecodable pickle body: {type(exc).__name__}: "
                            f"{text_of(exc)}") from exc
