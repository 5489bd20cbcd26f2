"""`PeerTable`: the one owner of what an actor knows about the peers it sends to.

For each peer address, the state of this actor's connection to it (connecting, up,
lost) and why it was lost; the requests waiting on a reply, with their deadlines;
how many messages went to it and how many of those an answer has proven delivered;
and the liveness settings its connections use. Whether a peer is lost is decided
here, once: the mailbox reports what its monitors see (`observe`), the actor's owner
reports what it learnt another way (`report_lost`: a thread's own connection dropped,
a caller's connection closed), and the first report of a loss wins. The table does
no I/O and reads no clock: its methods say what happened, and the actor acts on it,
on the I/O thread; `register` and `forget` may be called from any thread (one dict
operation each, atomic under the GIL), so the I/O thread iterates over a copy, and
`count_sent` from whichever thread sends, under the lock of the DEALER it sends on.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import zmq

from ..concurrency.deadlines import Deadlines
from ..concurrency.futures import Future
from ..introspection.recorder import SENT, Entry
from .sockets import HANDSHAKE_FAILED, refusal

CONNECTING, UP, LOST = "connecting", "up", "lost"

NOTHING_LISTENS = "nothing accepts connections at this address"
CONNECTION_LOST = "connection lost"


class Liveness(NamedTuple):
    """ZMTP heartbeats of every connection: a ping each `heartbeat_ms`, and the
    connection dropped when nothing comes back within `timeout_ms`."""

    heartbeat_ms: int
    timeout_ms: int


class Pending:
    """A request waiting for its reply; `sent_as` is its place among the messages sent
    to `peer` (from 1; 0 until it leaves). `what` (what it calls, for STATUS), the
    sending thread and the monotonic time it started say what waits on it; its id and
    `size` (bytes, 0 when not counted) what the flight recorder writes of it."""

    __slots__ = ("future", "peer", "kind", "timeout", "sent_as", "what", "thread", "started",
                 "req_id", "size")

    def __init__(self, future: Future, peer: str, kind: int, timeout: Optional[float],
                 what: Any = None, thread: int = 0, started: float = 0.0, req_id: int = 0,
                 size: int = 0):
        self.future, self.peer, self.kind, self.timeout = future, peer, kind, timeout
        self.sent_as = 0
        self.what, self.thread, self.started = what, thread, started
        self.req_id, self.size = req_id, size

    def sent_alone(self) -> Entry:
        """This request as a flight-recorder entry of its send alone (no reply yet)."""
        return (round(self.started * 1e9), SENT, self.peer, self.kind, self.req_id,
                self.size, 0, self.what, None)


class PeerTable:
    """Peers by address: connection state, why a peer was lost, and pending requests."""

    def __init__(self, liveness: Liveness):
        self.liveness = liveness
        self._links: Dict[str, str] = {}
        self._reasons: Dict[str, str] = {}
        self._pending: Dict[int, Pending] = {}
        self._deadlines = Deadlines()
        self._sent: Dict[str, int] = {}  # messages sent to each peer
        self._delivered: Dict[str, int] = {}  # of those, how many an answer proves delivered

    # ---- connections --------------------------------------------------------------

    def opened(self, peer: str) -> None:
        """A connection to `peer` is being made (a peer already lost stays lost until a
        handshake succeeds)."""
        self._links.setdefault(peer, CONNECTING)

    def observe(self, peer: str, event: int) -> Optional[str]:
        """Note a monitor `event` of the connection to `peer`; the reason, if it makes
        the peer lost now."""
        link = self._links.get(peer)
        if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self._links[peer] = UP
            self._reasons.pop(peer, None)
            return None
        if event == zmq.EVENT_DISCONNECTED and link == UP:
            return self._lose(peer, CONNECTION_LOST)
        if event == zmq.EVENT_CONNECT_RETRIED and link == CONNECTING:
            return self._lose(peer, NOTHING_LISTENS)
        if event & HANDSHAKE_FAILED and link != LOST:
            return self._lose(peer, refusal())
        return None

    def report_lost(self, peer: str, reason: str) -> bool:
        """Someone else saw `peer` go; True if that makes it lost now (it was not yet)."""
        if self._links.get(peer) == LOST:
            return False
        self._lose(peer, reason)
        return True

    def _lose(self, peer: str, reason: str) -> str:
        self._links[peer] = LOST
        self._reasons[peer] = reason
        return reason

    def lost(self, peer: str) -> Optional[str]:
        """Why `peer` is lost, or None while it is not."""
        return self._reasons.get(peer) if self._links.get(peer) == LOST else None

    # ---- requests -----------------------------------------------------------------

    def register(self, req_id: int, pending: Pending) -> None:
        """A request about to be sent (any thread: one dict insertion)."""
        self._pending[req_id] = pending

    def forget(self, req_id: int) -> Optional[Pending]:
        """Take a request out: answered, failed, or never sent."""
        return self._pending.pop(req_id, None)

    def sent(self, req_id: int, deadline: Optional[float]) -> bool:
        """The request left with `deadline` (monotonic, or None); True if it is now the
        earliest deadline (the expiry timer must move up)."""
        return deadline is not None and self._deadlines.push(deadline, req_id, self._pending)

    def left_as(self, req_id: int, sent_as: int) -> None:
        """The request went out as message number `sent_as` to its peer (I/O thread)."""
        pending = self._pending.get(req_id)
        if pending is not None:
            pending.sent_as = sent_as

    def earliest_deadline(self) -> Optional[float]:
        return self._deadlines.earliest()

    def expired(self, now: float) -> List[Pending]:
        """Take out the requests whose deadline is at or before `now`."""
        due = self._deadlines.due(now, self._pending.__contains__)
        return [p for p in (self._pending.pop(req_id, None) for req_id in due) if p is not None]

    def open_entries(self) -> List[Entry]:
        """The requests in flight as flight-recorder entries (any thread)."""
        return [pending.sent_alone() for pending in self.requests()]

    def requests(self) -> List[Pending]:
        """The requests waiting for their replies now (any thread: a copy)."""
        return list(self._pending.copy().values())

    def take_requests(self, which: Callable[[Pending], bool]) -> List[Pending]:
        """Take out every pending request `which` selects."""
        chosen: List[Tuple[int, Pending]] = [
            (req_id, p) for req_id, p in self._pending.copy().items() if which(p)]
        return [p for req_id, p in chosen if self._pending.pop(req_id, None) is not None]

    # ---- delivery -----------------------------------------------------------------

    def count_sent(self, peer: str) -> int:
        """One more message left for `peer`; its number, from 1 (under the lock of the
        DEALER it left on)."""
        sent = self._sent[peer] = self._sent.get(peer, 0) + 1
        return sent

    def answered(self, pending: Pending) -> None:
        """`pending` got its reply: the peer answers in order, so every message sent to
        it up to that request has arrived."""
        if pending.sent_as > self._delivered.get(pending.peer, 0):
            self._delivered[pending.peer] = pending.sent_as

    def take_unproven(self) -> Dict[str, int]:
        """Each peer with messages that no answer has proven delivered, and how many;
        they count as proven from now on (the caller asks the peer to confirm them).
        A peer found lost is left out: its loss was told already, and it cannot answer."""
        counts = dict(self._sent)  # other threads count what they send meanwhile
        unproven = {peer: sent - self._delivered.get(peer, 0)
                    for peer, sent in counts.items()
                    if sent > self._delivered.get(peer, 0) and self._links.get(peer) != LOST}
        self._delivered.update((peer, counts[peer]) for peer in unproven)
        return unproven
