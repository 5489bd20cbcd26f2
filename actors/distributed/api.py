"""torch.distributed's collective functions on numpy arrays (point to point: `p2p`).

Arrays are C-contiguous numpy arrays, or objects whose `.data` is one (an
`engine.Tensor`); results are written in place where torch writes in place. `src`
and `dst` are global ranks. With ``async_op=True`` a call returns a `Work`.
"""
from __future__ import annotations

import time
from typing import Any, List, Optional, Sequence

import cloudpickle

from . import collectives
from .algorithms import ReduceOp, check_op
from .arguments import Group, array_of, arrays_of, group_rank, rooted, split, written
from .errors import CollectiveTimeoutError, DistError
from .group import Call, ProcessGroup, Work
from .world import group_or_default


# ---- who is who ------------------------------------------------------------------------

def get_rank(group: Group = None) -> int:
    """This process's rank in `group` (the default group: its global rank); -1 if not a member."""
    return group_or_default(group).rank


def get_world_size(group: Group = None) -> int:
    """The number of ranks in `group` (the default group when None); -1 if this process is
    not a member, as torch's."""
    pg = group_or_default(group)
    return pg.size if pg.rank >= 0 else -1


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    """The global rank of `group`'s member number `group_rank`.

    ValueError, as torch's, when `group_rank` is not in ``[0, size)``: a negative one
    would otherwise count from the end of the group.
    """
    if isinstance(group_rank, bool) or not isinstance(group_rank, int) \
            or not 0 <= group_rank < len(group.ranks):
        raise ValueError(f"group rank {group_rank!r} is not part of the group "
                         f"(ranks {group.ranks}, group ranks 0-{len(group.ranks) - 1})")
    return group.ranks[group_rank]


def get_group_rank(group: ProcessGroup, global_rank: int) -> int:
    """The rank in `group` of the process with global rank `global_rank`; -1 if it is not a
    member."""
    return group.ranks.index(global_rank) if global_rank in group.ranks else -1


# ---- collectives -------------------------------------------------------------------------

def all_reduce(tensor: Any, op: ReduceOp = ReduceOp.SUM, group: Group = None,
               async_op: bool = False) -> Optional[Work]:
    """Reduce `tensor` over every rank of `group` with `op`, leaving the result in place on each.

    The arrays must have the same shape and dtype on every rank (a rank that sees a
    different call raises `CollectiveMismatchError` naming both). Returns a `Work` with
    ``async_op=True``, else None once the result is in `tensor`; a rank lost on the way
    raises `RankLostError`.
    """
    array = array_of(tensor)
    check_op(op, array.dtype)
    written("all_reduce", "tensor", array)

    def body(call: Call) -> None:
        collectives.all_reduce(call, array, op)

    return _run(group, ("all_reduce", op.name, array.dtype.str, array.shape), body, async_op,
                [tensor])


def broadcast(tensor: Any, src: int, group: Group = None, async_op: bool = False
              ) -> Optional[Work]:
    """Copy `tensor` of global rank `src` into `tensor` on every other rank of `group`, in place.

    Returns a `Work` with ``async_op=True``, else None. ValueError when `src` is not a
    member of the group.
    """
    array = array_of(tensor)
    pg = group_or_default(group)
    root = group_rank(pg, src, "src")
    if pg.rank != root:
        written("broadcast", "tensor", array)

    def body(call: Call) -> None:
        result = collectives.broadcast(call, array, root)
        if result is not array:
            array[...] = result

    return _run(pg, ("broadcast", root, array.dtype.str, array.shape), body, async_op,
                [tensor])


def reduce(tensor: Any, dst: int, op: ReduceOp = ReduceOp.SUM, group: Group = None,
           async_op: bool = False) -> Optional[Work]:
    """Reduce `tensor` over `group` with `op` into `tensor` on global rank `dst` only.

    The other ranks' arrays are left as they were (torch leaves them undefined).
    Returns a `Work` with ``async_op=True``, else None.
    """
    array = array_of(tensor)
    check_op(op, array.dtype)
    pg = group_or_default(group)
    root = group_rank(pg, dst, "dst")
    if pg.rank == root:
        written("reduce", "tensor", array)

    def body(call: Call) -> None:
        result = collectives.reduce(call, array, op, root)
        if result is not None:
            array[...] = result

    return _run(pg, ("reduce", root, op.name, array.dtype.str, array.shape), body, async_op,
                [tensor])


def all_gather(tensor_list: List[Any], tensor: Any, group: Group = None,
               async_op: bool = False) -> Optional[Work]:
    """Fill `tensor_list` on every rank with every rank's `tensor`, in group rank order.

    `tensor_list` holds one array per rank of the group, each of `tensor`'s shape and
    dtype (ValueError otherwise). Returns a `Work` with ``async_op=True``, else None.
    """
    array = array_of(tensor)
    pg = group_or_default(group)
    outputs = arrays_of(tensor_list, pg.size, "tensor_list", like=array)
    written("all_gather", "tensor_list", *outputs)

    def body(call: Call) -> None:
        collectives.all_gather_into(call, array, outputs)

    return _run(pg, ("all_gather", array.dtype.str, array.shape), body, async_op,
                list(tensor_list))


def all_gather_into_tensor(output_tensor: Any, input_tensor: Any, group: Group = None,
                           async_op: bool = False) -> Optional[Work]:
    """`all_gather` into one array: `output_tensor` holds the group's inputs one after the other.

    `output_tensor` must have `input_tensor`'s dtype and world-size times its elements
    (ValueError otherwise). Returns a `Work` with ``async_op=True``, else None.
    """
    array, out = array_of(input_tensor), array_of(output_tensor)
    written("all_gather_into_tensor", "output_tensor", out)
    pg = group_or_default(group)
    if out.size != array.size * pg.size or out.dtype != array.dtype:
        raise ValueError(f"all_gather_into_tensor: output of {out.dtype}{list(out.shape)} "
                         f"cannot hold {pg.size} × {array.dtype}{list(array.shape)}")

    def body(call: Call) -> None:
        collectives.all_gather_into(call, array, split(out, pg.size, array.shape))

    return _run(pg, ("all_gather", array.dtype.str, array.shape), body, async_op,
                [output_tensor])


def gather(tensor: Any, gather_list: Optional[List[Any]] = None, dst: int = 0,
           group: Group = None, async_op: bool = False) -> Optional[Work]:
    """Collect every rank's `tensor` into `gather_list` on global rank `dst`, in group rank order.

    `gather_list` is read on `dst` only (one array per rank, of `tensor`'s shape and
    dtype) and ignored on the others, which may pass None as in torch. Returns a `Work`
    with ``async_op=True``, else None.
    """
    array, pg, root, outputs = rooted(tensor, group, dst, "dst", gather_list, "gather_list")
    written("gather", "gather_list", *(outputs or ()))

    def body(call: Call) -> None:
        pieces = collectives.gather(call, array, root)
        if pieces is not None:
            for out, piece in zip(outputs, pieces):
                out[...] = piece

    return _run(pg, ("gather", root, array.dtype.str, array.shape), body, async_op,
                list(gather_list) if outputs is not None else [])


def scatter(tensor: Any, scatter_list: Optional[List[Any]] = None, src: int = 0,
            group: Group = None, async_op: bool = False) -> Optional[Work]:
    """Write piece i of `scatter_list` on global rank `src` into `tensor` on group rank i.

    `scatter_list` is read on `src` only (one array per rank, of `tensor`'s shape and
    dtype) and ignored on the others, which may pass None as in torch. Returns a `Work`
    with ``async_op=True``, else None.
    """
    array, pg, root, pieces = rooted(tensor, group, src, "src", scatter_list, "scatter_list")
    written("scatter", "tensor", array)

    def body(call: Call) -> None:
        array[...] = collectives.scatter(call, pieces, root)

    return _run(pg, ("scatter", root, array.dtype.str, array.shape), body, async_op,
                [tensor])


def reduce_scatter(output: Any, input_list: List[Any], op: ReduceOp = ReduceOp.SUM,
                   group: Group = None, async_op: bool = False) -> Optional[Work]:
    """Reduce `input_list` over `group` with `op`; group rank i receives the reduction of piece i.

    `input_list` holds one array per rank, each of `output`'s shape and dtype. The
    result is written into `output`. Returns a `Work` with ``async_op=True``, else None.
    """
    out = array_of(output)
    check_op(op, out.dtype)
    written("reduce_scatter", "output", out)
    pg = group_or_default(group)
    pieces = arrays_of(input_list, pg.size, "input_list", like=out)

    def body(call: Call) -> None:
        out[...] = collectives.reduce_scatter(call, pieces, op)

    return _run(pg, ("reduce_scatter", op.name, out.dtype.str, out.shape), body, async_op,
                [output])


def reduce_scatter_tensor(output: Any, input: Any, op: ReduceOp = ReduceOp.SUM,
                          group: Group = None, async_op: bool = False) -> Optional[Work]:
    """`reduce_scatter` of one array: `input` is split into world-size pieces of `output`'s shape.

    ValueError when `input` does not hold exactly world-size times `output`'s elements
    of its dtype. Returns a `Work` with ``async_op=True``, else None.
    """
    out, array = array_of(output), array_of(input)
    pg = group_or_default(group)
    if array.size != out.size * pg.size or out.dtype != array.dtype:
        raise ValueError(f"reduce_scatter_tensor: input {array.dtype}{list(array.shape)} is "
                         f"not {pg.size} × output {out.dtype}{list(out.shape)}")
    return reduce_scatter(output, split(array, pg.size, out.shape), op, pg, async_op)


def all_to_all(output_tensor_list: List[Any], input_tensor_list: List[Any],
               group: Group = None, async_op: bool = False) -> Optional[Work]:
    """Send piece j of `input_tensor_list` to group rank j; piece i received lands in
    `output_tensor_list[i]`.

    Both lists hold one array per rank; a received piece of another shape or dtype than
    its output raises ValueError. Returns a `Work` with ``async_op=True``, else None.
    """
    pg = group_or_default(group)
    inputs = arrays_of(input_tensor_list, pg.size, "input_tensor_list")
    outputs = arrays_of(output_tensor_list, pg.size, "output_tensor_list")
    written("all_to_all", "output_tensor_list", *outputs)
    shapes = tuple((a.dtype.str, a.shape) for a in inputs)

    def body(call: Call) -> None:
        received = collectives.all_to_all(call, inputs)
        for sender, out, piece in zip(pg.ranks, outputs, received):
            if out.shape != piece.shape or out.dtype != piece.dtype:
                raise ValueError(f"all_to_all: rank {sender} sent {piece.dtype}"
                                 f"{list(piece.shape)} for rank {pg.ranks[pg.rank]}'s output "
                                 f"of {out.dtype}{list(out.shape)}")
            out[...] = piece

    return _run(pg, ("all_to_all", len(shapes)), body, async_op, list(output_tensor_list))


def barrier(group: Group = None, async_op: bool = False, device_ids: Any = None
            ) -> Optional[Work]:
    """Wait until every rank of `group` has called `barrier`.

    `device_ids` is accepted for torch's signature and ignored. Returns a `Work` with
    ``async_op=True``, else None; a lost rank raises `RankLostError`.
    """
    return _run(group, ("barrier",), collectives.barrier, async_op)


def monitored_barrier(group: Group = None, timeout: Any = None,
                      wait_all_ranks: bool = False) -> None:
    """A barrier in which rank 0 names every rank that did not arrive within `timeout`.

    The other ranks raise too: rank 0 tells them, or they time out themselves.
    """
    from store.base import to_seconds

    pg = group_or_default(group)
    seconds = pg.timeout if timeout is None else to_seconds(timeout, "timeout")

    def body(call: Call) -> None:
        call.deadline = time.monotonic() + seconds
        if pg.rank != 0:
            call.deadline += max(1.0, seconds)  # for rank 0's verdict to arrive
            call.send(0, "arrived", None)
            verdict = call.recv(0, "verdict")
            if verdict is not None:
                raise DistError(verdict)
            return
        missing = []
        for peer in range(1, pg.size):
            try:
                call.recv(peer, "arrived")
            except CollectiveTimeoutError:
                missing.append(pg.ranks[peer])
                if not wait_all_ranks:
                    break
        verdict = None if not missing else (
            "monitored_barrier: " + ", ".join(f"rank {r}" for r in missing)
            + f" did not arrive within {seconds:g}s")
        for peer in range(1, pg.size):
            call.send(peer, "verdict", verdict)
        if verdict is not None:
            raise DistError(verdict)

    _run(pg, ("monitored_barrier",), body, False)


# ---- objects ---------------------------------------------------------------------------

def all_gather_object(object_list: List[Any], obj: Any, group: Group = None) -> None:
    """Fill `object_list` on every rank with every rank's `obj`, pickled with cloudpickle.

    `object_list` must have one entry per rank of the group (ValueError otherwise); its
    entries are replaced in group rank order.
    """
    pg = group_or_default(group)
    if len(object_list) != pg.size:
        raise ValueError(f"object_list must have {pg.size} entries, got {len(object_list)}")
    blob = cloudpickle.dumps(obj)

    def body(call: Call) -> None:
        object_list[:] = [cloudpickle.loads(b) for b in collectives.all_gather(call, blob)]

    _run(pg, ("all_gather_object",), body, False)


def broadcast_object_list(object_list: List[Any], src: int = 0, group: Group = None,
                          device: Any = None) -> None:
    """Replace the entries of `object_list` on every rank with those of global rank `src`.

    The objects travel pickled with cloudpickle; the lists must have the same length on
    every rank (ValueError otherwise). `device` is accepted for torch's signature and
    ignored.
    """
    pg = group_or_default(group)
    root = group_rank(pg, src, "src")
    blob = cloudpickle.dumps(list(object_list)) if pg.rank == root else None

    def body(call: Call) -> None:
        received = cloudpickle.loads(collectives.broadcast(call, blob, root))
        if len(received) != len(object_list):
            raise ValueError(f"broadcast_object_list: rank {src} sent {len(received)} "
                             f"objects into a list of {len(object_list)}")
        object_list[:] = received

    _run(pg, ("broadcast_object_list", root), body, False)


# ---- helpers ---------------------------------------------------------------------------

def _run(group: Group, describe: tuple, body: Any, async_op: bool,
         outputs: Sequence[Any] = ()) -> Optional[Work]:
    """Run `body` as the group's next call; with `async_op`, a Work whose result is
    `outputs` (torch's list of output tensors), else None."""
    def run(call: Call) -> List[Any]:
        body(call)
        return list(outputs)

    work = group_or_default(group).run(describe, run, async_op)
    return work if async_op else None
