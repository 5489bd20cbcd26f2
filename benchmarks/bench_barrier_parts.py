"""Where a store barrier of many processes spends its time: our quorum round, cut in
three by the server's own clock. Prints one JSON line (milliseconds, median of the
rounds):

- ``to_last_handled``: the last member's arrival → the server handles its request;
- ``release``: the server answers every parked member (encode, ROUTER send);
- ``after_release``: release done → the last member returns (the members' wake-up);
- ``total``: last arrival → last released, as `benchmarks._store_crowds.barrier`;
- ``member_cpu_us``: the CPU (µs, all threads) one member's process spends on one
  round; with every member on a few cores, the round's time is about their sum;
- ``raw_total``, ``raw_member_cpu_us``: the same through raw pyzmq, the floor of a
  round of one message per member and one release over ZeroMQ: one Python thread on
  a ROUTER that answers every member at the last arrival, members on a DEALER each;
- ``torch_total``, ``torch_member_cpu_us``: the same through torch's TCPStore (an
  ``add``, then a ``wait`` for the key the last member sets), when torch is importable.

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
from benchmarks._store_crowds import (Rounds, _end, barrier_rounds,  # noqa: E402
                                      member_cpu_us, released_ms)
from benchmarks.bench_store import _torch_server  # noqa: E402


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
        with server_process(_timed_server, log_path) as port:
            members = barrier_rounds("quorum", port, size, rounds)
        with open(log_path) as log:
            server = {row[0]: row[1:] for row in map(json.loads, log)}
    spans: List[Dict[str, float]] = []
    for r in range(rounds):
        arrived = max(m[r][0] for m in members)
        released = max(m[r][1] for m in members)
        handled, start, end = server[f"round/{r}"]
        spans.append({"total": released - arrived, "to_last_handled": handled - arrived,
                      "release": end - start, "after_release": released - end})
    return {**{k: round(statistics.median(s[k] for s in spans) * 1e3, 2) for k in spans[0]},
            "member_cpu_us": member_cpu_us(members)}


def _raw_quorum_server(ready: Any) -> None:
    """Answer each round's members all at once, at the last one's arrival: a request
    is ``[round, size]``; "join" is the round that starts the others."""
    import zmq

    router = zmq.Context.instance().socket(zmq.ROUTER)
    ready.put(router.bind_to_random_port("tcp://127.0.0.1"))
    waiting: Dict[bytes, List[bytes]] = {}
    while True:
        identity, key, size = router.recv_multipart()
        members = waiting.setdefault(key, [])
        members.append(identity)
        if len(members) == int(size):
            for member in waiting.pop(key):
                router.send_multipart([member, b""])


def _raw_member(ready: Any, port: int, size: int, rounds: int) -> None:
    import zmq

    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.connect(f"tcp://127.0.0.1:{port}")
    count = str(size).encode()
    dealer.send_multipart([b"join", count])
    dealer.recv()
    times = []
    for round_ in range(rounds):
        cpu, arrived = time.process_time(), time.perf_counter()
        dealer.send_multipart([b"round/%d" % round_, count])
        dealer.recv()
        times.append((arrived, time.perf_counter(), time.process_time() - cpu))
    ready.put(times)


def raw_rounds(size: int, rounds: int) -> Rounds:
    """`rounds` rounds in a row through raw pyzmq, as `barrier_rounds`."""
    ctx = mp.get_context("spawn")
    with server_process(_raw_quorum_server) as port:
        ready = ctx.Queue()
        procs = [ctx.Process(target=_raw_member, args=(ready, port, size, rounds),
                             daemon=True) for _ in range(size)]
        for proc in procs:
            proc.start()
        try:
            return [ready.get(timeout=120) for _ in procs]
        finally:
            _end(procs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    raw = raw_rounds(args.size, args.rounds)
    figures = {"size": args.size, **parts(args.size, args.rounds),
               "raw_total": released_ms(raw), "raw_member_cpu_us": member_cpu_us(raw)}
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        pass
    else:
        with server_process(_torch_server) as port:
            torch = barrier_rounds("torch", port, args.size, args.rounds)
        figures.update(torch_total=released_ms(torch), torch_member_cpu_us=member_cpu_us(torch))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
