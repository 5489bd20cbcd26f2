"""Three processes meet over tcp:// on an embedded store and elect a leader.

Rank 0 hosts the TCPStore server inside its own process; every rank connects to it
through `store.rendezvous("tcp://...")`, races `compare_set` on one key, and reports
who won. Run: ``python examples/store_demo.py``.
"""
import multiprocessing as mp
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WORLD_SIZE = 3


def participant(url: str, rank: int, results) -> None:
    from store import rendezvous

    store, rank, world_size = next(rendezvous(url, rank=rank, world_size=WORLD_SIZE, timeout=60))
    leader = store.compare_set("leader", "", f"rank-{rank}").decode()
    results.put((rank, leader))
    # Rank 0 hosts the server: everyone checks out before it closes the store.
    if store.add("finished", 1) == world_size:
        store.set("all-finished", b"1")
    store.wait(["all-finished"])
    store.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> int:
    ctx = mp.get_context("spawn")
    url = f"tcp://127.0.0.1:{free_port()}"
    print(f"starting {WORLD_SIZE} processes; rendezvous at {url} (rank 0 hosts the store)")
    results = ctx.Queue()
    procs = [ctx.Process(target=participant, args=(url, rank, results)) for rank in range(3)]
    for proc in procs:
        proc.start()
    try:
        votes = dict(results.get(timeout=60) for _ in procs)
        for rank in sorted(votes):
            print(f"rank {rank}: the leader is {votes[rank]}")
        leaders = set(votes.values())
        if len(leaders) != 1:
            print(f"disagreement: {sorted(leaders)}")
            return 1
        print(f"elected: {leaders.pop()} (one winner, all {WORLD_SIZE} agree)")
        return 0
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()


if __name__ == "__main__":
    sys.exit(main())
