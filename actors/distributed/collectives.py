"""The collectives as bodies of one group call: what each rank sends, receives and reduces.

Each function takes the `Call` (see group.py) and plain numpy arrays, and returns
what the caller needs (the in-place writes are the public API's job). Group ranks
are used throughout; the public API maps torch's global `src`/`dst` onto them.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager, List, Optional, Sequence

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
    elif _on_one_host(call):
        _one_host_all_reduce(call, array.reshape(-1), op)
    else:
        _ring_all_reduce(call, array.reshape(-1), op)


def _on_one_host(call: Call) -> bool:
    """Whether the group's ranks share this host, so that large arrays go through shared
    memory. Every rank of a group answers the same: it depends only on the addresses."""
    return call.group.transport.shares_memory(call.group.ranks)


def _one_host_all_reduce(call: Call, flat: np.ndarray, op: ReduceOp) -> None:
    """Chunk by chunk: every rank writes segment r of its chunk for group rank r, which
    reduces the others' segments into its own, in group-rank order, reading them
    straight from shared memory, and writes the result once for all the others to
    copy in.

    Two hops whatever the group size, against the ring's 2 × (size - 1), and every
    byte written is one a peer needs. Each rank writes the next chunk's segments
    before it reduces this one, and copies in the results of the previous chunk
    after, so peers work meanwhile; that is also the order in which every rank
    sends, and so the order in which each takes its peers' messages.
    """
    group = call.group
    pieces = algorithms.chunks(0, flat.size, flat.itemsize)
    bounds = [algorithms.segments(b - a, group.size) for a, b in pieces]

    def segment(index: int, rank: int) -> np.ndarray:
        start = pieces[index][0]
        low, high = bounds[index][rank]
        return flat[start + low:start + high]

    def scatter(index: int) -> None:
        for peer in call.peers():
            call.send(peer, ("in", index), segment(index, peer))

    scatter(0)
    for index in range(len(pieces)):
        if index + 1 < len(pieces):
            scatter(index + 1)
        mine = segment(index, group.rank)
        for peer in call.peers():
            with call.lend(peer, ("in", index)) as part:
                algorithms.combine(op, mine, part)
        algorithms.finish(op, mine, group.size)
        call.send_all(call.peers(), ("out", index), mine)
        if index:
            _copy_in_results(call, index - 1, segment)
    _copy_in_results(call, len(pieces) - 1, segment)


def _copy_in_results(call: Call, index: int, segment: Callable[[int, int], np.ndarray]
                     ) -> None:
    """Every peer's reduced segment of chunk `index`, copied into place."""
    for peer in call.peers():
        with call.lend(peer, ("out", index)) as result:
            segment(index, peer)[...] = result


def _own_or_lent(call: Call, peer: int, phase: Any, own: np.ndarray) -> ContextManager[Any]:
    return contextlib.nullcontext(own) if peer == call.group.rank else call.lend(peer, phase)


def _ring_all_reduce(call: Call, flat: np.ndarray, op: ReduceOp) -> None:
    """Reduce-scatter then all-gather around the ring, in place, chunk by chunk: each
    chunk is passed on as soon as it is reduced (or, in the all-gather, received).

    The reduce-scatter sends views of `flat`, not copies: a segment is only
    overwritten once its final value came round the ring, which needs every rank's
    earlier message carrying it to have been received. This rank's own final segment
    never comes back to it, so it leaves as a copy: the caller may change `flat` as
    soon as the call returns. Forwarded chunks are the received buffers themselves.
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
                call.send(right, ("ag", 0, index), chunk)
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
    call.send_all(call.peers(), "all", data)
    return [data if peer == group.rank else call.recv(peer, "all")
            for peer in range(group.size)]


def all_gather_into(call: Call, array: np.ndarray, outputs: Sequence[np.ndarray]) -> None:
    """Every rank's `array` written into `outputs`, in group-rank order."""
    call.send_all(call.peers(), "all", array)
    for peer, out in enumerate(outputs):
        with _own_or_lent(call, peer, "all", array) as piece:
            out[...] = piece


def broadcast(call: Call, data: Any, src: int) -> Any:
    """`src`'s `data` on every rank; arrays of RING_THRESHOLD bytes and more are written
    into `data` in place on every rank, passed down a chain in chunks."""
    group = call.group
    if isinstance(data, np.ndarray) and data.nbytes >= algorithms.RING_THRESHOLD:
        if _on_one_host(call):
            _one_host_broadcast(call, data.reshape(-1), src)
            return data
        if group.size > 2:
            _chain_broadcast(call, data.reshape(-1), src)
            return data
    if group.rank == src:
        call.send_all(call.peers(), "bcast", data)
        return data
    return call.recv(src, "bcast")


def _one_host_broadcast(call: Call, flat: np.ndarray, src: int) -> None:
    """`src` writes each chunk once for every rank, which copies it in while `src`
    writes the next."""
    pieces = algorithms.chunks(0, flat.size, flat.itemsize)
    if call.group.rank == src:
        for index, (a, b) in enumerate(pieces):
            call.send_all(call.peers(), ("bcast", index), flat[a:b])
        return
    for index, (a, b) in enumerate(pieces):
        with call.lend(src, ("bcast", index)) as chunk:
            flat[a:b] = chunk


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
    """Return once every rank of the group has called it.

    A small group exchanges all to all, so that all leave together (a star through
    one rank costs fewer messages but lets that rank leave one message's latency
    before the others); a large one runs dissemination rounds, whose messages grow
    as size * log2(size) rather than size ** 2.
    """
    group = call.group
    if group.size <= algorithms.ALL_TO_ALL_BARRIER_MAX:
        all_gather(call, None)
        return
    for index, (to, frm) in enumerate(algorithms.dissemination_rounds(group.rank, group.size)):
        call.send(to, ("barrier", index), None)
        call.recv(frm, ("barrier", index))
