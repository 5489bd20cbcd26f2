"""A barrier in a store: every one of `count` callers counts itself in; the last opens it.

The RPC world, the static rendezvous and the launcher's exit all meet this way.
Keys: `<name>/arrived` (the count) and `<name>/open`. A wait at a barrier that lasts
says how many have arrived (`arrived_text`), not which key it waits for.
"""
from __future__ import annotations

from typing import Optional

from store.base import Store
from store.waiting import wait_keys

_FOREVER = 10.0 ** 9


def arrived_text(label: str, arrived: int, count: Optional[int], members: str = "") -> str:
    """What a caller waits for at a barrier, e.g. ``store barrier 'x': 3 of 4 arrived``
    or, naming the `members`, ``static rendezvous 'job' round 1: 1 of 2 nodes arrived``."""
    of = f" of {count}" if count else ""
    who = f" {members}" if members else ""
    return f"{label}: {arrived}{of}{who} arrived"


def arrive(store: Store, name: str, count: int) -> None:
    """Count this caller in at barrier `name`; the `count`-th caller opens it."""
    if store.add(f"{name}/arrived", 1) == count:
        store.set(f"{name}/open", b"1")


def wait_open(store: Store, name: str, timeout: Optional[float], count: Optional[int] = None,
              label: Optional[str] = None, members: str = "") -> None:
    """Wait until barrier `name` is open (None or 0: no limit); StoreTimeoutError otherwise.

    A long wait reports how many have arrived (`arrived_text`; `label` defaults to
    ``store barrier '<name>'``).
    """
    label = label or f"store barrier {name!r}"

    def what() -> str:
        return arrived_text(label, store.add(f"{name}/arrived", 0), count, members)

    wait_keys(store, [f"{name}/open"], timeout if timeout else _FOREVER, what)


def barrier(store: Store, name: str, count: int, timeout: Optional[float],
            label: Optional[str] = None, members: str = "") -> None:
    """Return once `count` callers have reached barrier `name`."""
    arrive(store, name, count)
    wait_open(store, name, timeout, count, label, members)
