"""A barrier in a store: every one of `count` callers counts itself in; the last opens it.

The RPC world, the static rendezvous and the launcher's exit all meet this way.
Keys: `<name>/arrived` (the count) and `<name>/open`; members that name themselves
arrive in `<name>/members` ("0,2,") instead of the count, so that a barrier can open
without members known to be lost (`wait_open`'s `lost`). A wait at a barrier that
lasts says how many have arrived (`arrived_text`), and which members have not when
they name themselves, not which key it waits for.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence, Set

from store.agreement import ranks_text
from store.base import Store
from store.waiting import wait_keys

_FOREVER = 10.0 ** 9
LOST_CHECK_EVERY = 0.25  # seconds between two looks at which members were lost


def arrived_text(label: str, arrived: int, count: Optional[int], members: str = "",
                 missing: Sequence[int] = ()) -> str:
    """What a caller waits for at a barrier, e.g. ``store barrier 'x': 3 of 4 arrived``
    or, naming the `members`, ``static rendezvous 'job' round 1: 1 of 2 nodes arrived``;
    with the `missing` members, when they arrive naming themselves,
    ``rpc shutdown of 'w1': 2 of 3 workers arrived (missing: rank 0)``."""
    of = f" of {count}" if count else ""
    who = f" {members}" if members else ""
    absent = f" (missing: {ranks_text(list(missing))})" if missing else ""
    return f"{label}: {arrived}{of}{who} arrived{absent}"


def arrive(store: Store, name: str, count: int, member: Optional[int] = None) -> None:
    """Count this caller in at barrier `name` (as `member`, if given); the `count`-th
    caller opens it."""
    if member is None:
        if store.add(f"{name}/arrived", 1) == count:
            store.set(f"{name}/open", b"1")
        return
    # One append records both that a member arrived and which one, so a member that
    # dies meanwhile is either in or out, never counted without its name.
    add_member(store, f"{name}/members", member)
    if len(_members(store, name)) >= count:
        store.set(f"{name}/open", b"1")


def add_member(store: Store, key: str, member: int) -> None:
    """Add `member` to the set of members at `key` ("0,2,"), in one atomic append."""
    store.append(key, f"{member},")


def members_at(store: Store, key: str) -> Set[int]:
    """The set of members at `key` (`add_member`); empty while there is none."""
    if not store.check([key]):
        return set()
    return {int(member) for member in store.get(key).decode().split(",") if member}


def _members(store: Store, name: str) -> Set[int]:
    return members_at(store, f"{name}/members")


def wait_open(store: Store, name: str, timeout: Optional[float], count: Optional[int] = None,
              label: Optional[str] = None, members: str = "",
              lost: Optional[Callable[[], Set[int]]] = None) -> Set[int]:
    """Wait until barrier `name` is open (None or 0: no limit); StoreTimeoutError otherwise.

    With `lost` (members that will never arrive, asked every LOST_CHECK_EVERY seconds),
    the barrier also opens once every member but those has arrived; members then
    arrive naming themselves, so that one lost after it arrived is not counted twice.
    Returns the members it opened without (empty without `lost`).
    A long wait reports how many have arrived and, of members that name themselves,
    which have not (`arrived_text`; `label` defaults to ``store barrier '<name>'``).
    """
    label = label or f"store barrier {name!r}"

    def what() -> str:
        named = _members(store, name)
        missing = sorted(set(range(count)) - named) if named and count else []
        return arrived_text(label, len(named) or store.add(f"{name}/arrived", 0), count,
                            members, missing)

    def enough() -> bool:
        arrived = _members(store, name)
        away = lost() - arrived
        if not away or len(arrived) + len(away) < count:
            return False
        store.set(f"{name}/open", b"1")
        return True

    if lost is None or count is None:
        wait_keys(store, [f"{name}/open"], timeout if timeout else _FOREVER, what)
        return set()
    wait_keys(store, [f"{name}/open"], timeout if timeout else _FOREVER, what,
              enough, LOST_CHECK_EVERY)
    if len(_members(store, name)) >= count:
        return set()
    return lost() - _members(store, name)


def barrier(store: Store, name: str, count: int, timeout: Optional[float],
            label: Optional[str] = None, members: str = "", member: Optional[int] = None,
            lost: Optional[Callable[[], Set[int]]] = None) -> Set[int]:
    """Return once `count` callers have reached barrier `name` (see `wait_open` for
    `member` and `lost`, and what it returns)."""
    arrive(store, name, count, member)
    return wait_open(store, name, timeout, count, label, members, lost)
