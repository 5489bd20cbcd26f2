"""An existing ZeroMQ ventilator: PUSHes batches of a regression problem to whoever connects.

Plain pyzmq and numpy, nothing of actorgrad: this is the kind of producer a team
already runs. Each batch is a multipart message
``[header JSON, x as float32 bytes, y as float32 bytes]``; it waits until
``--workers`` workers have connected (their handshakes done), so that PUSH shares
the batches among all of them.

    python ventilator.py --port 5557 --batches 200 --workers 2
"""
import argparse
import json

import numpy as np
import zmq
from zmq.utils.monitor import recv_monitor_message

FEATURES = 8


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    true_w = rng.normal(size=FEATURES).astype(np.float32)
    context = zmq.Context.instance()
    push = context.socket(zmq.PUSH)
    monitor = push.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
    push.bind(f"tcp://127.0.0.1:{args.port}")
    print(f"ventilator: waiting for {args.workers} workers on port {args.port}", flush=True)
    for _ in range(args.workers):
        recv_monitor_message(monitor)
    print(f"ventilator: sending {args.batches} batches", flush=True)
    for batch in range(args.batches):
        x = rng.normal(size=(args.rows, FEATURES)).astype(np.float32)
        y = (x @ true_w + rng.normal(scale=0.1, size=args.rows)).astype(np.float32)
        header = {"batch": batch, "rows": args.rows, "features": FEATURES}
        push.send_multipart([json.dumps(header).encode(), x.tobytes(), y.tobytes()])
    print("ventilator: all batches sent", flush=True)
    push.disable_monitor()
    monitor.close(0)
    push.close(linger=30_000)
    context.term()  # returns once the queued batches are out (or the linger ran out)


if __name__ == "__main__":
    main()
