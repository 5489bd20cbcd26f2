"""One block of shared memory: a sealed memfd that its owner writes and one peer reads.

`Block` is the owner's side; the reader maps the block through ``/proc/<pid>/fd/<fd>``
(`open_block`), copies a buffer out and frees the block (`read_out`).
`shared_buffers` decides which blocks lend which buffers and keeps the mappings.

A block's head holds a random nonce (a descriptor that names another process's
descriptor is refused), a generation counted up at each use, and a mark: written and
not yet read, or free; the data starts at the next page. The mark is written after
the data with plain stores, which x86-64 keeps in order. A descriptor frame names
one use of a block: pid, fd, nonce, generation, length.
"""
from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import secrets
import struct
import time
from typing import Optional

import numpy as np

from ..errors import ProtocolError

MEMFD_NAME = "actorgrad-buffers"
_HEAD = struct.Struct("<16sQB")
_GENERATION_AT, _MARK_AT = 16, 24
_DATA_AT = mmap.PAGESIZE
_FREE, _WRITTEN = 0, 1
DESCRIPTOR = struct.Struct("<II16sQQ")
SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_MAP_FAILED = ctypes.c_void_p(-1).value


class Mapping:
    """A shared read-write mapping of a whole file that keeps no descriptor open
    (Python's `mmap` keeps a duplicate of its descriptor for as long as it lives)."""

    __slots__ = ("address", "size", "view", "used_at")

    def __init__(self, fd: int):
        self.size = os.fstat(fd).st_size
        address = _libc.mmap(None, self.size, mmap.PROT_READ | mmap.PROT_WRITE,
                             mmap.MAP_SHARED, fd, 0) if self.size else _MAP_FAILED
        if address in (None, _MAP_FAILED):
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        self.address = address
        self.view = memoryview((ctypes.c_char * self.size).from_address(address)).cast("B")
        self.used_at = time.monotonic()

    def __len__(self) -> int:
        return self.size

    def close(self) -> None:
        """Unmap; nobody may use `view` or an array over it afterwards."""
        if self.address is not None:
            self.view.release()
            _libc.munmap(self.address, self.size)
            self.address = None


class Block:
    """One memfd of `capacity` data bytes that this process writes and a peer reads."""

    __slots__ = ("fd", "mapping", "memory", "capacity", "nonce", "generation", "written_at")

    def __init__(self, capacity: int):
        self.fd = os.memfd_create(MEMFD_NAME, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(self.fd, _DATA_AT + capacity)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, SEALS | fcntl.F_SEAL_SEAL)
            self.mapping = Mapping(self.fd)
        except BaseException:
            os.close(self.fd)
            raise
        self.memory = self.mapping.view
        self.capacity = capacity
        self.nonce = secrets.token_bytes(16)
        self.generation = 0
        self.written_at = 0.0
        _HEAD.pack_into(self.memory, 0, self.nonce, 0, _FREE)

    def unread(self) -> bool:
        return written(self.memory)

    def stale(self, now: float, after: float) -> bool:
        return self.unread() and now - self.written_at > after

    def write(self, buffer: memoryview, now: float) -> bytes:
        """Copy `buffer` in, mark it written; its descriptor."""
        self.generation += 1
        length = buffer.nbytes
        struct.pack_into("<Q", self.memory, _GENERATION_AT, self.generation)
        np.frombuffer(self.memory, np.uint8, length, _DATA_AT)[:] = \
            np.frombuffer(buffer.cast("B"), np.uint8)
        self.memory[_MARK_AT] = _WRITTEN
        self.written_at = now
        return DESCRIPTOR.pack(os.getpid(), self.fd, self.nonce, self.generation, length)

    def close(self) -> None:
        try:
            self.mapping.close()
        finally:
            os.close(self.fd)


def written(memory: memoryview) -> bool:
    """Whether the block whose memory this is holds a buffer not read yet."""
    return memory[_MARK_AT] == _WRITTEN


def mark_free(memory: memoryview) -> None:
    memory[_MARK_AT] = _FREE


def open_block(pid: int, fd: int, nonce: bytes) -> Mapping:
    """Map the block that process `pid` holds as `fd`; ProtocolError unless it is a
    sealed block of ours whose head holds `nonce`."""
    path = f"/proc/{pid}/fd/{fd}"
    try:
        if not os.readlink(path).startswith(f"/memfd:{MEMFD_NAME}"):
            raise ProtocolError(f"{path} is not a shared-buffer block")
        handle = os.open(path, os.O_RDWR)
        try:
            # Checked on the descriptor opened, not the path: a sealed memfd.
            if fcntl.fcntl(handle, fcntl.F_GET_SEALS) & SEALS != SEALS:
                raise ProtocolError(f"{path} is not a shared-buffer block")
            memory = Mapping(handle)
        finally:
            os.close(handle)
    except OSError as exc:
        raise ProtocolError(f"cannot map the sender's shared buffer {path}: "
                            f"{exc.strerror or exc}") from None
    if len(memory) < _DATA_AT or memory.view[:16] != nonce:
        memory.close()
        raise ProtocolError(f"{path} is not the sender's shared-buffer block")
    return memory


def read_out(memory: memoryview, generation: int, length: int,
             copy: bool) -> Optional[memoryview]:
    """The `length` bytes that use `generation` of a mapped block wrote, copied out
    (None without `copy`); the block is free afterwards. ProtocolError when they do not
    fit the block or were read already, or the owner took the block back meanwhile."""
    if length > len(memory) - _DATA_AT:
        raise ProtocolError(f"shared buffer of {length} bytes does not fit its block")
    if _HEAD.unpack_from(memory)[1:] != (generation, _WRITTEN):
        raise ProtocolError("shared buffer already read")
    out = None
    if copy:
        out = np.empty(length, np.uint8)
        out[:] = np.frombuffer(memory, np.uint8, length, _DATA_AT)
        if _HEAD.unpack_from(memory)[1:] != (generation, _WRITTEN):
            raise ProtocolError("shared buffer given back while it was read")
    mark_free(memory)
    return None if out is None else memoryview(out)
