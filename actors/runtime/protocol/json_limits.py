"""What a JSON body may describe, checked before anything is built from it.

A JSON body comes from anyone who can connect. Before the document is parsed, its
nesting depth is measured without recursion (`check_nesting`); before numpy sees an
array marker, its dtype string and shape are checked (`array_dtype`,
`array_shape`). Each check fails with a ProtocolError that names what was wrong,
quoting at most a bounded part of the input (docs/PROTOCOL.md, "Limits").

- Nesting: at most `MAX_DEPTH` levels of arrays and maps (the parser and the walks
  over the document recurse once per level).
- dtype: a numpy type string of plain data (``<f4``, ``|b1``, ``float32``,
  ``<M8[ns]``, ``|V8``...): no object fields, no structured or subarray dtypes (the
  encoder sends those as ``|V<size>``), no zero item size.
- shape: a list of at most `MAX_DIMS` non-negative integers whose extent numpy can
  address; the frame must hold exactly item size × product of the shape bytes.
"""
from __future__ import annotations

import functools
import math
import re
import sys
from typing import Any, Tuple, Union

import numpy as np

from .bounded import quote
from ..errors import ProtocolError

MAX_DEPTH = 100
# numpy 1.x allows 32 dimensions, numpy 2 allows 64: 32 works with both.
MAX_DIMS = 32

# Byte order, a type name or code, a datetime unit: what `dtype.str` and numpy's
# names look like. Commas, parentheses and colons (structured and subarray
# dtypes) never reach numpy's parser, which reads such strings as Python syntax.
_DTYPE_NAME = re.compile(r"[<>=|]?[A-Za-z?][A-Za-z0-9_]{0,15}(\[[A-Za-z0-9]{1,8}\])?")

# The nesting scan (`check_nesting`) sees only quotes and brackets, as +1/-1 steps.
_NOT_SYNTAX = bytes(b for b in range(256) if b not in b'"[]{}')
_QUOTE = ord('"')
_STEP = np.zeros(256, np.int8)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1
_SCAN_CHUNK = 1 << 20  # bytes per numpy pass: bounds the scan's own memory


def check_nesting(raw: bytes, limit: int = MAX_DEPTH) -> None:
    """ProtocolError if the JSON text `raw` nests arrays and maps more than `limit` deep.

    A linear scan, no recursion: string contents (escapes included) are skipped,
    and the running depth is a cumulative sum over the brackets outside strings.
    Exact for valid JSON; for invalid JSON exact up to the first error, where the
    parser stops too.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return  # fewer openers than the limit: no need to look closer
    # Pairs of backslashes are escaped backslashes; after them, a backslash before
    # a quote escapes it. The quotes left delimit strings.
    syntax = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_SYNTAX)
    depth, in_string = 0, False
    for start in range(0, len(syntax), _SCAN_CHUNK):
        chunk = np.frombuffer(syntax, np.uint8, min(_SCAN_CHUNK, len(syntax) - start), start)
        quotes = np.cumsum(chunk == _QUOTE, dtype=np.int64)
        outside = (quotes + in_string) % 2 == 0
        levels = np.cumsum(np.where(outside, _STEP[chunk], 0), dtype=np.int64) + depth
        if levels.max() > limit:
            raise ProtocolError(f"JSON body nests arrays and maps more than {limit} levels deep")
        depth, in_string = int(levels[-1]), bool((int(quotes[-1]) + in_string) % 2)


def array_dtype(index: Any, name: Any) -> np.dtype:
    """The dtype an array marker names; ProtocolError saying why it is refused."""
    if not isinstance(name, str):
        parsed: Union[np.dtype, str] = "not a string"
    elif not _DTYPE_NAME.fullmatch(name):  # also bounds what the cache below keeps
        parsed = "only a byte order, a type name or code and a size or unit are accepted"
    else:
        parsed = _parse_dtype(name)
    if isinstance(parsed, str):
        raise ProtocolError(f"array frame {quote(index)}: dtype {quote(name)} is not a numpy "
                            f"dtype string of plain data (e.g. '<f4'): {parsed}")
    return parsed


@functools.lru_cache(maxsize=64)
def _parse_dtype(name: str) -> Union[np.dtype, str]:
    """The dtype `name` names, or why it is refused."""
    try:
        dtype = np.dtype(name)
    except Exception as exc:  # noqa: BLE001 - whatever numpy's parser raises is a refusal
        return f"numpy does not know it ({type(exc).__name__})"
    if dtype.hasobject:
        return "it holds Python objects"
    if dtype.fields is not None or dtype.subdtype is not None:
        return "structured and subarray dtypes are not accepted"
    if dtype.itemsize == 0:
        return "its item size is zero"
    return dtype


def array_shape(index: Any, shape: Any, dtype: np.dtype, nbytes: int) -> Tuple[int, ...]:
    """The shape an array marker gives, checked against its dtype and its frame's `nbytes`."""
    if isinstance(shape, list) and len(shape) > MAX_DIMS:
        raise ProtocolError(f"array frame {quote(index)}: shape has {len(shape)} dimensions, "
                            f"at most {MAX_DIMS} are accepted")
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        raise ProtocolError(f"array frame {quote(index)}: shape must be a list of non-negative "
                            f"integers, got {quote(shape)}")
    # numpy refuses an array whose extent (zero-length axes counted as 1) does not
    # fit its index type, even an empty one.
    if dtype.itemsize * math.prod(max(n, 1) for n in shape) > sys.maxsize:
        raise ProtocolError(f"array frame {quote(index)}: shape {quote(shape)} of dtype "
                            f"{dtype.str} is larger than numpy can address")
    expected = dtype.itemsize * math.prod(shape)
    if nbytes != expected:
        raise ProtocolError(f"array frame {quote(index)} has {nbytes} bytes; dtype {dtype.str} "
                            f"with shape {quote(shape)} needs {expected}")
    return tuple(shape)
