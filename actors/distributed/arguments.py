"""The checks every collective and point-to-point call makes of its arguments: the
group it runs in, the ranks it names, and the arrays it is given."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from .errors import DistError
from .group import ProcessGroup
from .world import current, group_or_default

Group = Optional[ProcessGroup]


def member(group: Group) -> ProcessGroup:
    """`group` (None: the default group); DistError if this rank is not in it."""
    pg = group_or_default(group)
    if pg.rank < 0:
        raise DistError(f"rank {current().group.rank} is not a member of this group "
                        f"(ranks {pg.ranks})")
    return pg


def group_rank(pg: ProcessGroup, rank: int, name: str) -> int:
    """The rank within `pg` of global rank `rank` (the argument `name`); ValueError if
    `pg` has no such rank."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank not in pg.ranks:
        raise ValueError(f"{name}={rank!r} is not a rank of this group (ranks {pg.ranks})")
    return pg.ranks.index(rank)


def rooted(tensor: Any, group: Group, root: int, role: str, items: Optional[Sequence[Any]],
           items_name: str) -> tuple:
    """(array, group, the root's group rank, `items` checked against the array on the
    root and None elsewhere) for a call with a root that holds a list."""
    array = array_of(tensor)
    pg = group_or_default(group)
    at = group_rank(pg, root, role)
    listed = arrays_of(items, pg.size, items_name, like=array) if pg.rank == at else None
    return array, pg, at, listed


def array_of(value: Any) -> np.ndarray:
    """The numpy array behind `value` (an ndarray, or a tensor whose `.data` is one)."""
    array = value if isinstance(value, np.ndarray) else getattr(value, "data", None)
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected a numpy array or a tensor, got {type(value).__name__}")
    if not array.flags.c_contiguous:
        raise ValueError("collectives need C-contiguous arrays (np.ascontiguousarray)")
    return array


def written(call: str, name: str, *arrays: np.ndarray) -> None:
    """ValueError, before anything is sent, if one of `arrays` (the argument `name` of
    `call`, into which the call writes its result) is read-only: found only when the
    result arrives, it would fail this rank in the middle of the exchange and leave the
    others waiting for its part."""
    if any(not array.flags.writeable for array in arrays):
        raise ValueError(f"{call}: {name} is read-only, and the call writes its result into "
                         f"it")


def arrays_of(values: Optional[Sequence[Any]], count: int, name: str,
              like: Optional[np.ndarray] = None) -> List[np.ndarray]:
    """The arrays behind the `count` items of `values` (the argument `name`), each with
    `like`'s shape and dtype when given; ValueError otherwise."""
    if values is None or len(values) != count:
        raise ValueError(f"{name} must hold {count} arrays, got "
                         f"{'None' if values is None else len(values)}")
    arrays = [array_of(v) for v in values]
    if like is not None:
        for array in arrays:
            if array.shape != like.shape or array.dtype != like.dtype:
                raise ValueError(f"{name}: {array.dtype}{list(array.shape)} does not match "
                                 f"{like.dtype}{list(like.shape)}")
    return arrays


def split(array: np.ndarray, count: int, shape: tuple) -> List[np.ndarray]:
    """`array` (of `count` times `shape`'s elements) as `count` consecutive views of
    `shape`: writing into a piece writes into `array`, 0-d pieces included (iterating
    over a 1-d array would give copies as numpy scalars)."""
    rows = array.reshape(count, int(np.prod(shape, dtype=np.int64)))
    return [row.reshape(shape) for row in rows]
