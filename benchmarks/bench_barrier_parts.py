"""Where a store barrier of many processes spends its time: our quorum round, cut in
three by the server's own clock. Prints one JSON line (milliseconds, median of the
rounds):

- ``to_last_handled``: the last member's arrival → the server handles its request;
- ``release``: the server answers every parked member (encode, ROUTER send);
- ``after_release``: release done → the last member returns (the members' wake-up);
- ``total``: last arrival → last released, as `benchmarks._store_crowds.barrier`.

`time.perf_counter` is CLOCK_MONOTONIC, comparable across the processes of one host.
Usage: ``python benchmarks/bench_barrier_parts.py [--size 64] [--rounds 5]``.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._procs import server_process  # noqa: E402
from benchmarks._store_crowds import _barrier_member, _end, _until, open_client  # noqa: E402


def _timed_server(ready: Any, log_path: str) -> None:
    """A store server whose quorum rounds write (round, last arrival handled, release
    start, release end) to `log_path` at each release."""
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    from store import quorum_rounds
    from store.server import StoreServer

    rounds = quorum_rounds.QuorumRounds
    arrive, release = rounds.arrive, rounds._release
    handled: Dict[str, float] = {}

    def timed_arrive(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        handled[name] = time.perf_counter()
        return arrive(self, name, *args, **kwargs)

    def timed_release(self: Any, name: str) -> None:
        start = time.perf_counter()
        release(self, name)
        with open(log_path, "a") as log:
            log.write(json.dumps([name, handled.get(name), start, time.perf_counter()]) + "\n")

    rounds.arrive, rounds._release = timed_arrive, timed_release
    server = StoreServer("127.0.0.1", 0).start()
    ready.put(server.port)
    time.sleep(3600)


def parts(size: int, rounds: int) -> Dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        log_path = os.path.join(folder, "releases.jsonl")
        ctx = mp.get_context("spawn")
        with server_process(_timed_server, log_path) as port:
            ready = ctx.Queue()
            procs = [ctx.Process(target=_barrier_member,
                                 args=(ready, "quorum", port, size, rounds), daemon=True)
                     for _ in range(size)]
            for proc in procs:
                proc.start()
            try:
                store = open_client("ours", port)
                _until(lambda: store.add("joined", 0) >= size, 600)
                store.set("start", b"1")
                members = [ready.get(timeout=120) for _ in procs]
            finally:
                _end(procs)
        with open(log_path) as log:
            server = {row[0]: row[1:] for row in map(json.loads, log)}
    spans: List[Dict[str, float]] = []
    for r in range(rounds):
        arrived = max(m[r][0] for m in members)
        released = max(m[r][1] for m in members)
        handled, start, end = server[f"round/{r}"]
        spans.append({"total": released - arrived, "to_last_handled": handled - arrived,
                      "release": end - start, "after_release": released - end})
    return {k: round(statistics.median(s[k] for s in spans) * 1e3, 2) for k in spans[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps({"size": args.size, **parts(args.size, args.rounds)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
