"""Moving a large array between two processes of one host: ZeroMQ or shared memory?

Three ways to hand a float32 array to another process, each answered by a one-frame
acknowledgement once the receiver has copied the array into its own buffer:

- ``zmq``: one zero-copy frame over ZeroMQ's loopback TCP (what collectives do now);
- ``shm_fresh``: a new file in /dev/shm per message, written, named in a message,
  read and unlinked by the receiver;
- ``shm_reused``: one /dev/shm segment mapped once by both sides and written again
  for every message (the acknowledgement says it may be overwritten).

Prints one JSON line: GB/s per way (median of the rounds). Usage:
``python benchmarks/bench_same_host.py [--mib 16] [--rounds 20]``.
"""
from __future__ import annotations

import argparse
import json
import mmap
import multiprocessing as mp
import os
import statistics
import time
from typing import Any, List

import numpy as np

WAYS = ("zmq", "shm_fresh", "shm_reused")


def _map(path: str, nbytes: int, create: bool) -> mmap.mmap:
    flags = os.O_CREAT | os.O_RDWR if create else os.O_RDONLY
    fd = os.open(path, flags, 0o600)
    try:
        if create:
            os.ftruncate(fd, nbytes)
        return mmap.mmap(fd, nbytes, prot=mmap.PROT_READ | (mmap.PROT_WRITE if create else 0))
    finally:
        os.close(fd)


def _receiver(way: str, nbytes: int, count: int, ports: Any) -> None:
    import zmq

    ctx = zmq.Context()
    inbox, acks = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    ports.put(inbox.bind_to_random_port("tcp://127.0.0.1"))
    acks.connect(f"tcp://127.0.0.1:{ports.get()}")
    out = np.empty(nbytes // 4, np.float32)
    segment = None
    for _ in range(count):
        if way == "zmq":
            out[...] = np.frombuffer(inbox.recv(copy=False).buffer, np.float32)
        else:
            path = inbox.recv().decode()
            if segment is None or way == "shm_fresh":
                segment = _map(path, nbytes, create=False)
            out[...] = np.frombuffer(segment, np.float32)
            if way == "shm_fresh":
                segment.close()
                os.unlink(path)
        acks.send(b"")
    if segment is not None and way == "shm_reused":
        segment.close()
    inbox.close(0)
    acks.close(0)


def measure(way: str, nbytes: int, rounds: int) -> float:
    """Median GB/s of `rounds` hand-overs (after two warm-up ones)."""
    import zmq

    ctx = zmq.Context.instance()
    acks = ctx.socket(zmq.PULL)
    ack_port = acks.bind_to_random_port("tcp://127.0.0.1")
    spawn = mp.get_context("spawn")
    ports = spawn.Queue()
    proc = spawn.Process(target=_receiver, args=(way, nbytes, rounds + 2, ports), daemon=True)
    proc.start()
    outbox = ctx.socket(zmq.PUSH)
    try:
        outbox.connect(f"tcp://127.0.0.1:{ports.get(timeout=60)}")
        ports.put(ack_port)
        data = np.random.default_rng(0).standard_normal(nbytes // 4).astype(np.float32)
        reused = f"/dev/shm/actorgrad-bench-{os.getpid()}"
        segment = _map(reused, nbytes, create=True) if way == "shm_reused" else None
        times: List[float] = []
        for index in range(rounds + 2):
            start = time.perf_counter()
            if way == "zmq":
                outbox.send(data, copy=False)
            elif way == "shm_reused":
                np.frombuffer(segment, np.float32)[...] = data
                outbox.send(reused.encode())
            else:
                path = f"{reused}-{index}"
                fresh = _map(path, nbytes, create=True)
                np.frombuffer(fresh, np.float32)[...] = data
                fresh.close()
                outbox.send(path.encode())
            acks.recv()
            times.append(time.perf_counter() - start)
        if segment is not None:
            segment.close()
            os.unlink(reused)
        return nbytes / statistics.median(times[2:]) / 1e9
    finally:
        outbox.close(0)
        acks.close(0)
        proc.join(30)
        if proc.is_alive():
            proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    nbytes = args.mib << 20
    runs = {way: [] for way in WAYS}
    for _ in range(2):  # alternating, so that drift hits every way alike
        for way in WAYS:
            runs[way].append(measure(way, nbytes, args.rounds))
    figures = {way: round(statistics.median(values), 2) for way, values in runs.items()}
    print(json.dumps({"workload": "same-host transfer", "mib": args.mib, "gb_per_s": figures,
                      "shm_reused_vs_zmq": round(figures["shm_reused"] / figures["zmq"], 2),
                      "shm_fresh_vs_zmq": round(figures["shm_fresh"] / figures["zmq"], 2)}))


if __name__ == "__main__":
    main()
