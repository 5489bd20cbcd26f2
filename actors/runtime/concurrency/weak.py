"""`members`: a copy of a `weakref.WeakSet` that other threads add to without a lock.

Copying a WeakSet iterates it in Python, so another thread may add to it meanwhile,
and the copy then raises "Set changed size during iteration" (members that die
meanwhile are handled by the set itself). A copy that is retried until it completes
is one the readers of a process-wide registry can take without holding up its writers.
"""
from __future__ import annotations

import weakref
from typing import List, TypeVar

T = TypeVar("T")


def members(registry: "weakref.WeakSet[T]") -> List[T]:
    """The live members of `registry` now, in no order."""
    while True:
        try:
            return list(registry)
        except RuntimeError:  # another thread added a member while this one copied
            continue
