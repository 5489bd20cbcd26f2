"""The bytes of a `FileStore` snapshot: a checksummed header, then length-prefixed fields.

The header is the magic `MAGIC`, the crc32 of the body and the body's length; the
body holds the values (key, value) and then the queues (key, count, items), each
field preceded by its length. Pure: no I/O.
"""
from __future__ import annotations

import struct
import zlib

from store.errors import StoreError

MAGIC = b"AGSTORE1"
_HEADER = struct.Struct(">8sIQ")  # magic, crc32 of the body, length of the body
_U32 = struct.Struct(">I")


def _put_blob(out: bytearray, blob: bytes) -> None:
    out += _U32.pack(len(blob))
    out += blob


def encode_state(state: dict) -> bytes:
    """Serialise a `KeySpace.to_state()` snapshot: header, then length-prefixed fields."""
    body = bytearray()
    body += _U32.pack(len(state["data"]))
    for key, value in state["data"].items():
        _put_blob(body, key.encode("utf-8", "surrogatepass"))
        _put_blob(body, value)
    body += _U32.pack(len(state["queues"]))
    for key, items in state["queues"].items():
        _put_blob(body, key.encode("utf-8", "surrogatepass"))
        body += _U32.pack(len(items))
        for item in items:
            _put_blob(body, item)
    return _HEADER.pack(MAGIC, zlib.crc32(body), len(body)) + bytes(body)


def decode_state(blob: bytes, path: str) -> dict:
    """Parse `encode_state` output; an empty file is an empty store."""
    if not blob:
        # e.g. a fresh tempfile handed to FileStore, as torch users do
        return {"data": {}, "queues": {}}
    corrupt = StoreError(f"{path} is not a FileStore file or is damaged")
    if len(blob) < _HEADER.size:
        raise corrupt
    magic, crc, length = _HEADER.unpack_from(blob)
    body = memoryview(blob)[_HEADER.size:]
    if magic != MAGIC or length != len(body) or zlib.crc32(body) != crc:
        raise corrupt
    pos = 0

    def u32() -> int:
        nonlocal pos
        (n,) = _U32.unpack_from(body, pos)
        pos += 4
        return n

    def blob_() -> bytes:
        nonlocal pos
        n = u32()
        if pos + n > len(body):
            raise ValueError("field runs past the end")
        pos += n
        return bytes(body[pos - n:pos])

    try:
        data = {blob_().decode("utf-8", "surrogatepass"): blob_() for _ in range(u32())}
        queues = {}
        for _ in range(u32()):
            key = blob_().decode("utf-8", "surrogatepass")
            queues[key] = [blob_() for _ in range(u32())]
    except (struct.error, ValueError) as err:
        raise corrupt from err
    return {"data": data, "queues": queues}
