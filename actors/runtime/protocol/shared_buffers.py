"""Large buffers between processes of one host through shared memory instead of frames.

A request flagged ``SAME_HOST`` comes from a process on the receiver's host (the
sender knows it from the host key its peers published, `host_key`). When such a
request, or the reply to one, carries out-of-band buffers of `SHARED_MIN` bytes or
more in all, the sender copies each buffer into a *block* of shared memory it owns,
sends a small descriptor frame in its place, and flags the message ``SHARED``. The
receiver maps the block once, copies the buffer out and marks the block free again:
one copy on each side, where frames cross the kernel's TCP stack twice and land in
memory ZeroMQ allocates for each message. A message lends at most `MAX_LENT`
buffers.

A block is anonymous memory (`memfd_create`, sealed at its size so that no reader
can be faulted by a shrink), mapped by its readers through ``/proc/<pid>/fd/<fd>``;
its head marks it written and not yet read, or free (`memory_blocks`). The sender
writes a block again only once its reader has cleared the mark. A message dropped
unread gives its blocks back (`discard`); a block still unread after `STALE_AFTER`
seconds (its reader died) is closed, never written again, when room is needed. The
blocks of a process are at most `LIMIT` bytes together; past that, or when the
system refuses a block, buffers travel as frames.

The receiver holds no descriptor: a mapping costs memory only. When the receiver
maps a new block, it drops the mappings of blocks their owners have closed, unless
one holds a buffer not read yet that was used less than `STALE_AFTER` seconds ago;
at most `MAPPED_LIMIT` bytes of mappings are kept. Pickles only: a process in safe
mode refuses ``SHARED`` messages before touching memory, as it refuses their
pickles, and a peer that may send pickles may run code here anyway. The path is on
only on x86-64, which keeps the plain stores of the data and then the mark in order.
``ACTORGRAD_SHARED_MEMORY=0`` turns it off for a process: its host key is then
empty, so no peer lends to it and it lends to none.
"""
from __future__ import annotations

import collections
import os
import platform
import struct
import threading
import time
from typing import List, Optional, Sequence, Tuple

from ..errors import ProtocolError
from .memory_blocks import (DESCRIPTOR, Block, Mapping, mark_free, open_block, read_out,
                            written)

SWITCH_VARIABLE = "ACTORGRAD_SHARED_MEMORY"
SHARED_MIN = 2 << 20  # bytes of buffers in a message below which frames are as quick
LIMIT = 1 << 30  # bytes of blocks one process keeps
MAPPED_LIMIT = 1 << 30  # bytes of other processes' blocks one process keeps mapped
STALE_AFTER = 60.0  # seconds after which an unread block may be closed to make room
MAX_LENT = 16  # buffers of one message at most (each is a block and a descriptor)
_GRAIN = 1 << 20  # block capacities are multiples of this

AVAILABLE = hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd") \
    and platform.machine() in ("x86_64", "AMD64")


def switched_on() -> bool:
    """Whether ``ACTORGRAD_SHARED_MEMORY`` leaves same-host shared memory on (the
    process groups' regions read it too)."""
    return os.environ.get(SWITCH_VARIABLE, "1") != "0"


def enabled() -> bool:
    return AVAILABLE and switched_on()


_ON = enabled()


def host_key() -> str:
    """What two processes share when each can map the other's blocks: the kernel's
    boot, the pid namespace and the user; empty where the path is off."""
    if not _ON:
        return ""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            boot_id = boot.read().strip()
        pid_namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return f"{boot_id}/{pid_namespace}/{os.getuid()}"


class SharedBlocks:
    """This process's blocks (`lend`) and its mappings of other processes' (`take`).

    `limit` bounds the bytes of its blocks; a block unread for `stale_after` seconds
    may be closed to make room.
    """

    def __init__(self, limit: int = LIMIT, stale_after: float = STALE_AFTER) -> None:
        self.limit, self.stale_after = limit, stale_after
        self._lock = threading.Lock()
        self._blocks: List[Block] = []
        self._mapped: "collections.OrderedDict[Tuple[int, int, bytes], Mapping]" = \
            collections.OrderedDict()
        self._mapped_lock = threading.Lock()

    def lend(self, buffers: Sequence[memoryview]) -> Optional[List[bytes]]:
        """Copy each buffer into a free block: their descriptors, or None (nothing
        written) when the blocks would pass the limit or the system refuses one."""
        now = time.monotonic()
        with self._lock:
            chosen: List[Block] = []
            for buffer in buffers:
                try:
                    block = self._free_block(buffer.nbytes, now, chosen)
                except OSError:  # out of descriptors or memory, or memfd refused
                    block = None
                if block is None:
                    return None
                chosen.append(block)
            return [block.write(buffer, now) for block, buffer in zip(chosen, buffers)]

    def give_back(self, descriptor: bytes) -> bool:
        """Mark free the block of ours that `descriptor` names, if it still holds that
        buffer: its message never left, or came back here and is dropped unread.
        False when `descriptor` names no block of this process (malformed, or another
        process's); a use already over is left alone."""
        try:
            pid, fd, nonce, generation, _ = DESCRIPTOR.unpack(bytes(descriptor))
        except struct.error:
            return False
        if pid != os.getpid():
            return False
        with self._lock:
            for block in self._blocks:
                if (block.fd, block.nonce, block.generation) == (fd, nonce, generation):
                    mark_free(block.memory)
        return True

    def _free_block(self, size: int, now: float, taken: List[Block]) -> Optional[Block]:
        fitting = [b for b in self._blocks
                   if b.capacity >= size and b not in taken and not b.unread()]
        if fitting:
            return min(fitting, key=lambda b: b.capacity)
        capacity = -(-size // _GRAIN) * _GRAIN
        spare = sorted((b for b in self._blocks if b not in taken
                        and (not b.unread() or b.stale(now, self.stale_after))),
                       key=lambda b: b.capacity)
        while sum(b.capacity for b in self._blocks) + capacity > self.limit:
            if not spare:
                return None
            self._close(spare.pop())
        block = Block(capacity)
        self._blocks.append(block)
        return block

    def _close(self, block: Block) -> None:
        """Close `block`; hold `_lock`. A reader that mapped it keeps its memory until it
        unmaps; one that had not can no longer open it."""
        self._blocks.remove(block)
        block.close()

    def unread(self) -> int:
        """How many blocks hold a buffer that a live reader may still take (written
        less than `stale_after` seconds ago and not taken yet)."""
        now = time.monotonic()
        with self._lock:
            return sum(1 for b in self._blocks if b.unread() and not b.stale(now, self.stale_after))

    def mapped(self) -> int:
        """How many blocks of other processes this process keeps mapped."""
        with self._mapped_lock:
            return len(self._mapped)

    def release(self) -> None:
        """Close the blocks no reader waits for (free or stale) and unmap other
        processes' blocks: what an RPC worker does as it leaves, its messages all read."""
        now = time.monotonic()
        with self._lock:
            for block in [b for b in self._blocks
                          if not b.unread() or b.stale(now, self.stale_after)]:
                self._close(block)
        self._unmap_all()

    def drain(self, deadline: float) -> int:
        """Wait until every written block is read or `deadline` (monotonic) passes;
        how many stay unread."""
        while True:
            left = self.unread()
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.001)

    def take(self, descriptor: bytes, copy: bool = True) -> Optional[memoryview]:
        """The buffer `descriptor` names, copied out of its block, which is then free
        (without `copy`: only freed, for a message dropped unread).

        ProtocolError when the descriptor is malformed, names no block of ours that
        this process can map, or a buffer that was already read.
        """
        try:
            pid, fd, nonce, generation, length = DESCRIPTOR.unpack(bytes(descriptor))
        except struct.error:
            raise ProtocolError(f"malformed shared-buffer descriptor "
                                f"({len(descriptor)} bytes, expected {DESCRIPTOR.size})") from None
        with self._mapped_lock:
            return read_out(self._map(pid, fd, nonce).view, generation, length, copy)

    def _map(self, pid: int, fd: int, nonce: bytes) -> Mapping:
        """The block `(pid, fd)` with `nonce`, mapped here; hold `_mapped_lock`.

        A block mapped already is used even if its owner has closed it since (and
        another block took its descriptor's number): the mapping keeps its memory,
        and the mark says whether it holds the buffer.
        """
        key = (pid, fd, nonce)
        memory = self._mapped.get(key)
        if memory is not None:
            self._mapped.move_to_end(key)
            memory.used_at = time.monotonic()
            return memory
        self._unmap_closed(pid, fd)
        memory = open_block(pid, fd, nonce)
        self._mapped[key] = memory
        while sum(map(len, self._mapped.values())) > MAPPED_LIMIT and len(self._mapped) > 1:
            self._unmap(next(iter(self._mapped)))
        return memory

    def _unmap_closed(self, pid: int, fd: int) -> None:
        """Unmap the blocks their owners closed (or ended), found by their descriptor no
        longer being open or being `(pid, fd)`, about to be mapped as another block.
        One that holds a buffer not read yet stays while its message may be on its
        way (used less than `stale_after` seconds ago). Hold `_mapped_lock`."""
        stale = time.monotonic() - self.stale_after
        for gone in [key for key, memory in self._mapped.items()
                     if (not written(memory.view) or memory.used_at < stale)
                     and (key[:2] == (pid, fd) or not os.path.exists("/proc/%d/fd/%d" % key[:2]))]:
            self._unmap(gone)

    def _unmap(self, key: Tuple[int, int, bytes]) -> None:
        self._mapped.pop(key).close()

    def close(self) -> None:
        """Unmap and close everything (a forked child's copy, or the end of a test)."""
        with self._lock:
            blocks, self._blocks = self._blocks, []
        for block in blocks:
            block.close()
        self._unmap_all()

    def _unmap_all(self) -> None:
        with self._mapped_lock:
            while self._mapped:
                self._unmap(next(iter(self._mapped)))


BLOCKS = SharedBlocks()


def _forget_the_parent() -> None:
    """A forked child must never write into its parent's blocks. Their locks may have
    been held by a thread that the child does not have: they are not taken."""
    global BLOCKS
    old, BLOCKS = BLOCKS, SharedBlocks()
    old._lock, old._mapped_lock = threading.Lock(), threading.Lock()
    old.close()


os.register_at_fork(after_in_child=_forget_the_parent)


def shared_frames(buffers: List[memoryview]) -> Optional[List[bytes]]:
    """Descriptors for `buffers` lent through shared memory, or None to send them as
    frames (too small together, too many, the path off, or no room)."""
    if not _ON or not 0 < len(buffers) <= MAX_LENT or sum(b.nbytes for b in buffers) < SHARED_MIN:
        return None
    return BLOCKS.lend(buffers)


def taken_buffers(frames: Sequence[object]) -> List[memoryview]:
    """The buffers a ``SHARED`` message's descriptor frames name, copied out; when one
    fails, the others' blocks are given back before the error is raised."""
    blocks = BLOCKS
    try:
        return [blocks.take(frame) for frame in frames]
    except Exception:  # a bad descriptor, or no memory for the copy
        discard(frames)
        raise


def discard(frames: Sequence[object], others: bool = True) -> None:
    """Give back the blocks a ``SHARED`` message's descriptor frames name, unread (the
    message is dropped); descriptors that name none are skipped. This process's own
    blocks are freed where it keeps them; with `others` False, another process's are
    left alone (to go stale) rather than mapped."""
    blocks = BLOCKS
    for frame in frames:
        if blocks.give_back(frame) or not others:
            continue
        try:
            blocks.take(frame, copy=False)
        except ProtocolError:
            pass

