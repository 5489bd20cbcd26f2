"""The collectives as bodies of one group call: what each rank sends, receives and reduces.

Each function takes the `Call` (see group.py) and plain numpy arrays, and returns
what the caller needs (the in-place writes are the public API's job). Group ranks
are used throughout; the public API maps torch's global `src`/`dst` onto them.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from . import algorithms
from .algorithms import ReduceOp
from .group import Call


def all_reduce(call: Call, array: np.ndarray, op: ReduceOp) -> None:
    """Replace `array` by the reduction of every rank's, identical on every rank."""
    size = call.group.size
    if size == 1:
        algorithms.finish(op, array, 1)
    elif array.nbytes < algorithms.RING_THRESHOLD or array.size < size:
        array[...] = algorithms.reduce_in_order(op, all_gather(call, array), size)
    else:
        _ring_all_reduce(call, array.reshape(-1), op)


def _ring_all_reduce(call: Call, flat: np.ndarray, op: ReduceOp) -> None:
    """Reduce-scatter then all-gather around the ring, in place, chunk by chunk: each
    chunk is passed on as soon as it is reduced (or, in the all-gather, received).

    The chunks sent are views of `flat`, not copies: a segment is only overwritten
    once its final value came round the ring, which needs every rank's earlier
    message carrying it to have been received.
    """
    group = call.group
    rank, size = group.rank, group.size
    right, left = (rank + 1) % size, (rank - 1) % size
    pieces = [algorithms.chunks(start, stop, flat.itemsize)
              for start, stop in algorithms.segments(flat.size, size)]
    first, _ = algorithms.ring_reduce_scatter_step(rank, size, 0)
    for index, (a, b) in enumerate(pieces[first]):
        call.send(right, ("rs", 0, index), flat[a:b], keep=True)
    for step in range(size - 1):
        _, received = algorithms.ring_reduce_scatter_step(rank, size, step)
        last = step == size - 2
        for index, (a, b) in enumerate(pieces[received]):
            chunk = flat[a:b]
            algorithms.combine(op, chunk, call.recv(left, ("rs", step, index)))
            if last:  # this rank's own segment is complete: start the all-gather
                algorithms.finish(op, chunk, size)
                call.send(right, ("ag", 0, index), chunk, keep=True)
            else:
                call.send(right, ("rs", step + 1, index), chunk, keep=True)
    for step in range(size - 1):
        _, received = algorithms.ring_all_gather_step(rank, size, step)
        for index, (a, b) in enumerate(pieces[received]):
            incoming = call.recv(left, ("ag", step, index))
            flat[a:b] = incoming
            if step < size - 2:
                call.send(right, ("ag", step + 1, index), incoming, keep=True)


def all_gather(call: Call, data: Any) -> List[Any]:
    """Every rank's `data`, in group-rank order (this rank's own object included)."""
    group = call.group
    for peer in range(group.size):
        if peer != group.rank:
            call.send(peer, "all", data)
    return [data if peer == group.rank else call.recv(peer, "all")
            for peer in range(group.size)]


def broadcast(call: Call, data: Any, src: int) -> Any:
    """`src`'s `data` on every rank; arrays of RING_THRESHOLD bytes and more are written
    into `data` in place on every rank, passed down a chain in chunks."""
    group = call.group
    if isinstance(data, np.ndarray) and data.nbytes >= algorithms.RING_THRESHOLD \
            and group.size > 2:
        _chain_broadcast(call, data.reshape(-1), src)
        return data
    if group.rank == src:
        for peer in range(group.size):
            if peer != src:
                call.send(peer, "bcast", data)
        return data
    return call.recv(src, "bcast")


def _chain_broadcast(call: Call, flat: np.ndarray, src: int) -> None:
    """src → src+1 → ... → src-1, chunk by chunk; each rank forwards what it received
    (its own copy of the frame). The root sends views of its array and waits for the
    last rank's word that everything arrived before it lets the caller change it."""
    group = call.group
    rank, size = group.rank, group.size
    position = (rank - src) % size
    right, left, last = (rank + 1) % size, (rank - 1) % size, (src - 1) % size
    pieces = algorithms.chunks(0, flat.size, flat.itemsize)
    if position == 0:
        for index, (a, b) in enumerate(pieces):
            call.send(right, ("chain", index), flat[a:b], keep=True)
        call.recv(last, "received")
        return
    for index, (a, b) in enumerate(pieces):
        incoming = call.recv(left, ("chain", index))
        if rank != last:
            call.send(right, ("chain", index), incoming, keep=True)
        flat[a:b] = incoming
    if rank == last:
        call.send(src, "received", None)


def gather(call: Call, data: Any, dst: int) -> Optional[List[Any]]:
    """Every rank's `data` on `dst` (in group-rank order); None elsewhere."""
    group = call.group
    if group.rank != dst:
        call.send(dst, "gather", data)
        return None
    return [data if peer == dst else call.recv(peer, "gather") for peer in range(group.size)]


def scatter(call: Call, pieces: Optional[Sequence[Any]], src: int) -> Any:
    """Piece r of `src`'s `pieces` on group rank r."""
    group = call.group
    if group.rank == src:
        for peer in range(group.size):
            if peer != src:
                call.send(peer, "scatter", pieces[peer])
        return pieces[src]
    return call.recv(src, "scatter")


def all_to_all(call: Call, pieces: Sequence[Any]) -> List[Any]:
    """Piece r of every rank's `pieces` on group rank r, in sender order."""
    group = call.group
    for peer in range(group.size):
        if peer != group.rank:
            call.send(peer, "a2a", pieces[peer])
    return [pieces[peer] if peer == group.rank else call.recv(peer, "a2a")
            for peer in range(group.size)]


def reduce_scatter(call: Call, pieces: Sequence[np.ndarray], op: ReduceOp) -> np.ndarray:
    """The reduction, over ranks, of each rank's piece for this rank."""
    return algorithms.reduce_in_order(op, all_to_all(call, pieces), call.group.size)


def reduce(call: Call, array: np.ndarray, op: ReduceOp, dst: int) -> Optional[np.ndarray]:
    """The reduction of every rank's `array` on `dst`; None elsewhere."""
    arrays = gather(call, array, dst)
    return None if arrays is None else algorithms.reduce_in_order(op, arrays, call.group.size)


def barrier(call: Call) -> None:
    """Return once every rank of the group has called it."""
    all_gather(call, None)
