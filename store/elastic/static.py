"""Fixed membership: torch's static TCP rendezvous (torchrun's `--node-rank` mode).

Every node knows its rank and the number of nodes; node 0 hosts the store at the
master address. A round is a barrier of all nodes in the store: a node whose workers
failed enters the next round and waits there until the others, whose workers then
lose a peer and fail too, arrive.
"""
from __future__ import annotations

from typing import List, Optional

from actors.runtime.process.log import get_logger
from store.barrier import barrier
from store.base import Store
from store.elastic.errors import RendezvousClosedError, RendezvousTimeoutError
from store.elastic.info import RendezvousInfo, RendezvousStoreInfo
from store.errors import StoreTimeoutError
from store.prefix_store import PrefixStore

log = get_logger(__name__)


class StaticRendezvousHandler:
    """Node `rank` of `world_size`, every round; rounds are barriers in `store`."""

    def __init__(self, store: Store, run_id: str, rank: int, world_size: int,
                 timeout: float = 600.0, local_addr: Optional[str] = None):
        if not 0 <= rank < world_size:
            raise ValueError(f"node rank {rank} is outside 0..{world_size - 1}")
        self._store = PrefixStore(f"elastic/static/{run_id}", store)
        self._run_id = run_id
        self._rank, self._world_size = rank, world_size
        self._timeout = timeout
        self._local_addr = local_addr
        self._round = 0

    def get_backend(self) -> str:
        """``"static"``, the name of this handler's backend."""
        return "static"

    def get_run_id(self) -> str:
        """The run id that every node of this job passes."""
        return self._run_id

    def next_rendezvous(self) -> RendezvousInfo:
        """Wait (up to the join timeout) until every node has entered the next round."""
        if self.is_closed():
            raise RendezvousClosedError(f"the static rendezvous {self._run_id!r} is closed")
        self._round += 1
        round_store = PrefixStore(f"round/{self._round}", self._store)
        try:
            barrier(round_store, "joined", self._world_size, self._timeout,
                    label=f"static rendezvous {self._run_id!r} round {self._round}",
                    members="nodes")
        except StoreTimeoutError as exc:
            raise RendezvousTimeoutError(
                f"not every one of the {self._world_size} nodes entered round {self._round} "
                f"of {self._run_id!r} within {self._timeout:g}s") from exc
        bootstrap = (RendezvousStoreInfo.build(0, round_store, self._local_addr)
                     if self._rank == 0 else None)
        log.info("rendezvous_joined", run_id=self._run_id, backend="static",
                 round=self._round, rank=self._rank, world_size=self._world_size)
        return RendezvousInfo(round_store, self._rank, self._world_size, bootstrap)

    def is_closed(self) -> bool:
        """Whether some node closed the rendezvous (then the next round raises
        RendezvousClosedError)."""
        return self._store.check(["closed"])

    def set_closed(self) -> None:
        """Close the rendezvous for every node: their next round raises RendezvousClosedError."""
        self._store.set("closed", b"1")

    def num_nodes_waiting(self) -> int:
        """Always 0: membership is fixed, nobody waits to join."""
        return 0

    def leave(self) -> None:
        """Nothing to stop: the other nodes meet this one's absence at the next round's
        barrier."""

    def shutdown(self) -> bool:
        """Nothing to stop (no keep-alives); True, as torch's handlers return on success."""
        return True

    def wait_for_nodes_to_leave(self, timeout: Optional[float] = None) -> List[str]:
        """None to wait for: static nodes publish no liveness keys, and none waits to join."""
        return []
