"""The rules of a store quorum (a barrier whose members are named), on plain data.

A quorum round has a name; each member arrives once with a little data and waits for
the round's release, which hands every waiting member the same result: the members
that arrived, with their data. A round is released as soon as

- `count` members have arrived (a plain barrier), or
- every member that the arrivals expect has arrived: each arrival may name the
  members it waits for (`expect`), and the round waits for the intersection of
  those sets, so a member that knows a peer is lost can stop the round waiting for
  it while one that does not know yet cannot make it wait; or
- a waiter's deadline passes while at least `min_size` members are there.

A waiter whose deadline passes without any of these is told which members are missing
and its arrival is withdrawn. A member whose connection is lost is withdrawn too, and
has *departed*: no arrival's `expect` makes the round wait for it until it arrives
again, since a killed process can never arrive (a `count` still counts arrivals only).
A member that arrives at a round already released gets that round's result, which
does not name it: it was too late for that round.

`QuorumRound` holds no lock, does no I/O and reads no clock: the TCPStore server
applies it on its mailbox thread, and unit tests drive it directly. A client that
waits at a round arrives again when whom it expects changes (`arrive_again_if_changed`).
"""
from __future__ import annotations

from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Set

from actors.runtime.process.log import get_logger
from store.base import check_keys

log = get_logger(__name__)


def quorum_wait_text(name: str, member: str, count: Optional[int],
                     expect: Optional[Sequence[str]], min_size: Optional[int]) -> str:
    """What a member waiting at a round asked for, e.g.
    ``store quorum 'q/3' as 'replica-1': waiting for 4 members``."""
    wanted = ([f"members {sorted(expect)!r}"] if expect is not None else []) + \
        ([f"{count} members"] if count is not None else [])
    text = f"store quorum {name!r} as {member!r}: waiting for {' or '.join(wanted) or 'release'}"
    return text + (f" (at least {min_size} at the deadline)" if min_size is not None else "")


class QuorumRound:
    """The arrivals of one named round and the rule that releases it."""

    __slots__ = ("name", "arrivals", "_expects", "departed", "count", "min_size")

    def __init__(self, name: str):
        self.name = name
        self.arrivals: Dict[str, bytes] = {}
        self._expects: Dict[str, FrozenSet[str]] = {}  # member -> whom it waits for
        self.departed: Set[str] = set()  # withdrawn with their connection, not back
        self.count: Optional[int] = None
        self.min_size: Optional[int] = None

    def arrive(self, member: str, data: bytes, count: Optional[int] = None,
               expect: Optional[Sequence[str]] = None, min_size: Optional[int] = None) -> None:
        """Count `member` in (again: its newer data replaces the older). ValueError when
        its `count` or `min_size` differs from an earlier arrival's: members must agree."""
        for field, value in (("count", count), ("min_size", min_size)):
            current = getattr(self, field)
            if value is not None and current is not None and value != current:
                raise ValueError(f"quorum {self.name!r}: member {member!r} gives {field}="
                                 f"{value} but an earlier member gave {current}")
            if value is not None:
                setattr(self, field, value)
        self.arrivals[member] = data
        self.departed.discard(member)
        if expect is not None:
            self._expects[member] = frozenset(expect)

    def withdraw(self, member: str) -> None:
        """Forget `member`'s arrival (it gave up at its deadline)."""
        self.arrivals.pop(member, None)
        self._expects.pop(member, None)

    def depart(self, member: str) -> None:
        """Forget `member`'s arrival, and stop waiting for it by name until it arrives
        again (its connection was lost)."""
        self.withdraw(member)
        self.departed.add(member)

    def expected(self) -> Optional[FrozenSet[str]]:
        """The members the round waits for by name, None if no arrival named any."""
        if not self._expects:
            return None
        sets = iter(self._expects.values())
        common = next(sets)
        for other in sets:
            common = common & other
        return common - self.departed

    def complete(self) -> bool:
        """Whether the round can be released now, before any deadline."""
        if not self.arrivals:
            return False
        if self.count is not None and len(self.arrivals) >= self.count:
            return True
        expected = self.expected()
        return expected is not None and expected <= self.arrivals.keys()

    def enough(self) -> bool:
        """Whether a deadline that passes now releases the round (`min_size` reached)."""
        return self.min_size is not None and len(self.arrivals) >= max(1, self.min_size)

    def missing(self) -> List[str]:
        """Who the round still waits for, for an error message."""
        expected = self.expected()
        if expected is not None:
            return sorted(expected - self.arrivals.keys())
        if self.count is not None:
            return [f"{self.count - len(self.arrivals)} of {self.count} members"]
        return []

    def result(self) -> Dict[str, bytes]:
        """The released round: every member that arrived, by name, with its data."""
        return dict(sorted(self.arrivals.items()))


class ArriveAgain(Exception):
    """A quorum member's expectations changed while it waited: it arrives again."""

    def __init__(self, expect: List[str]):
        super().__init__(expect)
        self.expect = expect


def arrive_again_if_changed(payload: dict, expect_now: Callable[[], Sequence[str]]) -> None:
    """Raise ArriveAgain when `expect_now()` names other members than the arrival in
    `payload`; if it raises, the arrival stands (a WARNING says why)."""
    try:
        now = check_keys(expect_now(), "expect")
    except Exception as error:  # noqa: BLE001 - the arrival stands as it is
        log.warning("quorum_expect_now_failed", quorum=payload["key"],
                    error=f"{type(error).__name__}: {error}")
        return
    if set(now) != set(payload["expect"]):
        raise ArriveAgain(now)
