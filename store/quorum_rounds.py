"""The TCPStore server's quorum rounds: parked members, their deadlines, one release.

`QuorumRounds` applies the rule of `store.quorum.QuorumRound` to the requests of a
store server, on its mailbox thread (no lock): a member's request is parked until its
round is released, then every parked member of the round is answered with the same
result at once, encoded once (`actors.runtime.Encoded`). A member whose deadline
passes is answered with StoreTimeoutError and withdrawn (unless the deadline releases
the round); a member whose connection is lost has departed (`QuorumRound.depart`),
which may release the round for those left. Released rounds are
remembered (the last `RELEASED_QUORUMS`), so a member arriving late gets the result
that does not name it.
"""
from __future__ import annotations

import collections
from typing import Any, Callable, Dict, List, Optional, Sequence, Set

from actors.runtime import Encoded, Future, ProtocolError
from actors.runtime.process.log import get_logger
from store.errors import StoreTimeoutError
from store.quorum import QuorumRound

log = get_logger(__name__)

# How many released quorum rounds the server remembers, for members that arrive late.
RELEASED_QUORUMS = 1024


class _Parked:
    """One member's request waiting for its round's release."""

    __slots__ = ("future", "sender", "timer")

    def __init__(self, sender: bytes):
        self.future, self.sender, self.timer = Future(), sender, None

    def settle(self, value: Any) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if not self.future.done():
            self.future.set_result(value)


class _Round:
    __slots__ = ("rule", "parked")

    def __init__(self, name: str):
        self.rule = QuorumRound(name)
        self.parked: Dict[str, _Parked] = {}


class QuorumRounds:
    """Every open round of one server. `call_later(delay, fn, *args)` is the server
    actor's timer (its callbacks run on the mailbox thread)."""

    def __init__(self, call_later: Callable[..., Any]):
        self._call_later = call_later
        self._open: Dict[str, _Round] = {}
        self._released: "collections.OrderedDict[str, Encoded]" = collections.OrderedDict()
        # Rounds nobody waits in any more, by who departed them: the one thing a later
        # arrival there needs (the last RELEASED_QUORUMS of them).
        self._departed: "collections.OrderedDict[str, Set[str]]" = collections.OrderedDict()

    def arrive(self, name: str, member: str, data: bytes, sender: bytes, *,
               count: Optional[int], expect: Optional[Sequence[str]],
               min_size: Optional[int], timeout: Optional[float]) -> Any:
        """Count `member` in at round `name`: the result now if the round is (or was)
        released, else a Future answered at its release."""
        released = self._released.get(name)
        if released is not None:
            return released
        round_ = self._open.get(name)
        if round_ is None:
            round_ = self._open[name] = _Round(name)
            round_.rule.departed.update(self._departed.pop(name, ()))
        round_.rule.arrive(member, data, count, expect, min_size)
        parked = _Parked(sender)
        previous = round_.parked.get(member)
        round_.parked[member] = parked
        if previous is not None and not previous.future.done():
            if previous.timer is not None:
                previous.timer.cancel()
            previous.future.set_exception(ProtocolError(
                f"quorum {name!r}: member {member!r} arrived again from another request"))
        if round_.rule.complete():
            self._release(name)
        elif timeout is not None:
            parked.timer = self._call_later(timeout, self._deadline, name, member, parked,
                                            timeout)
        return parked.future

    def waiting_in(self, name: str) -> List[str]:
        """The members parked in round `name` (none once it is released)."""
        round_ = self._open.get(name)
        return [] if round_ is None else sorted(round_.rule.arrivals)

    def sender_lost(self, identity: bytes) -> None:
        """A connection closed: withdraw the members it had parked."""
        for name, round_ in list(self._open.items()):
            for member, parked in list(round_.parked.items()):
                if parked.sender == identity and name in self._open:
                    log.info("quorum_member_lost", quorum=name, member=member)
                    self._withdraw(name, member, departed=True)

    def _deadline(self, name: str, member: str, parked: _Parked, timeout: float) -> None:
        round_ = self._open.get(name)
        if round_ is None or parked.future.done():
            return
        if round_.rule.enough():
            self._release(name)
            return
        missing, arrived = round_.rule.missing(), sorted(round_.rule.arrivals)
        self._withdraw(name, member)
        parked.future.set_exception(StoreTimeoutError(
            "quorum", missing, timeout,
            detail=f"round {name!r} had {arrived} when {member!r} gave up"))

    def _withdraw(self, name: str, member: str, departed: bool = False) -> None:
        round_ = self._open[name]
        if departed:
            round_.rule.depart(member)
        else:
            round_.rule.withdraw(member)
        round_.parked.pop(member, None)
        if not round_.parked:
            del self._open[name]
            if round_.rule.departed:
                self._departed[name] = set(round_.rule.departed)
                while len(self._departed) > RELEASED_QUORUMS:
                    self._departed.popitem(last=False)
        elif round_.rule.complete():  # the intersection of expectations may have shrunk
            self._release(name)

    def _release(self, name: str) -> None:
        round_ = self._open.pop(name)
        result = Encoded(round_.rule.result())  # encoded once for every parked member
        self._released[name] = result
        while len(self._released) > RELEASED_QUORUMS:
            self._released.popitem(last=False)
        for parked in round_.parked.values():
            parked.settle(result)
