"""`Transport`: the actor through which one process's groups exchange arrays.

Every message is a one-way `PG_DATA` ``(key, call, data)`` to the destination
rank's mailbox: `key` says which wait it is for (group, collective step or tag) and
ends with the sender's global rank, which the sending transport adds and the
receiving one checks against the connection the message came on (`Senders`);
`call` describes the sender's call and its phase so that mismatched calls are
caught, and `data` travels zero-copy (arrays as out-of-band frames) or, for a large
array to ranks on this host, as a `SharedArray` in this rank's shared region, which
the receiver reads through `open` or `lend`. The I/O thread, or the thread that
waits for a message (`Inbox.read_with`), puts each message into the `Inbox`. At
start-up every rank connects to every other, so the death of any rank (a dropped
connection, or missed ZMTP heartbeats for a hung one) reaches every survivor's inbox;
a rank that destroys its group says so first (`PG_LEAVE`), naming the ranks it
found lost and the error that stopped it.

The actor's handlers reference the inbox, the senders and the address table, never
the `Transport`, so a dropped transport stops its actor.
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np

from actors.network import host_of
from actors.runtime import (Actor, ActorStoppedError, Kind, Message, PeerLostError,
                            ProtocolError)
from actors.runtime.concurrency.futures import failures_by
from actors.runtime.process.log import get_logger
from actors.runtime.protocol.bounded import quote, shorten
from actors.runtime.protocol.shared_buffers import switched_on
from actors.runtime.protocol.serialization import INBAND_LIMIT

from .errors import RankLostError
from .inbox import Inbox
from .senders import Senders, new_identity
from .shared_memory import SharedArray, SharedRegions

log = get_logger(__name__)

HEARTBEAT = 0.5
HEARTBEAT_TIMEOUT = 2.0
SHARE_TIMEOUT = 5.0


class Transport:
    """This process's mailbox for process groups, as global rank `rank`.

    Its connections to peers present `identity`, which the peers learn from the
    job's store (`connect`).
    """

    def __init__(self, rank: int, host: str):
        self.rank = rank
        self.identity = new_identity()
        self.inbox = inbox = Inbox()
        self._shared = shared = SharedRegions(rank)
        self._senders = senders = Senders(rank)
        self._ranks: Dict[str, int] = {}  # peer address -> global rank
        self._addresses: List[str] = []
        self._closed = False
        self._hosted: Set[int] = set()  # the other ranks on this host
        # (group id, text) of the error that stopped this rank, which its leave notice
        # passes on: the one a collective raised here last, until one of that group
        # succeeds; set by the group.
        self.failure: Optional[Tuple[str, str]] = None
        ranks = self._ranks
        self._actor = Actor(f"tcp://{host}:0", name=f"pg-rank{rank}", num_worker_threads=1,
                            heartbeat=HEARTBEAT, heartbeat_timeout=HEARTBEAT_TIMEOUT,
                            routing_id=self.identity)
        # A peer sends nothing before its PING is answered (see `Senders`); the answer
        # echoes the payload, as every actor's PING does.
        self._actor.register(Kind.PING, lambda msg: senders.ready.then(lambda _: msg.payload),
                             inline=True)
        self._actor.register(Kind.PG_DATA, lambda msg: _deliver(inbox, senders, msg),
                             inline=True)
        self._actor.register(Kind.PG_SHARE, lambda msg: _attach(shared, senders, msg),
                             inline=True)
        self._actor.register(Kind.PG_LEAVE, lambda msg: _leave(inbox, senders, rank, msg),
                             inline=True)
        # libzmq reports a closed connection and one whose heartbeats stopped alike.
        dropped = (f"its connection dropped (it exited, or sent no heartbeat for "
                   f"{HEARTBEAT_TIMEOUT:g} s)")
        self._actor.on_peer_lost(lambda address: inbox.lose(ranks.get(address, -1), dropped))
        self._actor.start()
        # A collective's thread reads what it waits for: no wake-up by the I/O thread.
        inbox.read_with(self._actor.read_mailbox_here, self._actor.interrupt_mailbox_reading)

    @property
    def address(self) -> str:
        return self._actor.address

    def serve_introspection(self) -> str:
        """Answer introspection on this transport's I/O thread; the address."""
        return self._actor.serve_introspection(host_of(self.address))

    def connect(self, addresses: List[str], identities: List[bytes], timeout: float) -> None:
        """Open a connection to every other rank and wait until each answers.

        Rank r listens at `addresses[r]` and connects from `identities[r]` (its
        `identity`); from then on, this rank accepts a message that names rank r only
        from that connection.
        """
        self._senders.know(identities)
        self._addresses = list(addresses)
        self._ranks.update({address: r for r, address in enumerate(addresses)})
        host = host_of(self.address)
        # ACTORGRAD_SHARED_MEMORY=0 sends everything over ZeroMQ, as between hosts;
        # every rank must agree on it.
        self._hosted = {r for r, address in enumerate(addresses)
                        if r != self.rank and host_of(address) == host} \
            if switched_on() else set()
        self._shared.set_peers(len(addresses), self._hosted)
        deadline = time.monotonic() + timeout
        pings = {r: self._actor.request(address, Kind.PING, None, timeout)
                 for r, address in enumerate(addresses) if r != self.rank}
        for r, exc in failures_by(pings, deadline).items():
            # A rank with nothing to do with this one may be done and gone already.
            if isinstance(exc, PeerLostError):
                if self.inbox.has_left(r):
                    continue
                reason = f"{exc.reason} while the group formed"
                self.inbox.lose(r, reason)  # named in this rank's leave notice too
                raise RankLostError([r], reason) from None
            raise exc

    def send(self, rank: int, key: tuple, call: tuple, data: Any, keep: bool = False) -> None:
        """Send `data` to global `rank`, which finds it under `key` + (this rank,); the
        caller may change its arrays afterwards, unless `keep` says it leaves them
        unchanged until the peer has received them."""
        self.send_many((rank,), key, call, data, keep)

    def send_many(self, ranks: Sequence[int], key: tuple, call: tuple, data: Any,
                  keep: bool = False) -> None:
        """`send` to each of `ranks`; a large array is written once for all those on
        this host."""
        key = (*key, self.rank)
        rest: Sequence[int] = ranks
        if isinstance(data, np.ndarray) and data.nbytes >= INBAND_LIMIT:
            shared, rest = self._shared.write(ranks, data, self._share)
            if shared is not None:
                readers = [self._addresses[rank] for rank in ranks if rank not in rest]
                self._actor.notify_many(readers, Kind.PG_DATA, (key, call, shared))
            if rest and not keep:
                # Such a buffer leaves as its own frame, which may wait for the I/O
                # thread, or, from 1 MiB, be read by ZeroMQ after the send returns.
                data = data.copy()
        if rest:
            others = [self._addresses[rank] for rank in rest]
            self._actor.notify_many(others, Kind.PG_DATA, (key, call, data))

    def shares_memory(self, ranks: Sequence[int]) -> bool:
        """Whether every one of `ranks` runs on this host (shared memory may join them)."""
        return all(rank == self.rank or rank in self._hosted for rank in ranks)

    def open(self, data: Any) -> Any:
        """Received `data` as the caller's own: a private copy of a shared array."""
        if not isinstance(data, SharedArray):
            return data
        with self.lend(data) as array:
            return array.copy()

    @contextlib.contextmanager
    def lend(self, data: Any) -> Iterator[Any]:
        """Received `data`, in place for a shared array: valid only inside the block."""
        if not isinstance(data, SharedArray):
            yield data
            return
        try:
            yield self._shared.view(data)
        finally:
            self._shared.release(data)

    def _share(self, rank: int, offer: tuple) -> None:
        self._actor.request(self._addresses[rank], Kind.PG_SHARE, offer,
                            SHARE_TIMEOUT).wait(SHARE_TIMEOUT)

    def close(self, flush_timeout: float = 2.0) -> None:
        """Tell every live peer this rank leaves, then stop; `flush_timeout` bounds the
        whole of it. A second call does nothing.

        The peer's answer comes after every earlier message on the same connection:
        nothing handed to the transport is dropped by closing its sockets, and the peer
        knows this rank left before it sees the connection drop (not a crash).
        """
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + flush_timeout
        lost = self.inbox.lost()
        notices = {}
        for r, address in enumerate(self._addresses):
            if r != self.rank and r not in lost:
                try:
                    notices[r] = self._actor.request(
                        address, Kind.PG_LEAVE,
                        (self.rank, lost, None if self.failure is None else self.failure[1]),
                        flush_timeout)
                except ActorStoppedError:
                    break  # stopped already: nothing more leaves
        for r, exc in failures_by(notices, deadline).items():  # a peer gone receives nothing
            log.info("pg_leave_unconfirmed", rank=self.rank, peer=r,
                     reason=f"{type(exc).__name__}: {exc}")
        self.inbox.close("the process group was destroyed")
        # The answers to PG_LEAVE confirmed what the live peers were sent; those that
        # left need nothing more.
        self._actor.stop(max(0.1, deadline - time.monotonic()), deliver=False)
        self._shared.close()


def _deliver(inbox: Inbox, senders: Senders, msg: Message) -> None:
    key, call, data = msg.payload
    senders.check(msg, key[-1])
    if isinstance(data, SharedArray):  # read from, and marked read in, its origin's region
        senders.check(msg, data.origin)
    inbox.put(key, (call, data))


def _attach(shared: SharedRegions, senders: Senders, msg: Message) -> None:
    senders.check(msg, msg.payload.origin)
    shared.attach(msg.payload)


def _leave(inbox: Inbox, senders: Senders, own_rank: int, msg: Message) -> None:
    """A peer destroys its groups. The ranks it had found lost are lost here too, first:
    a wait for a message the peer never sent because of them then names them, not the
    peer that left; a wait for the peer itself names the error that stopped it."""
    rank, lost, failure = _leave_notice(msg.payload)
    senders.check(msg, rank)
    for r, reason in lost.items():
        if r not in (own_rank, rank):
            inbox.lose(r, f"{shorten(reason)} (seen by rank {rank})", reported=True)
    inbox.leave(rank, None if failure is None else shorten(failure))


def _leave_notice(payload: Any) -> Tuple[int, Dict[int, str], Optional[str]]:
    """PG_LEAVE's ``(rank, {rank: reason}, failure or None)``; ProtocolError for
    anything else."""
    try:
        rank, lost, failure = payload
        lost = dict(lost)
    except (TypeError, ValueError):
        rank, lost, failure = None, {}, None
    if type(rank) is not int or not (failure is None or type(failure) is str) or not all(
            type(r) is int and type(reason) is str for r, reason in lost.items()):
        raise ProtocolError(f"PG_LEAVE takes (rank, {{rank: reason}}, failure or null), "
                            f"got {quote(payload)}")
    return rank, lost, failure
