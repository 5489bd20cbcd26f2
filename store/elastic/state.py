"""The shared rendezvous state: plain data, its compact encoding, and its pure repairs.

Times in the state (`deadline`, `last_heartbeats`) are wall-clock seconds since the
epoch, because every node compares them with its own clock; node-local deadlines
elsewhere are monotonic.

Encoding: one JSON object with short field names in which each node appears once,
in a node table; the other fields refer to nodes by index. About 40 bytes a node,
so 100 nodes fit in well under 16 KB.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Set

from store.elastic.errors import RendezvousStateError
from store.elastic.settings import NodeDesc, RendezvousSettings

FORMAT_VERSION = 1


@dataclass
class RendezvousState:
    """torch's `_RendezvousState`: round, complete, deadline, closed and the node sets.

    participants maps each participant to its rank (0 until the round completes).
    `version` counts the writes of the shared state, so that a node can tell an old
    copy (a late watch push) from a newer one.
    """

    round: int = 0
    complete: bool = False
    deadline: Optional[float] = None
    closed: bool = False
    participants: Dict[NodeDesc, int] = field(default_factory=dict)
    wait_list: Set[NodeDesc] = field(default_factory=set)
    last_heartbeats: Dict[NodeDesc, float] = field(default_factory=dict)
    version: int = 0

    def summary(self) -> dict:
        """A short description for log events."""
        return {"round": self.round, "complete": self.complete, "closed": self.closed,
                "participants": len(self.participants), "waiting": len(self.wait_list)}


def encode_state(state: RendezvousState) -> bytes:
    """The state as compact JSON bytes (the same state always gives the same bytes)."""
    nodes = sorted(set(state.participants) | state.wait_list | set(state.last_heartbeats))
    index = {node: i for i, node in enumerate(nodes)}
    hosts = sorted({node.host for node in nodes})
    host_index = {host: i for i, host in enumerate(hosts)}
    document = {
        "v": FORMAT_VERSION, "s": state.version, "r": state.round, "c": int(state.complete),
        "d": None if state.deadline is None else round(state.deadline, 3),
        "x": int(state.closed), "H": hosts,
        "n": [[host_index[n.host], n.pid, n.local_id] for n in nodes],
        "p": [[index[n], rank] for n, rank in sorted(state.participants.items())],
        "w": sorted(index[n] for n in state.wait_list),
        "h": [[index[n], round(t, 3)] for n, t in sorted(state.last_heartbeats.items())],
    }
    return json.dumps(document, separators=(",", ":")).encode("ascii")


def decode_state(data: bytes) -> RendezvousState:
    """The state encoded in `data`; RendezvousStateError if it is not one."""
    try:
        document = json.loads(data)
        if not isinstance(document, dict) or document.get("v") != FORMAT_VERSION:
            raise ValueError(f"not a version {FORMAT_VERSION} rendezvous state")
        hosts = document["H"]
        nodes = [NodeDesc(str(hosts[h]), int(pid), int(local)) for h, pid, local in document["n"]]
        deadline = document["d"]
        return RendezvousState(
            round=int(document["r"]), complete=bool(document["c"]),
            deadline=None if deadline is None else float(deadline),
            closed=bool(document["x"]),
            participants={nodes[i]: int(rank) for i, rank in document["p"]},
            wait_list={nodes[i] for i in document["w"]},
            last_heartbeats={nodes[i]: float(t) for i, t in document["h"]},
            version=int(document["s"]),
        )
    except (ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError) as exc:
        raise RendezvousStateError(
            f"the rendezvous state is corrupt ({len(data)} bytes, starting "
            f"{bytes(data[:24])!r}): {exc}") from None


def dead_nodes(state: RendezvousState, settings: RendezvousSettings, now: float,
               lost: Iterable[NodeDesc] = (),
               heard: Optional[Dict[NodeDesc, float]] = None) -> List[NodeDesc]:
    """Nodes whose last keep-alive is older than the keep-alive window, or known lost.

    `heard` holds keep-alives heard outside the state (node → wall-clock seconds).
    """
    expire, gone = now - settings.dead_after, set(lost)
    return sorted(node for node, beat in last_beats(state, heard).items()
                  if beat < expire or node in gone)


def last_beats(state: RendezvousState, heard: Optional[Dict[NodeDesc, float]] = None
               ) -> Dict[NodeDesc, float]:
    """Each node's newest keep-alive: its heartbeat in the state, or a newer one `heard`."""
    heard = heard or {}
    return {node: max(beat, heard.get(node, beat))
            for node, beat in state.last_heartbeats.items()}


def remove_nodes(state: RendezvousState, settings: RendezvousSettings,
                 nodes: Iterable[NodeDesc]) -> bool:
    """Drop `nodes` from every list; True if a participant was among them."""
    participant_removed = False
    for node in nodes:
        state.last_heartbeats.pop(node, None)
        state.wait_list.discard(node)
        if state.participants.pop(node, None) is not None:
            participant_removed = True
    if participant_removed:
        remove_participant_epilogue(state, settings)
    return participant_removed


def remove_participant_epilogue(state: RendezvousState, settings: RendezvousSettings) -> None:
    """torch's rule after a participant leaves: an emptied complete round starts the next
    round; an incomplete round that falls below min_nodes loses its last-call deadline."""
    if state.complete:
        if not state.participants:
            state.complete = False
            state.round += 1
    elif len(state.participants) < settings.min_nodes:
        state.deadline = None
