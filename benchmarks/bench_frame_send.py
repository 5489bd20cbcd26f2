"""What sending one small frame costs the sending thread: pyzmq's ``Socket.send``
against its compiled send, which `actors.runtime.io.sockets.send_frames` calls.

One process, an inproc PAIR with no high-water mark, frames of `--size` bytes; each
side sends `--frames` frames per round (the receiver drains them between rounds,
untimed), `--rounds` rounds alternating; the figure is the median over the rounds of
nanoseconds per frame. Prints one JSON line.
Usage: ``python benchmarks/bench_frame_send.py [--frames N] [--rounds R] [--size B]``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import zmq


def _per_frame_ns(send, sock: zmq.Socket, sink: zmq.Socket, data: bytes, frames: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(frames):
        send(sock, data, 0, True)
    elapsed = time.perf_counter_ns() - start
    for _ in range(frames):
        sink.recv(copy=False)
    return elapsed / frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=64)
    args = parser.parse_args()
    ctx = zmq.Context()
    sock, sink = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    for s in (sock, sink):
        s.setsockopt(zmq.SNDHWM, 0)
        s.setsockopt(zmq.RCVHWM, 0)
    sock.bind("inproc://frames")
    sink.connect("inproc://frames")
    data = b"x" * args.size
    compiled = zmq.backend.Socket.send
    # Both through a lambda of the same shape, so that only the send differs.
    sides = {"pyzmq_send_ns": lambda s, d, f, c: s.send(d, f, copy=c),
             "compiled_send_ns": lambda s, d, f, c: compiled(s, d, f, c)}
    rounds = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, send in sides.items():
            rounds[name].append(_per_frame_ns(send, sock, sink, data, args.frames))
    sock.close(linger=0)
    sink.close(linger=0)
    ctx.term()
    medians = {name: round(statistics.median(values), 1) for name, values in rounds.items()}
    print(json.dumps({"workload": "frame_send", "frames": args.frames, "size": args.size,
                      **medians,
                      "compiled_vs_pyzmq": round(medians["compiled_send_ns"]
                                                 / medians["pyzmq_send_ns"], 3),
                      "rounds": {k: [round(v, 1) for v in vs] for k, vs in rounds.items()}}))


if __name__ == "__main__":
    main()
