"""The decisions of the collectives, without I/O: reduction ops, segments, ring and
barrier schedules.

Every rank reduces in one order (group rank 0, 1, 2, ... for direct exchanges; ring
order from the segment's first rank for the ring), so that every rank ends with
bit-identical results, as gloo's ring does.
"""
from __future__ import annotations

import enum
from typing import List, Sequence, Tuple

import numpy as np

# Above this many bytes all_reduce runs the ring and broadcast the chain
# (bandwidth-optimal); below it arrays go whole, straight to every rank (one latency).
RING_THRESHOLD = 256 * 1024
# Large arrays move in chunks of at most this many bytes, so that a rank passes a
# chunk on while the next one is still arriving.
CHUNK_BYTES = 4 << 20
# Up to this many ranks a barrier is one exchange of every rank with every other (one
# latency, size - 1 messages a rank); above it, dissemination rounds (one message a
# rank a round, ceil(log2 size) latencies). The crossover was measured on one host:
# docs/PERFORMANCE.md, "Barriers of large groups".
ALL_TO_ALL_BARRIER_MAX = 8


class ReduceOp(enum.Enum):
    """How a reduction combines the ranks' arrays, elementwise: torch's `ReduceOp` names.

    AVG is the sum divided by the number of ranks and needs a floating dtype; MIN and
    MAX take no complex dtype; every op needs a numeric dtype (TypeError otherwise).
    """

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    AVG = "avg"


_UFUNCS = {ReduceOp.SUM: np.add, ReduceOp.AVG: np.add, ReduceOp.PRODUCT: np.multiply,
           ReduceOp.MIN: np.minimum, ReduceOp.MAX: np.maximum}


def check_op(op: ReduceOp, dtype: np.dtype) -> None:
    """TypeError for an op the dtype cannot take (AVG of integers, MAX of complex numbers,
    any op on objects)."""
    if not isinstance(op, ReduceOp):
        raise TypeError(f"op must be a ReduceOp, got {op!r}")
    if dtype.hasobject or dtype.kind not in "biufc":
        raise TypeError(f"cannot reduce arrays of dtype {dtype}")
    if op is ReduceOp.AVG and dtype.kind not in "fc":
        raise TypeError(f"ReduceOp.AVG needs a floating dtype, got {dtype}")
    if op in (ReduceOp.MIN, ReduceOp.MAX) and dtype.kind == "c":
        # numpy would order complex numbers lexicographically; torch refuses them
        raise TypeError(f"ReduceOp.{op.name} cannot order complex numbers ({dtype})")


def combine(op: ReduceOp, acc: np.ndarray, other: np.ndarray) -> np.ndarray:
    """`acc op other` into `acc` (a buffer the caller owns); returns `acc`."""
    return _UFUNCS[op](acc, other, out=acc)


def reduce_in_order(op: ReduceOp, arrays: Sequence[np.ndarray], count: int) -> np.ndarray:
    """A new array: arrays[0] op arrays[1] op ..., then AVG divides by `count`."""
    acc = np.array(arrays[0], copy=True)
    for other in arrays[1:]:
        combine(op, acc, other)
    return finish(op, acc, count)


def finish(op: ReduceOp, acc: np.ndarray, count: int) -> np.ndarray:
    if op is ReduceOp.AVG:
        np.divide(acc, count, out=acc)
    return acc


def segments(length: int, parts: int) -> List[Tuple[int, int]]:
    """`parts` contiguous [start, stop) bounds covering `length`, the first ones longer."""
    base, extra = divmod(length, parts)
    bounds, start = [], 0
    for index in range(parts):
        stop = start + base + (1 if index < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def chunks(start: int, stop: int, itemsize: int) -> List[Tuple[int, int]]:
    """[start, stop) cut into pieces of at most CHUNK_BYTES (at least one piece)."""
    step = max(1, CHUNK_BYTES // itemsize)
    return [(a, min(a + step, stop)) for a in range(start, max(stop, start + 1), step)]


def ring_reduce_scatter_step(rank: int, size: int, step: int) -> Tuple[int, int]:
    """(segment sent, segment received and reduced) by `rank` at `step` of the ring.

    After size-1 steps rank r holds the full reduction of segment (r + 1) % size,
    reduced in ring order starting at that segment's own rank.
    """
    return (rank - step) % size, (rank - step - 1) % size


def ring_all_gather_step(rank: int, size: int, step: int) -> Tuple[int, int]:
    """(segment sent, segment received) by `rank` at `step` of the ring's all-gather."""
    return (rank + 1 - step) % size, (rank - step) % size


def dissemination_rounds(rank: int, size: int) -> List[Tuple[int, int]]:
    """(rank told, rank heard from) by `rank` in each round of a dissemination barrier.

    Round k pairs ranks 2**k apart, so after round k each rank has heard, directly or
    through the ranks it heard from, that the 2**(k+1) - 1 ranks before it arrived:
    after ceil(log2 size) rounds, that every rank did.
    """
    rounds, distance = [], 1
    while distance < size:
        rounds.append(((rank + distance) % size, (rank - distance) % size))
        distance *= 2
    return rounds
