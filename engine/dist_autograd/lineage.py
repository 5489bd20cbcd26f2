"""Global lineage for SMART mode: which send functions the roots of a pass reach, everywhere.

A send function is *live* in a pass when the roots reach the recv function of the
same message on its peer: only then will it receive a gradient. Liveness crosses
workers (a live send reaches recvs on its own worker, whose sends on other workers
become live, and so on), so it is recorded on the forward messages instead of
being discovered by messages at backward time:

- A message's *lineage* is the set of send functions that become live if it does:
  for every recv function its tensors' graph reaches on the sender, that recv's own
  message and its lineage. The sender computes it when it records the send (one
  walk of the local graph behind the sent tensors) and the message carries it.
- The receiver keeps, on the recv function, the message's id and lineage together.
- At backward time the initiator walks its graph from the roots; the union of the
  recvs it reaches is the pass's live set, on every worker. Message ids carry their
  sender's rank in the high bits, so the set says which worker holds each send.
  Lineages and live sets travel as tuples (the standard pickler's fast path).

Every set holding a message id also holds that message's lineage (sets grow only
by union), so the live set is closed: what a live send reaches is live too.
Pure graph logic: no messages, no locks.
"""
from __future__ import annotations

from typing import AbstractSet, FrozenSet, Iterable, List, Tuple

from engine.autograd.graph import Edge, Node

from .context import RANK_SHIFT
from .functions import RecvFunction

Lineage = FrozenSet[int]
EMPTY: Lineage = frozenset()


def recvs_reached(edges: Iterable[Edge]) -> List[RecvFunction]:
    """The recv functions reachable from `edges` in this worker's graph, each once."""
    found: List[RecvFunction] = []
    seen = set()
    stack = [node for node, _ in edges if node is not None]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.__class__ is RecvFunction:
            found.append(node)
        else:
            stack.extend(nxt for nxt, _ in node.next_edges if nxt is not None)
    return found


def lineage_of(edges: Iterable[Edge]) -> Lineage:
    """The sends that become live with a send whose edges are `edges` (or the roots')."""
    recvs = recvs_reached(edges)
    if len(recvs) <= 1:  # the common cases share a set
        return recvs[0].lineage if recvs else EMPTY
    live: set = set()
    for recv in recvs:
        live |= recv.lineage
    return frozenset(live)


def received(message_id: int, carried: AbstractSet[int]) -> Lineage:
    """What a recv function keeps: its own message and the lineage the message carried."""
    return frozenset(carried) | {message_id}


def live_sends(roots: Iterable[Node]) -> Tuple[int, ...]:
    """The message ids of the live sends of a pass from `roots` (e.g. its GraphRoot)."""
    return tuple(sorted(lineage_of((root, 0) for root in roots)))


def held_by(live: Iterable[int], rank: int) -> List[int]:
    """The live message ids whose send function is on worker `rank`."""
    return [message_id for message_id in live if message_id >> RANK_SHIFT == rank]
