"""The decisions of a fault-tolerant step, on plain data: who is in, who heals from whom,
whether the step counts.

`plan` turns a released quorum round (each member's replica id and step) into this
member's `Plan`: its rank in the step's group (replica ids in sorted order, so every
member computes the same ranks and a replayed membership gives the same reduction
order), the step every member will be at (the highest among them), which members
must first receive the state (those behind it, and before the first commit those whose
state differs from group rank 0's) and from whom (the up-to-date members in turn),
how many members contribute gradients, and whether the group must be formed anew.
`commits` decides from the commit round whether the step counts, and
`membership_change` says what changed since the last step. Nothing here does I/O;
`engine.ft.manager` moves the messages.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, Optional, Tuple


@dataclass(frozen=True)
class Arrival:
    """What a member says when it arrives at a round: its step, which process it is and,
    before any step committed, a digest of the state it holds ("" after)."""

    step: int
    incarnation: str
    digest: str = ""

    def encode(self) -> bytes:
        return json.dumps({"step": self.step, "incarnation": self.incarnation,
                           "digest": self.digest}).encode()

    @staticmethod
    def decode(data: bytes) -> "Arrival":
        fields = json.loads(data.decode())  # text: bytes make json guess the encoding
        return Arrival(int(fields["step"]), str(fields["incarnation"]),
                       str(fields.get("digest", "")))


@dataclass(frozen=True)
class Plan:
    """One member's part in one step, the same on every member but for `rank`."""

    round: int
    members: Tuple[str, ...]  # replica ids by group rank
    incarnations: Tuple[str, ...]  # which process each member is, by group rank
    rank: int
    max_step: int
    heal_from: Optional[int]  # group rank this member receives the state from, if behind
    send_to: Tuple[int, ...]  # group ranks this member sends its state to
    participants: int  # members at `max_step`: they contribute gradients
    reconfigure: bool  # the group differs from the previous step's (or that one broke)

    @property
    def healing(self) -> bool:
        """Whether this member is behind and receives the state from `heal_from` this step."""
        return self.heal_from is not None

    @property
    def size(self) -> int:
        """The number of members in this step's group."""
        return len(self.members)


class StaleQuorumError(ValueError):
    """A round that must not be this member's next step: its members are all behind a
    step this member saw (those that were there are slow, not known lost yet), or the
    others went on past it. Going on there would train a stale copy apart from theirs."""


def plan(round_: int, arrivals: Mapping[str, Arrival], me: str,
         previous: Optional[Tuple[str, ...]] = None, broken: bool = False,
         seen_step: int = 0) -> Plan:
    """This member's plan for a released round; ValueError if it is not in it,
    StaleQuorumError if no member is at `seen_step` (the highest step of the last
    round this member was in).

    `previous` holds the incarnations of the group this member used last step
    (None: none yet) and `broken` whether that group failed: either way, or when
    membership changed, the group is formed anew.
    """
    if me not in arrivals:
        raise ValueError(f"replica {me!r} is not in quorum round {round_} "
                         f"({sorted(arrivals)})")
    members = tuple(sorted(arrivals, key=_order))
    incarnations = tuple(arrivals[m].incarnation for m in members)
    max_step = max(a.step for a in arrivals.values())
    if max_step < seen_step:
        raise StaleQuorumError(f"quorum round {round_} has no member at step {seen_step} "
                               f"(members {list(members)} are at most at step {max_step})")
    # Before the first commit, a member whose state differs from group rank 0's is behind
    # it too (torch's DDP broadcasts rank 0's parameters at construction).
    first = arrivals[members[0]].digest if max_step == 0 else ""
    behind = [r for r, m in enumerate(members)
              if arrivals[m].step < max_step or arrivals[m].digest != first]
    ahead = [r for r in range(len(members)) if r not in behind]
    source = {healer: ahead[i % len(ahead)] for i, healer in enumerate(behind)}
    rank = members.index(me)
    return Plan(round=round_, members=members, incarnations=incarnations, rank=rank,
                max_step=max_step, heal_from=source.get(rank),
                send_to=tuple(h for h in behind if source[h] == rank),
                participants=len(ahead),
                reconfigure=broken or previous != incarnations)


def arrived(result: Mapping[str, bytes], me: str, incarnation: str) -> bool:
    """Whether this process is in a released round: a round that names its replica id
    with another incarnation holds an earlier process of the same replica, which a
    restarted one walking the released rounds must pass by."""
    data = result.get(me)
    return data is not None and Arrival.decode(data).incarnation == incarnation


def expected(previous: Optional[Plan], lost: Iterable[int], me: str) -> Tuple[str, ...]:
    """Whom this member waits for at its next round: the last step's members but the
    group ranks it knows are lost (itself always)."""
    if previous is None:
        return (me,)
    gone = set(lost)
    return tuple(m for r, m in enumerate(previous.members) if r not in gone or m == me)


def commits(step_plan: Plan, votes: Mapping[str, bytes], min_replica_size: int) -> bool:
    """Whether the step counts: every member of its quorum voted that it finished the
    step, and enough members contributed gradients."""
    return (step_plan.participants >= min_replica_size
            and all(votes.get(member) == VOTE_OK for member in step_plan.members))


VOTE_OK, VOTE_FAILED = b"1", b"0"


@dataclass(frozen=True)
class MembershipChange:
    """How a step's members differ from the last step's: replicas that joined, that
    were lost, and that came back as a new process before the others went on without them."""

    joined: Tuple[str, ...]
    lost: Tuple[str, ...]
    restarted: Tuple[str, ...]


def membership_change(step_plan: Plan, last: Optional[Plan]) -> Optional[MembershipChange]:
    """What changed since `last` (None: this member's first step, where every member
    is new), or None when the members and their processes are the same."""
    if last is not None and last.incarnations == step_plan.incarnations:
        return None
    before = {} if last is None else dict(zip(last.members, last.incarnations))
    now = dict(zip(step_plan.members, step_plan.incarnations))
    return MembershipChange(
        joined=tuple(sorted(set(now) - set(before), key=_order)),
        lost=tuple(sorted(set(before) - set(now), key=_order)),
        restarted=tuple(sorted((m for m in now if m in before and now[m] != before[m]),
                               key=_order)))


def _order(replica_id: str) -> Tuple[int, int, str]:
    """Numeric ids in numeric order ("2" before "10"), then the others by name."""
    return (0, int(replica_id), "") if replica_id.isdigit() else (1, 0, replica_id)


def decode_round(result: Dict[str, bytes]) -> Dict[str, Arrival]:
    """A released round's data as arrivals."""
    return {member: Arrival.decode(data) for member, data in result.items()}
