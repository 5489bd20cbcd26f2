"""Agreement at start: the members of a job check that they agree on the world size
and that ranks (and names) are unique, before anyone builds on a wrong world.

Each member appends what it believes (rank, world size, name, which process it is) to
a log in the store: ``n = add("<prefix>/count", 1)``, then ``set("<prefix>/<n>", json)``.
Every member reads the log in order, in batches of what is in it (waiting for the next
entry once it has read them all), and checks each prefix with `find_conflict`, a pure
function: a conflict is seen by every member
as soon as the second of the two entries is in the log, with no polling. A member that
sees one appends an acknowledgement and, before raising, waits (bounded) until every
member that wrote a belief has acknowledged too, so that the member hosting the store
does not close it while others still need to read the log. A member that arrives after
the world had formed cannot be reported to the others, which have moved on: it raises
at once, saying so, rather than wait for acknowledgements that will not come.
"""
from __future__ import annotations

import json
import os
import socket
import time
from typing import Callable, Dict, List, NamedTuple, Optional

from actors.runtime.process.waits import SlowWait
from store.base import Store
from store.errors import StoreConnectionError, StoreTimeoutError

# How long a member that saw a conflict waits for the others to see it too.
ACK_GRACE = 10.0


class Belief(NamedTuple):
    """What one member believes about the job it joins."""

    rank: int
    world_size: int
    name: Optional[str] = None  # RPC worker names; None in a process group
    who: str = ""

    def label(self) -> str:
        return f"rank {self.rank}" + (f" ({self.name!r})" if self.name is not None else "")


def find_conflict(beliefs: List[Belief]) -> Optional[str]:
    """What is wrong with these beliefs taken together, or None if nothing yet."""
    sizes = {b.world_size for b in beliefs}
    if len(sizes) > 1:
        return "the ranks disagree on the world size: " + ", ".join(
            f"{b.label()} says {b.world_size}" for b in sorted(beliefs, key=lambda b: b.rank))
    by_rank: Dict[int, Belief] = {}
    by_name: Dict[str, Belief] = {}
    for belief in beliefs:
        first = by_rank.setdefault(belief.rank, belief)
        if first is not belief:
            return (f"rank {belief.rank} is claimed twice: by {_who(first)} and by "
                    f"{_who(belief)}")
        if belief.name is not None:
            first = by_name.setdefault(belief.name, belief)
            if first is not belief:
                return (f"duplicate worker name {belief.name!r}: rank {first.rank} and rank "
                        f"{belief.rank} both use it")
    return None


def generation(store: Store, world_size: int) -> int:
    """Which formation of a world of `world_size` on `store` this member joins, counted
    in the store: members that join the same formation get the same number, whatever
    each process did before (a process that formed a world once and forms another with
    newly started peers, or members that form two worlds in a row on one store).
    Formations on one store follow each other, every member joining each once."""
    return (store.add("joins", 1) - 1) // world_size


def ranks_text(ranks: List[int]) -> str:
    """`rank 2`, `ranks 1, 3` or `ranks 0-5, 7`: consecutive ranks as a span."""
    spans: List[List[int]] = []
    for rank in sorted(ranks):
        if spans and rank == spans[-1][1] + 1:
            spans[-1][1] = rank
        else:
            spans.append([rank, rank])
    parts = [str(a) if a == b else f"{a}, {b}" if b == a + 1 else f"{a}-{b}"
             for a, b in spans]
    return f"rank{'s' if len(ranks) != 1 else ''} {', '.join(parts)}"


def joining_text(label: str, heard: List[int], world_size: int,
                 conflict: Optional[str] = None) -> str:
    """What a member waits for while the world forms, e.g.
    ``init_rpc: waiting for ranks 1, 3 of 4 to join``."""
    if conflict is not None:
        return f"{label}: {conflict}; waiting for the others to see it too"
    joined = set(heard)
    missing = [r for r in range(world_size) if r not in joined]
    return f"{label}: waiting for {ranks_text(missing)} of {world_size} to join"


def agree(store: Store, me: Belief, timeout: float, error: Callable[[str], Exception],
          missing: Callable[[List[int]], str], label: str = "joining") -> None:
    """Publish `me` under `store` (a prefix of its own) and return once all
    `me.world_size` ranks have published beliefs that agree with it.

    `error(message)` is raised on every member that sees a conflict, as soon as it is in
    the log; `error(missing(ranks))` when the world is incomplete after `timeout` seconds.
    A long wait reports, after `label`, which ranks have not joined (`joining_text`).
    """
    me = me._replace(who=f"pid {os.getpid()} on {socket.gethostname()}")
    mine = _append(store, me._asdict())
    deadline = time.monotonic() + timeout
    beliefs: Dict[int, Belief] = {}
    seen: set = set()
    conflict: Optional[str] = None
    index = 0
    report = SlowWait(lambda: joining_text(label, [b.rank for b in beliefs.values()],
                                           me.world_size, conflict))
    with report:
        while True:
            try:
                entries = _read_from(store, index + 1,
                                     min(deadline - time.monotonic(), report.next_in()))
            except StoreConnectionError:
                if conflict is None:
                    raise
                entries = None  # the host saw every acknowledgement and closed the store
            else:
                if entries is None and time.monotonic() < deadline:
                    report.tick()  # woken to say which ranks are missing
                    continue
            if entries is None:  # out of time
                if conflict is not None:
                    raise error(conflict)
                heard = {b.rank for b in beliefs.values()}
                raise error(missing([r for r in range(me.world_size) if r not in heard]))
            for entry in entries:
                index += 1
                if "seen" in entry:
                    seen.add(entry["seen"])
                else:
                    beliefs[index] = Belief(**entry)
                if conflict is None:
                    conflict = find_conflict(list(beliefs.values()))
                    if conflict is not None:
                        formed = _formed_without(beliefs, mine)
                        try:
                            _append(store, {"seen": mine})
                        except StoreConnectionError:
                            if not formed:  # the formed world's host may be gone: say why
                                raise
                        if formed:
                            raise error(f"{conflict}; a world of {formed} had formed from "
                                        f"the claims before this one, and went on")
                        deadline = min(deadline, time.monotonic() + ACK_GRACE)
                    elif len(beliefs) == me.world_size and mine in beliefs:
                        return
            if conflict is not None and seen >= set(beliefs):
                raise error(conflict)


def _formed_without(beliefs: Dict[int, Belief], mine: int) -> int:
    """The size of the world that the first claims (by their place in the log) formed,
    agreeing, without this member's (at `mine`), or 0: its members returned before the
    conflict was in the log, so none of them will acknowledge it."""
    first = sorted(beliefs)
    size = beliefs[first[0]].world_size
    first = first[:size]
    agreed = len(first) == size and mine not in first
    return size if agreed and find_conflict([beliefs[i] for i in first]) is None else 0


def _append(store: Store, entry: dict) -> int:
    index = store.add("count", 1)
    store.set(str(index), json.dumps(entry))
    return index


def _read_from(store: Store, index: int, timeout: float) -> Optional[List[dict]]:
    """The log's entries from `index` on: every one counted so far, and at least entry
    `index`, waited for up to `timeout` seconds; None if it never came. One batch
    instead of a round trip per entry keeps a world of 64 from costing 64 × 64 reads."""
    if timeout <= 0:
        return None
    try:
        store.wait([str(index)], timeout)
        last = store.add("count", 0)
        keys = [str(i) for i in range(index, last + 1)]
        store.wait(keys, timeout)  # counted before set: a late one is moments away
    except StoreTimeoutError:
        return None
    return [json.loads(value) for value in store.multi_get(keys)]


def _who(belief: Belief) -> str:
    return (f"worker {belief.name!r} ({belief.who})" if belief.name is not None
            else belief.who)
