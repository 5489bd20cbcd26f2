"""`Transport`: the actor through which one process's groups exchange arrays.

Every message is a one-way `PG_DATA` ``(key, call, data)`` to the destination
rank's mailbox: `key` says which wait it is for (group, collective step, sender),
`call` describes the sender's call and its phase so that mismatched calls are
caught, and `data`
travels zero-copy (arrays as out-of-band frames). The I/O thread puts each message
into the `Inbox`. At start-up every rank connects to every other, so the death of
any rank (a dropped connection, or missed ZMTP heartbeats for a hung one) reaches
every survivor's inbox; a rank that destroys its group says so first (`PG_LEAVE`).

The actor's handlers reference the inbox and the address table, never the
`Transport`, so a dropped transport stops its actor.
"""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from actors.runtime import Actor, Kind, Message, wait_all
from actors.runtime.log import get_logger
from actors.runtime.serialization import INBAND_LIMIT

from .inbox import Inbox

log = get_logger(__name__)

HEARTBEAT = 0.5
HEARTBEAT_TIMEOUT = 2.0


class Transport:
    """This process's mailbox for process groups, as global rank `rank`."""

    def __init__(self, rank: int, host: str):
        self.rank = rank
        self.inbox = inbox = Inbox()
        self._ranks: Dict[str, int] = {}  # peer address -> global rank
        self._addresses: List[str] = []
        ranks = self._ranks
        self._actor = Actor(f"tcp://{host}:0", name=f"pg-rank{rank}", num_worker_threads=1,
                            heartbeat=HEARTBEAT, heartbeat_timeout=HEARTBEAT_TIMEOUT)
        self._actor.register(Kind.PG_DATA, lambda msg: _deliver(inbox, msg), inline=True)
        self._actor.register(Kind.PG_LEAVE, lambda msg: inbox.leave(msg.payload), inline=True)
        self._actor.on_peer_lost(
            lambda address: inbox.lose(ranks.get(address, -1), "its connection dropped"))
        self._actor.start()

    @property
    def address(self) -> str:
        return self._actor.address

    def connect(self, addresses: List[str], timeout: float) -> None:
        """Open a connection to every other rank and wait until each answers."""
        self._addresses = list(addresses)
        self._ranks.update({address: r for r, address in enumerate(addresses)})
        wait_all([self._actor.request(address, Kind.PING, None, timeout)
                  for r, address in enumerate(addresses) if r != self.rank], timeout)

    def send(self, rank: int, key: tuple, call: tuple, data: Any, keep: bool = False) -> None:
        """Send `data` to global `rank`; the caller may change its arrays afterwards,
        unless `keep` says it leaves them unchanged until the peer has received them."""
        if not keep and isinstance(data, np.ndarray) and data.nbytes >= INBAND_LIMIT:
            # Such a buffer leaves as its own frame, sent later by the I/O thread.
            data = data.copy()
        self._actor.notify(self._addresses[rank], Kind.PG_DATA, (key, call, data))

    def close(self, flush_timeout: float = 2.0) -> None:
        """Tell every live peer this rank leaves, then stop.

        The peer's answer comes after every earlier message on the same connection:
        nothing handed to the transport is dropped by closing its sockets, and the peer
        knows this rank left before it sees the connection drop (not a crash).
        """
        lost = self.inbox.lost()
        notices = [self._actor.request(address, Kind.PG_LEAVE, self.rank, flush_timeout)
                   for r, address in enumerate(self._addresses)
                   if r != self.rank and r not in lost]
        for notice in notices:
            try:
                notice.wait(flush_timeout)
            except Exception:  # noqa: BLE001 - a peer gone meanwhile has nothing to receive
                pass
        self.inbox.close("the process group was destroyed")
        self._actor.stop()


def _deliver(inbox: Inbox, msg: Message) -> None:
    key, call, data = msg.payload
    inbox.put(key, (call, data))
