"""Three processes meet over tcp:// on an embedded store and elect a leader.

Rank 0 hosts the TCPStore server inside its own process; every rank connects to it
through `store.rendezvous("tcp://...")`, races `compare_set` on one key, and reports
who won. Run: ``python examples/store_demo.py``.
"""
import multiprocessing as mp
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _world import free_port, join_all  # noqa: E402

WORLD_SIZE = 3


def participant(url: str, rank: int, results) -> None:
    from store import rendezvous

    store, rank, world_size = next(rendezvous(url, rank=rank, world_size=WORLD_SIZE, timeout=60))
    leader = store.compare_set("leader", "", f"rank-{rank}").decode()
    results.put((rank, leader))
    # Rank 0 hosts the server, so it leaves last: the last rank to check out tells it,
    # and every other rank is done with the store once its `add` has been answered.
    if store.add("finished", 1) == world_size:
        store.set("all-finished", b"1")
    if rank == 0:
        store.wait(["all-finished"])
    store.close()


def main() -> int:
    ctx = mp.get_context("spawn")
    url = f"tcp://127.0.0.1:{free_port()}"
    print(f"starting {WORLD_SIZE} processes; rendezvous at {url} (rank 0 hosts the store)")
    results = ctx.Queue()
    procs = [ctx.Process(target=participant, args=(url, rank, results), name=f"rank {rank}")
             for rank in range(WORLD_SIZE)]
    for proc in procs:
        proc.start()
    try:
        votes = dict(results.get(timeout=60) for _ in procs)
    finally:
        join_all(procs)
    for rank in sorted(votes):
        print(f"rank {rank}: the leader is {votes[rank]}")
    leaders = set(votes.values())
    if len(leaders) != 1:
        print(f"disagreement: {sorted(leaders)}")
        return 1
    print(f"elected: {leaders.pop()} (one winner, all {WORLD_SIZE} agree)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
