"""Where a store server's time goes: a ladder of servers, each doing a little more work.

Every rung runs in its own process and serves the same sequential `add` requests of
N client processes; the script reports the aggregate ops/s and the CPU time the
server process spends per operation (its Python threads and libzmq's I/O thread,
read from /proc). The rungs:

- ``raw_echo``: pyzmq `recv_multipart` / `send_multipart` of a one-frame request
  from a bare DEALER client (the figure `bench_store.py` calls the floor);
- ``echo``: the same loop answering our TCPStore clients (header, body: the reply
  echoes the body), so the difference to ``raw_echo`` is the client's own cost;
- ``header``: reads the header and packs a reply header around a fixed body;
- ``codec``: also unpickles the request, applies it to a KeySpace and pickles the
  answer (the whole store operation, in one blocking loop);
- ``ours``: our `StoreServer` (the actor's mailbox loop, dispatch and handlers).

Prints one JSON line. Usage: ``python benchmarks/bench_store_floor.py [--clients 8]
[--seconds 3] [--rounds 2]`` (each figure is the median over the rounds).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._procs import server_process  # noqa: E402
from benchmarks._store_crowds import add_rates  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")


def _bind(ready: Any) -> Any:
    import zmq

    router = zmq.Context().socket(zmq.ROUTER)
    ready.put((router.bind_to_random_port("tcp://127.0.0.1"), os.getpid()))
    return router


def raw_echo(ready: Any) -> None:
    router = _bind(ready)
    while True:
        router.send_multipart(router.recv_multipart())


def echo(ready: Any) -> None:
    from actors.runtime.protocol import RESPONSE
    from actors.runtime.io.sockets import recv_frames, send_frames

    router = _bind(ready)
    while True:
        identity, header, body = (f.bytes for f in recv_frames(router))
        send_frames(router, [identity, header[:3] + bytes([header[3] | RESPONSE]) + header[4:],
                             body])


def header(ready: Any) -> None:
    import pickle

    from actors.runtime.protocol import envelope
    from actors.runtime.protocol import RESPONSE, pack_header
    from actors.runtime.io.sockets import recv_frames, send_frames

    body = pickle.dumps(1, protocol=5)
    router = _bind(ready)
    while True:
        frames = recv_frames(router)
        identity = frames.pop(0).bytes
        head = envelope.read_header(frames)
        send_frames(router, [identity, pack_header(head.kind, head.req_id, RESPONSE), body])


def codec(ready: Any) -> None:
    from actors.runtime.protocol import envelope
    from actors.runtime.protocol import RESPONSE
    from actors.runtime.io.sockets import recv_frames, send_frames
    from store.keyspace import KeySpace

    space = KeySpace()
    router = _bind(ready)
    while True:
        frames = recv_frames(router)
        identity = frames.pop(0).bytes
        head = envelope.read_header(frames)
        payload = envelope.read_payload(head, frames)
        total = space.add(payload["key"], payload["amount"])
        send_frames(router, [identity, *envelope.encode(head.kind, head.req_id, total, RESPONSE)])


def ours(ready: Any) -> None:
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    from store.server import StoreServer

    server = StoreServer("127.0.0.1", 0).start()
    ready.put((server.port, os.getpid()))
    time.sleep(3600)


RUNGS: Dict[str, Callable[[Any], None]] = {
    "raw_echo": raw_echo, "echo": echo, "header": header, "codec": codec, "ours": ours}


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def measure(rung: str, clients: int, seconds: float) -> Dict[str, float]:
    """ops/s and the server's CPU µs per op for one rung under `clients` processes."""
    kind = "raw" if rung == "raw_echo" else "ours"
    with server_process(RUNGS[rung]) as (port, server):
        figures = add_rates(kind, port, [clients], seconds, lambda: _cpu_seconds(server))
    return {"ops": figures[f"add_ops_{clients}_clients"],
            "server_cpu_us": figures[f"server_cpu_us_{clients}_clients"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    runs: Dict[str, List[Dict[str, float]]] = {rung: [] for rung in RUNGS}
    for _ in range(args.rounds):  # rungs alternate, so that drift hits them alike
        for rung in RUNGS:
            runs[rung].append(measure(rung, args.clients, args.seconds))
    figures = {rung: {key: round(statistics.median(r[key] for r in rounds), 1)
                      for key in ("ops", "server_cpu_us")} for rung, rounds in runs.items()}
    floor = figures["raw_echo"]["ops"]
    print(json.dumps({"workload": "W5-floor", "clients": args.clients, "seconds": args.seconds,
                      "rounds": args.rounds, "rungs": figures,
                      "ops_vs_raw_echo": {rung: round(f["ops"] / floor, 3)
                                          for rung, f in figures.items()}}))


if __name__ == "__main__":
    main()
