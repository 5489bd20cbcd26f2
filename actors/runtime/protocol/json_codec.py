"""The JSON body codec: what peers not written in Python speak (docs/PROTOCOL.md).

Binary data never goes inside the JSON document: it travels as trailing buffer
frames, and the document holds a marker in its place:

- ``{"$buf": i}``: a bytes value, buffer frame ``i``;
- ``{"$array": i, "dtype": "<f4", "shape": [2, 3]}``: a numpy array whose raw,
  C-ordered bytes are buffer frame ``i``.

Arrays are sent from their own memory and rebuilt on top of the received frame,
without a copy either way; a received array is read-only. Nothing in a JSON body
can make the receiver run code: decoding builds only JSON values, bytes and arrays
of plain-data dtypes, within the limits of `json_limits` (nesting depth, dtype,
shape), which are checked before anything is built.
"""
from __future__ import annotations

import json
from typing import Any, List, Sequence, Tuple

import numpy as np

from . import json_limits
from .bounded import quote, text_of
from ..errors import ProtocolError

BUF, ARRAY = "$buf", "$array"


def dumps(payload: Any) -> Tuple[bytes, List[Any]]:
    """Encode `payload`: ``(body, buffer frames)``. TypeError names a value JSON cannot hold."""
    buffers: List[Any] = []
    try:
        body = json.dumps(_lift(payload, buffers), separators=(",", ":"), allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot encode as JSON: {exc}") from None
    return body.encode("utf-8"), buffers


# The walkers are module functions, not closures over `buffers`: a closure that calls
# itself is a reference cycle, which would keep every frame alive until the garbage
# collector runs.
def _lift(value: Any, buffers: List[Any]) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        buffers.append(bytes(value))
        return {BUF: len(buffers) - 1}
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise TypeError(f"an array of dtype {value.dtype} cannot travel as raw bytes")
        buffers.append(memoryview(np.ascontiguousarray(value).reshape(-1).view(np.uint8)))
        return {ARRAY: len(buffers) - 1, "dtype": value.dtype.str, "shape": list(value.shape)}
    if isinstance(value, dict):
        if ARRAY in value or (len(value) == 1 and BUF in value):
            raise TypeError(f"a map with the key {ARRAY!r}, or {BUF!r} alone, would be read "
                            f"as a buffer marker (docs/PROTOCOL.md)")
        return {str(k): _lift(v, buffers) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lift(v, buffers) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def loads(body: Any, buffers: Sequence[Any] = ()) -> Any:
    """Decode a JSON body, putting buffer frames back in place of their markers.

    ProtocolError: not UTF-8 JSON, nested deeper than `json_limits.MAX_DEPTH`, a
    marker naming a missing frame, or an array marker that `json_limits` refuses
    (its dtype, its shape, or a frame size that disagrees with them).
    """
    raw = bytes(body)
    json_limits.check_nesting(raw)
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"undecodable JSON body: {text_of(exc)}") from exc
    return _lower(document, buffers)


def _lower(value: Any, buffers: Sequence[Any]) -> Any:
    if isinstance(value, dict):
        if ARRAY in value:
            return _array(value, _frame(value[ARRAY], buffers))
        if len(value) == 1 and BUF in value:
            return bytes(_frame(value[BUF], buffers))
        return {k: _lower(v, buffers) for k, v in value.items()}
    if isinstance(value, list):
        return [_lower(v, buffers) for v in value]
    return value


def _frame(index: Any, buffers: Sequence[Any]) -> Any:
    if type(index) is not int or not 0 <= index < len(buffers):
        raise ProtocolError(f"JSON body refers to missing buffer frame {quote(index)}"
                            f" ({len(buffers)} buffer frame(s) sent)")
    return buffers[index]


def _array(marker: dict, raw: Any) -> np.ndarray:
    """The array a ``$array`` marker describes, on top of its frame's memory."""
    index = marker[ARRAY]
    dtype = json_limits.array_dtype(index, marker.get("dtype"))
    view = memoryview(raw).cast("B")
    shape = json_limits.array_shape(index, marker.get("shape"), dtype, view.nbytes)
    return np.frombuffer(view, dtype=dtype).reshape(shape)
