"""`Senders`: which rank each connection into this rank's transport comes from.

Every rank's transport connects to its peers from one ZeroMQ routing identity, a
random token that it publishes next to its address in the job's store; a peer's
ROUTER knows the connection by that identity (`Message.sender`), and ignores a
second connection that presents an identity it already has. A message that names
its sending rank (a `PG_DATA` key, a shared array's origin, `PG_LEAVE`, `PG_SHARE`)
is accepted only from that rank's connection; anything else is logged as
``pg_message_from_wrong_connection`` and refused.

This tells ranks and strangers apart; it does not keep strangers out: a message is
checked once decoded, and whoever reads the store learns the tokens. CURVE does
(docs/SECURITY.md).
"""
from __future__ import annotations

import secrets
from typing import Any, Dict, Sequence

from actors.runtime import Future, Message
from actors.runtime.process.log import get_logger
from actors.runtime.protocol import kind_name

from .errors import WrongConnectionError

log = get_logger(__name__)


def new_identity() -> bytes:
    """A routing identity nobody can guess: 32 hex digits (128 random bits; as text, it
    never starts with the zero byte that ZeroMQ keeps for identities of its own)."""
    return secrets.token_hex(16).encode()


class Senders:
    """The routing identity of each rank's connections, as this rank learnt them.

    Until `know` has the table, every message that names a rank is refused: `ready`
    completes then, and the transport answers its peers' start-up PING only after
    that, so that no peer sends before it can be told apart.
    """

    def __init__(self, rank: int):
        self.rank = rank
        self.ready = Future()
        self._ranks: Dict[bytes, int] = {}  # routing identity -> global rank

    def know(self, identities: Sequence[bytes]) -> None:
        """Global rank r's connections present `identities[r]`."""
        self._ranks = {identity: r for r, identity in enumerate(identities)}
        self.ready.set_result(None)

    def check(self, msg: Message, claimed: Any) -> None:
        """Pass if `msg` came on the connection of global rank `claimed`, else log and
        raise WrongConnectionError. On the I/O thread for every message: one look-up."""
        rank = self._ranks.get(msg.sender)
        if rank is not None and rank == claimed:
            return
        log.warning("pg_message_from_wrong_connection", rank=self.rank,
                    kind=kind_name(msg.kind), claimed=claimed, connection_of=rank)
        raise WrongConnectionError(
            f"rank {self.rank} refused a {kind_name(msg.kind)} message naming rank {claimed}: "
            + ("it came on the connection of no rank" if rank is None
               else f"it came on the connection of rank {rank}"))
