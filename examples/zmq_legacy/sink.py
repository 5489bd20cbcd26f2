"""An existing ZeroMQ sink: PULLs per-batch results and reports the training's progress.

Plain pyzmq, nothing of actorgrad. Each result is a JSON message
``{"worker": ..., "batch": ..., "loss": ...}``; it stops after ``--batches``
results (or ``--timeout`` seconds without one) and prints a summary.

    python sink.py --port 5558 --batches 200
"""
import argparse
import collections
import json
import sys

import zmq


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()

    pull = zmq.Context.instance().socket(zmq.PULL)
    pull.bind(f"tcp://127.0.0.1:{args.port}")
    results = []
    while len(results) < args.batches:
        if not pull.poll(int(args.timeout * 1000)):
            print(f"sink: no result for {args.timeout:g}s; got {len(results)}", flush=True)
            return 1
        results.append(json.loads(pull.recv()))
        if len(results) % 25 == 0:
            recent = [r["loss"] for r in results[-25:]]
            print(f"sink: {len(results)}/{args.batches} batches, recent loss "
                  f"{sum(recent) / len(recent):.4f}", flush=True)
    by_worker = collections.Counter(r["worker"] for r in results)
    batches = sorted(r["batch"] for r in results)
    ordered = [r["loss"] for r in sorted(results, key=lambda r: r["batch"])]
    window = max(1, min(20, len(ordered) // 2))  # the two windows never share a batch
    first, last = ordered[:window], ordered[-window:]
    print(f"sink: batches per worker {dict(sorted(by_worker.items()))}", flush=True)
    print(f"sink: every batch exactly once: {batches == list(range(args.batches))}", flush=True)
    print(f"sink: loss {sum(first) / len(first):.4f} -> {sum(last) / len(last):.4f} "
          f"(the first and last {window} batches)", flush=True)
    pull.close(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
