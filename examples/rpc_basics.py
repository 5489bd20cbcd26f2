"""RPC basics: three workers on an embedded store, calls sync and async, remote objects, errors.

Run: ``python examples/rpc_basics.py``. This process is the driver ("driver", rank
0, hosting the store); it spawns two workers that serve until everyone shuts down.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from _world import world  # noqa: E402

import actors  # noqa: E402


class ParameterShard:
    """A remote object: lives on its owner, used through an RRef."""

    def __init__(self, size: int):
        self.weights = np.zeros(size)

    def apply(self, update: np.ndarray) -> float:
        self.weights += update
        return float(self.weights.sum())


def dot(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def ask_peer(peer: str, x: float) -> str:
    """A remote function that makes an RPC of its own."""
    doubled = actors.rpc_sync(peer, dot, args=(np.array([x]), np.array([2.0])))
    return f"{actors.get_worker_info().name} asked {peer}: {x} * 2 = {doubled}"


def main() -> None:
    with world(3, name="driver"):  # this process is rank 0; workers 1 and 2 are spawned
        print("sync :", actors.rpc_sync("worker1", dot, args=(np.ones(4), np.arange(4.0))))
        futures = [actors.rpc_async(f"worker{r}", dot, args=(np.ones(3), np.ones(3) * r))
                   for r in (1, 2)]
        print("async:", actors.wait_all(futures))
        print("nested:", actors.rpc_sync("worker1", ask_peer, args=("worker2", 21.0)))

        shard = actors.remote("worker2", ParameterShard, args=(4,))
        print("remote object on", shard.owner_name(), "->",
              shard.rpc_sync().apply(np.ones(4)), shard.rpc_async().apply(np.ones(4)).wait())
        print("fetched copy:", shard.to_here().weights)

        try:
            actors.rpc_sync("worker1", dot, args=(np.ones(2), np.ones(3)))
        except ValueError as exc:
            print("remote error re-raised here:", type(exc).__name__, "-", exc)
        try:
            actors.rpc_sync("worker9", dot, args=(1, 2))
        except ValueError as exc:
            print("unknown worker:", exc)
    print("all workers left together")


if __name__ == "__main__":
    main()
