"""The JSON body codec: what peers not written in Python speak (docs/PROTOCOL.md).

Binary data never goes inside the JSON document: it travels as trailing buffer
frames, and the document holds a marker in its place:

- ``{"$buf": i}``: a bytes value, buffer frame ``i``;
- ``{"$array": i, "dtype": "<f4", "shape": [2, 3]}``: a numpy array whose raw,
  C-ordered bytes are buffer frame ``i``.

Arrays are sent from their own memory and rebuilt on top of the received frame,
without a copy either way; a received array is read-only. Nothing in a JSON body
can make the receiver run code: decoding builds only JSON values, bytes and arrays
of non-object dtypes.
"""
from __future__ import annotations

import functools
import json
import math
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from .errors import ProtocolError

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
        return {str(k): _lift(v, buffers) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lift(v, buffers) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def loads(body: Any, buffers: Sequence[Any] = ()) -> Any:
    """Decode a JSON body, putting buffer frames back in place of their markers.

    ProtocolError: not UTF-8 JSON, a marker naming a missing frame, or an array
    whose frame size disagrees with its dtype and shape.
    """
    try:
        document = json.loads(bytes(body).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"undecodable JSON body: {exc}") from exc
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
        raise ProtocolError(f"JSON body refers to missing buffer frame {index!r}"
                            f" ({len(buffers)} buffer frame(s) sent)")
    return buffers[index]


def _array(marker: dict, raw: Any) -> np.ndarray:
    """The array a ``$array`` marker describes, on top of its frame's memory."""
    index, shape = marker[ARRAY], marker.get("shape")
    dtype = _plain_dtype(marker.get("dtype"))
    if dtype is None:
        raise ProtocolError(f"array frame {index}: dtype {marker.get('dtype')!r} is not a "
                            f"numpy dtype string of plain data (e.g. '<f4')")
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        raise ProtocolError(f"array frame {index}: shape must be a list of non-negative "
                            f"integers, got {shape!r}")
    view = memoryview(raw).cast("B")
    expected = dtype.itemsize * math.prod(shape)
    if view.nbytes != expected:
        raise ProtocolError(f"array frame {index} has {view.nbytes} bytes; dtype {dtype.str} "
                            f"with shape {shape} needs {expected}")
    return np.frombuffer(view, dtype=dtype).reshape(shape)


@functools.lru_cache(maxsize=64)
def _parse_dtype(name: str) -> Optional[np.dtype]:
    try:
        dtype = np.dtype(name)
    except TypeError:
        return None
    return None if dtype.hasobject else dtype


def _plain_dtype(name: Any) -> Optional[np.dtype]:
    """The dtype a marker names, if it is a string naming plain data (no objects)."""
    return _parse_dtype(name) if isinstance(name, str) and len(name) < 64 else None
