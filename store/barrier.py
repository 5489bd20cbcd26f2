"""A barrier in a store: every one of `count` callers counts itself in; the last opens it.

The RPC world, the static rendezvous and the launcher's exit all meet this way.
Keys: `<name>/arrived` (the count) and `<name>/open`.
"""
from __future__ import annotations

from typing import Optional

from store.base import Store

_FOREVER = 10.0 ** 9


def arrive(store: Store, name: str, count: int) -> None:
    """Count this caller in at barrier `name`; the `count`-th caller opens it."""
    if store.add(f"{name}/arrived", 1) == count:
        store.set(f"{name}/open", b"1")


def wait_open(store: Store, name: str, timeout: Optional[float]) -> None:
    """Wait until barrier `name` is open (None or 0: no limit); StoreTimeoutError otherwise."""
    store.wait([f"{name}/open"], timeout if timeout else _FOREVER)


def barrier(store: Store, name: str, count: int, timeout: Optional[float]) -> None:
    """Return once `count` callers have reached barrier `name`."""
    arrive(store, name, count)
    wait_open(store, name, timeout)
