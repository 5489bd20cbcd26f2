"""What a completed rendezvous round gives a node: torch's `RendezvousInfo`.

Besides the round's store, rank and world size, a round names a bootstrap address
(`MASTER_ADDR`/`MASTER_PORT`) for the workers' own rendezvous: rank 0 picks a free
port on its address and publishes both in the round store; the others read them
there when they first ask.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import ClassVar, Iterator, List, Optional, Sequence

from actors.runtime.io.ports import free_port
from store.base import Store


@dataclass(frozen=True)
class RendezvousStoreInfo:
    """The address and port the workers of a round bootstrap their own store on."""

    MASTER_ADDR_KEY: ClassVar[str] = "MASTER_ADDR"
    MASTER_PORT_KEY: ClassVar[str] = "MASTER_PORT"
    master_addr: str
    master_port: int

    @staticmethod
    def build(rank: int, store: Store, local_addr: Optional[str],
              server_port: Optional[int] = None) -> "RendezvousStoreInfo":
        """Rank 0 publishes its address and a free port (or `server_port`); others read them.

        `local_addr` defaults to this host's fully qualified name, as in torch. A
        rank other than 0 waits for rank 0 up to the store's timeout.
        """
        keys = [RendezvousStoreInfo.MASTER_ADDR_KEY, RendezvousStoreInfo.MASTER_PORT_KEY]
        if rank == 0:
            addr = local_addr or socket.getfqdn()
            port = server_port or free_port(local_addr or "127.0.0.1")
            store.multi_set(keys, [addr, str(port)])
            return RendezvousStoreInfo(addr, port)
        addr, port = store.multi_get(keys)
        return RendezvousStoreInfo(addr.decode(), int(port))


class RendezvousInfo:
    """One node's place in a round: `store`, `rank`, `world_size`, `bootstrap_store_info`.

    Unpacks as `store, rank, world_size`. When `bootstrap_store_info` is not given,
    it is read from the round store (see `RendezvousStoreInfo.build`) on first use.
    """

    def __init__(self, store: Store, rank: int, world_size: int,
                 bootstrap_store_info: Optional[RendezvousStoreInfo] = None, *,
                 round: int = 0, members: Sequence[str] = ()):
        self._store = store
        self._rank = rank
        self._world_size = world_size
        self._bootstrap_store_info = bootstrap_store_info
        self.round = round
        """The rendezvous round (0 for a static rendezvous)."""
        self.members: List[str] = list(members)
        """The round's nodes in rank order (``host_pid_id``; empty when not known)."""

    @property
    def store(self) -> Store:
        """The round's store, shared by every node of the round (keys under the round's prefix)."""
        return self._store

    @property
    def rank(self) -> int:
        """This node's rank in the round."""
        return self._rank

    @property
    def world_size(self) -> int:
        """The number of nodes in the round."""
        return self._world_size

    @property
    def bootstrap_store_info(self) -> RendezvousStoreInfo:
        """Where the job's store server listens (`RendezvousStoreInfo`), read from the round store
        on first use."""
        if self._bootstrap_store_info is None:
            self._bootstrap_store_info = RendezvousStoreInfo.build(self._rank, self._store, None)
        return self._bootstrap_store_info

    def __iter__(self) -> Iterator:
        return iter((self._store, self._rank, self._world_size))

    def __repr__(self) -> str:
        return f"RendezvousInfo(rank={self._rank}, world_size={self._world_size})"
