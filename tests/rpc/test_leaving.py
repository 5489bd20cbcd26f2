"""The last step of a graceful shutdown, against a real store server that closes."""
import pytest

from actors.rpc.leaving import Leaving
from store import TCPStore
from store.errors import StoreConnectionError

pytestmark = pytest.mark.timeout(60)


class LeavingWorker(Leaving):
    """The part of a worker that `Leaving._arrive_last` reads."""

    def __init__(self, store, rank: int) -> None:
        self.store, self.rank, self.world_size, self.name = store, rank, 2, f"w{rank}"


def test_a_store_closed_by_its_host_during_the_last_shutdown_call_ends_nothing():
    # The host closes the store once the last barrier is complete; another worker's
    # own last call to it may still be on its way, and nothing depends on it.
    host = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=10)
    worker_side = TCPStore("127.0.0.1", host.port, timeout=10)
    try:
        worker_side.set("up", b"1")
        host.close()
        LeavingWorker(worker_side, rank=1)._arrive_last()
        with pytest.raises(StoreConnectionError):  # the host's own store failing is real
            LeavingWorker(worker_side, rank=0)._arrive_last()
    finally:
        worker_side.close()
        host.close()
