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


def all_reduce(call: Call, array: np.ndarray, op: ReduceOp) -> np.ndarray:
    """The reduction of every rank's `array` (flattened), identical on every rank."""
    size = call.group.size
    if size == 1:
        return algorithms.finish(op, np.array(array, copy=True), 1)
    if array.nbytes < algorithms.RING_THRESHOLD or array.size < size:
        return algorithms.reduce_in_order(op, all_gather(call, array), size)
    return _ring_all_reduce(call, array.reshape(-1), op).reshape(array.shape)


def _ring_all_reduce(call: Call, flat: np.ndarray, op: ReduceOp) -> np.ndarray:
    group = call.group
    rank, size = group.rank, group.size
    right, left = (rank + 1) % size, (rank - 1) % size
    bounds = algorithms.segments(flat.size, size)
    parts = [flat[start:stop] for start, stop in bounds]
    for step in range(size - 1):
        sent, received = algorithms.ring_reduce_scatter_step(rank, size, step)
        call.send(right, ("rs", step), parts[sent])
        incoming = np.array(call.recv(left, ("rs", step)), copy=True)
        parts[received] = algorithms.combine(op, incoming, parts[received])
    owned = (rank + 1) % size
    parts[owned] = algorithms.finish(op, parts[owned], size)
    for step in range(size - 1):
        sent, received = algorithms.ring_all_gather_step(rank, size, step)
        call.send(right, ("ag", step), parts[sent])
        parts[received] = call.recv(left, ("ag", step))
    return np.concatenate(parts)


def all_gather(call: Call, data: Any) -> List[Any]:
    """Every rank's `data`, in group-rank order (this rank's own object included)."""
    group = call.group
    for peer in range(group.size):
        if peer != group.rank:
            call.send(peer, "all", data)
    return [data if peer == group.rank else call.recv(peer, "all")
            for peer in range(group.size)]


def broadcast(call: Call, data: Any, src: int) -> Any:
    """`src`'s `data` on every rank."""
    group = call.group
    if group.rank == src:
        for peer in range(group.size):
            if peer != src:
                call.send(peer, "bcast", data)
        return data
    return call.recv(src, "bcast")


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
