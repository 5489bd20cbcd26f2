"""actorgrad workers in an existing ZeroMQ pipeline: a plain-pyzmq ventilator feeds them
batches, they train, and they push results on to a plain-pyzmq sink.

    python examples/zmq_pipeline.py [--batches 200] [--workers 2]

`zmq_legacy/ventilator.py` and `zmq_legacy/sink.py` know nothing of actorgrad: they
are a PUSH producer and a PULL consumer as a team would already run them. Each
worker is an actorgrad actor that `attach`es a PULL socket to the ventilator and a
send-only PUSH socket to the sink; every batch is handled on the actor's worker
pool (one at a time: `max_pending=1`, so ZeroMQ's queues hold the rest), trains a
linear model with the engine's autograd and SGD, and pushes ``{worker, batch,
loss}`` on. The sink prints the progress.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
LEGACY = ROOT / "examples" / "zmq_legacy"
sys.path.insert(0, str(ROOT))


class Trainer:
    """A linear model trained by one worker, one batch at a time."""

    def __init__(self, name: str, features: int, lr: float):
        import engine
        from engine import nn

        self.name = name
        engine.manual_seed(0)
        self.model = nn.Linear(features, 1)
        self.optimizer = engine.optim.SGD(self.model.parameters(), lr=lr)

    def on_batch(self, frames) -> dict:
        """One SGD step on a ventilator message ``[header, x bytes, y bytes]``."""
        import engine
        from engine.nn import functional as F

        header = json.loads(frames[0].bytes)
        x = np.frombuffer(frames[1].buffer, np.float32).reshape(header["rows"],
                                                                header["features"])
        y = np.frombuffer(frames[2].buffer, np.float32).reshape(-1, 1)
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(engine.from_numpy(x)), engine.from_numpy(y))
        loss.backward()
        self.optimizer.step()
        return {"worker": self.name, "batch": header["batch"], "loss": loss.item()}


def run_worker(name: str, ventilator: str, sink: str, lr: float) -> int:
    """An actorgrad worker between the ventilator and the sink, until SIGTERM."""
    import zmq

    from actors.runtime import Actor

    trainer = Trainer(name, features=8, lr=lr)
    actor = Actor(None, name=name, num_worker_threads=2).start()
    results = actor.attach(sink, socket_type=zmq.PUSH)
    actor.attach(ventilator,
                 lambda frames: results.send([json.dumps(trainer.on_batch(frames)).encode()]),
                 socket_type=zmq.PULL, max_pending=1)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(3600):
        pass
    actor.stop()
    return 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--worker", nargs=3, metavar=("NAME", "VENTILATOR", "SINK"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return run_worker(*args.worker, lr=args.lr)

    vent_port, sink_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    python = sys.executable
    sink = subprocess.Popen([python, str(LEGACY / "sink.py"), "--port", str(sink_port),
                             "--batches", str(args.batches)], env=env)
    ventilator = subprocess.Popen([python, str(LEGACY / "ventilator.py"), "--port",
                                   str(vent_port), "--batches", str(args.batches),
                                   "--workers", str(args.workers)], env=env)
    workers = [subprocess.Popen([python, __file__, "--lr", str(args.lr), "--worker",
                                 f"worker{i}", f"tcp://127.0.0.1:{vent_port}",
                                 f"tcp://127.0.0.1:{sink_port}"], env=env)
               for i in range(args.workers)]
    print(f"pipeline: ventilator :{vent_port} -> {args.workers} actorgrad workers -> "
          f"sink :{sink_port}", flush=True)
    try:
        code = sink.wait(180)
        ventilator.wait(30)
    finally:
        for process in workers:
            process.send_signal(signal.SIGTERM)
        for process in [*workers, ventilator, sink]:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
    print(f"pipeline: done, workers exited with {[p.returncode for p in workers]}", flush=True)
    return code or max(p.returncode for p in workers)


if __name__ == "__main__":
    sys.exit(main())
