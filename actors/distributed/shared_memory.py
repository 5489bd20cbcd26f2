"""Same-host shortcut for large arrays: each rank owns one shared region its peers map.

A rank that sends an array of at least `SHARED_MIN` bytes to one or several peers on
its host copies it once into free slots of its region, marks the slots as unread by
each of those peers, and sends them, over ZeroMQ, only a `SharedArray` naming the
slots. Each peer reads the array straight from the region and then clears its own
mark; a slot is free again once no peer's mark is left. That is the flow control,
and the sender never waits on it: when too few slots are free, or a peer could not
map the region, the array travels over ZeroMQ as any other.

A region is anonymous memory (`memfd_create`). A peer maps it once, through
``/proc/<pid>/fd/<fd>`` while the sender holds that descriptor open, and checks a
random nonce written at its head, so a process that is not the sender (another pid
namespace) is never mistaken for it. Nothing is named in /dev/shm: the kernel frees
a region when every process has unmapped it, at close or at a crash.
"""
from __future__ import annotations

import mmap
import os
import secrets
import threading
import weakref
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

import numpy as np

from actors.runtime.process.log import get_logger
from actors.runtime.protocol import serialization

log = get_logger(__name__)

SLOT_BYTES = 1 << 20
SLOTS = 32  # a 32 MiB region per rank; its pages are only allocated once written
SHARED_MIN = 64 * 1024  # smaller arrays gain nothing over a ZeroMQ frame
_NONCE_BYTES = 16

AVAILABLE = hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")


class SharedArray(NamedTuple):
    """An array that rank `origin` wrote into `count` slots from `start` of its region."""

    origin: int
    start: int
    count: int
    dtype: str
    shape: tuple


# Its fields are plain data: every small collective's message takes the standard pickler.
serialization.register_plain_type(SharedArray)


class RegionOffer(NamedTuple):
    """What a peer needs to map a rank's region: `PG_SHARE`'s payload."""

    origin: int
    pid: int
    fd: int
    world: int
    nonce: bytes


def _layout(world: int) -> Tuple[int, int]:
    """(offset of the slots' data, size of the region) for `world` possible readers:
    a nonce, then one mark per slot and reader, then the slots from a page boundary."""
    header = _NONCE_BYTES + SLOTS * world
    data = -(-header // mmap.PAGESIZE) * mmap.PAGESIZE
    return data, data + SLOTS * SLOT_BYTES


class Region:
    """`SLOTS` slots of `SLOT_BYTES`, and for each slot one unread mark per reader rank.

    The owner sets marks, each reader clears its own: no byte has two writers.
    """

    def __init__(self, memory: mmap.mmap, world: int):
        data, size = _layout(world)
        self._memory = memory
        self._marks = np.frombuffer(memory, np.uint8, SLOTS * world, _NONCE_BYTES) \
            .reshape(SLOTS, world)
        self._data = np.frombuffer(memory, np.uint8, SLOTS * SLOT_BYTES, data)

    @classmethod
    def create(cls, world: int) -> "Tuple[Region, int, bytes]":
        """A new region, the descriptor peers open it by, and its nonce."""
        size = _layout(world)[1]
        fd = os.memfd_create("actorgrad-pg", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            memory = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        nonce = secrets.token_bytes(_NONCE_BYTES)
        memory[:_NONCE_BYTES] = nonce
        return cls(memory, world), fd, nonce

    @classmethod
    def attach(cls, offer: RegionOffer) -> "Region":
        """Map the region `offer` describes; OSError if it is not the offering rank's."""
        fd = os.open(f"/proc/{int(offer.pid)}/fd/{int(offer.fd)}", os.O_RDWR)
        try:
            size = _layout(int(offer.world))[1]
            if os.fstat(fd).st_size != size:
                raise OSError(f"/proc/{offer.pid}/fd/{offer.fd} is not a region")
            memory = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        if memory[:_NONCE_BYTES] != offer.nonce:
            memory.close()
            raise OSError(f"/proc/{offer.pid}/fd/{offer.fd} is not the sender's region")
        return cls(memory, int(offer.world))

    def write(self, origin: int, array: np.ndarray, readers: Sequence[int]
              ) -> Optional[SharedArray]:
        """Copy C-contiguous `array` into free slots, unread by each of `readers`; None
        if there are not enough free slots. The caller serialises writers."""
        count = max(1, -(-array.nbytes // SLOT_BYTES))
        busy = self._marks.any(axis=1).view(np.uint8).tobytes()
        start = busy.find(bytes(count))
        if start < 0:
            return None
        self._marks[start:start + count, list(readers)] = 1
        offset = start * SLOT_BYTES
        self._data[offset:offset + array.nbytes] = array.reshape(-1).view(np.uint8)
        return SharedArray(origin, start, count, array.dtype.str, tuple(array.shape))

    def view(self, shared: SharedArray) -> np.ndarray:
        """The array `shared` names, in place in the region; ValueError if malformed."""
        dtype = np.dtype(shared.dtype)
        length = int(np.prod(shared.shape, dtype=np.int64)) * dtype.itemsize
        if dtype.hasobject or not 0 <= shared.start < shared.start + shared.count <= SLOTS \
                or not 0 <= length <= shared.count * SLOT_BYTES:
            raise ValueError(f"{shared} does not fit a shared region")
        offset = shared.start * SLOT_BYTES
        return self._data[offset:offset + length].view(dtype).reshape(shared.shape)

    def release(self, shared: SharedArray, reader: int) -> None:
        """`reader` is done with `shared`: its slots may be written again."""
        self._marks[shared.start:shared.start + shared.count, reader] = 0

    def close(self) -> None:
        del self._marks, self._data
        try:
            self._memory.close()
        except BufferError:  # a reader still holds a view: unmapped once it is dropped
            pass


Share = Callable[[int, RegionOffer], None]


class SharedRegions:
    """This rank's region, and the regions of the peers that share theirs with it.

    `peers` are the global ranks on this host. A peer maps this rank's region at
    the first array sent to it: `share(rank, offer)` returns once it has, or raises,
    after which that peer is sent ZeroMQ frames only.
    """

    def __init__(self, rank: int):
        self.rank = rank
        self._world = 0
        self._peers: Set[int] = set()
        self._lock = threading.Lock()
        self._own: Optional[Region] = None
        self._own_fd = -1  # the descriptor peers open, closed by `_close_fd`
        self._close_fd: Optional[weakref.finalize] = None
        self._nonce = b""
        self._mapped: Dict[int, bool] = {}  # peer -> whether it maps our region
        self._incoming: Dict[int, Region] = {}
        self._closed = False

    def set_peers(self, world: int, peers: Set[int]) -> None:
        self._world = world
        self._peers = set(peers) if AVAILABLE else set()

    def write(self, ranks: Sequence[int], array: np.ndarray, share: Share
              ) -> Tuple[Optional[SharedArray], List[int]]:
        """Write `array` once for those of `ranks` that map this rank's region:
        (what to send them, or None; the ranks that need the array itself)."""
        if array.nbytes < SHARED_MIN or not array.flags.c_contiguous \
                or not self._peers.intersection(ranks):
            return None, list(ranks)
        with self._lock:
            if self._closed:
                return None, list(ranks)
            readers = [r for r in ranks if self._maps(r, share)]
            shared = self._own.write(self.rank, array, readers) if readers else None
        if shared is None:
            return None, list(ranks)
        return shared, [r for r in ranks if r not in readers]

    def _maps(self, rank: int, share: Share) -> bool:
        mapped = self._mapped.get(rank)
        if mapped is None:
            mapped = self._mapped[rank] = rank in self._peers and self._offer(rank, share)
        return mapped

    def _offer(self, rank: int, share: Share) -> bool:
        if self._own is None:
            self._own, self._own_fd, self._nonce = Region.create(self._world)
            self._close_fd = weakref.finalize(self, os.close, self._own_fd)
        try:
            share(rank, RegionOffer(self.rank, os.getpid(), self._own_fd, self._world,
                                    self._nonce))
        except Exception as exc:  # noqa: BLE001 - the peer cannot map it: ZeroMQ it is
            log.info("shared_memory_refused", rank=self.rank, peer=rank, error=str(exc))
            return False
        log.info("shared_memory_ready", rank=self.rank, peer=rank)
        return True

    def attach(self, offer: RegionOffer) -> None:
        """Map the region a peer offers (`PG_SHARE`'s handler, on the thread that reads
        the mailbox)."""
        if self._closed:
            raise OSError("the process group is closing")
        offer = RegionOffer(*offer)
        if offer.origin in self._incoming:
            return
        self._incoming[offer.origin] = Region.attach(offer)

    def view(self, shared: SharedArray) -> np.ndarray:
        """The array a peer wrote, in place; ValueError if no region of it is mapped."""
        region = self._incoming.get(shared.origin)
        if region is None:
            raise ValueError(f"no shared region of rank {shared.origin} is mapped")
        return region.view(shared)

    def release(self, shared: SharedArray) -> None:
        region = self._incoming.get(shared.origin)
        if region is not None:
            region.release(shared, self.rank)

    def close(self) -> None:
        """Unmap every region and close this rank's descriptor."""
        with self._lock:
            self._closed = True
            own, self._own = self._own, None
            if self._close_fd is not None:
                self._close_fd()
        if own is not None:
            own.close()
        for region in self._incoming.values():
            region.close()
        self._incoming.clear()
