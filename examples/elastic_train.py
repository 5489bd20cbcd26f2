"""Elastic data-parallel training with checkpoints, run under ``python -m actors.launch``.

Every worker trains the same MLP on the 8x8 digits with DistributedDataParallel:
each step, each rank takes its own slice of one global batch (the same on every
rank, derived from the step number), and DDP averages the gradients, so all ranks
take the same step. The process group comes from the launcher's environment
(`env://`: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE). Rank 0 saves a checkpoint
every `--checkpoint-every` steps (written to a temporary file, then renamed, so a
kill never leaves half a file) and prints the loss and the held-out accuracy; after
a restart every worker resumes from the newest checkpoint, so a killed worker costs
at most one checkpoint interval of work. The checkpoint lives in a folder named after
the job (`--rdzv-id`) in the temporary directory, removed once training is done, unless
`--checkpoint PATH` names a file to keep. Two agents on this machine:

    python -m actors.launch --nnodes 2 --nproc-per-node 2 --rdzv-endpoint 127.0.0.1:29400 \\
        --rdzv-id demo --max-restarts 3 examples/elastic_train.py

(the same command in two terminals; the default run took 14.8 s on 2 cores: kill any
worker, or start a third agent with ``--nnodes 2:3``, to see the group resume).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _world import digits  # noqa: E402

import actors.distributed as dist  # noqa: E402
import engine  # noqa: E402
from engine import nn  # noqa: E402
from engine.nn import functional as F  # noqa: E402
from engine.nn.parallel import DistributedDataParallel  # noqa: E402

BATCH = 32  # per rank


def make_model() -> nn.Module:
    engine.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def load_checkpoint(path: str, model: nn.Module) -> int:
    """The step the checkpoint at `path` was taken at (its weights loaded), or 0."""
    if not os.path.exists(path):
        return 0
    with np.load(path) as data:
        for index, param in enumerate(model.parameters()):
            param.data[...] = data[f"p{index}"]
        return int(data["step"])


def save_checkpoint(path: str, step: int, model: nn.Module) -> None:
    tmp = f"{path}.{os.getpid()}.tmp.npz"
    np.savez(tmp, step=step, **{f"p{i}": p.data for i, p in enumerate(model.parameters())})
    os.replace(tmp, path)


def default_checkpoint() -> str:
    """A file in a folder of the temporary directory named after this job's run id."""
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    return os.path.join(tempfile.gettempdir(), f"actorgrad-elastic-train-{run_id}", "ckpt.npz")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500, help="steps to train (default 1500)")
    parser.add_argument("--lr", type=float, default=0.05, help="learning rate (default 0.05)")
    parser.add_argument("--checkpoint-every", type=int, default=100,
                        help="steps between checkpoints (default 100)")
    parser.add_argument("--checkpoint", default=None,
                        help="the checkpoint file, kept after training (default: a file in a "
                             "temporary folder named after the job, removed at the end)")
    parser.add_argument("--step-delay", type=float, default=0.0,
                        help="seconds of extra pretend work per step (for tests)")
    args = parser.parse_args()

    path = args.checkpoint or default_checkpoint()
    dist.init_process_group(timeout=60)
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:  # the one that writes it
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    restart = os.environ.get("RESTART_COUNT", "0")
    x_train, y_train, x_test, y_test = digits()
    model = make_model()
    step = load_checkpoint(path, model)  # every rank reads the same file
    model = DistributedDataParallel(model)
    optimizer = engine.optim.SGD(model.parameters(), lr=args.lr)
    print(f"rank {rank}/{world} restart {restart}: resuming at step {step} (PID {os.getpid()})",
          flush=True)
    started, losses = time.perf_counter(), []
    while step < args.steps:
        batch = np.random.default_rng(step).integers(0, len(x_train), BATCH * world)
        mine = batch[rank * BATCH:(rank + 1) * BATCH]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(engine.from_numpy(x_train[mine])),
                               engine.from_numpy(y_train[mine]))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        step += 1
        if args.step_delay:
            time.sleep(args.step_delay)
        if rank == 0 and (step % args.checkpoint_every == 0 or step == args.steps):
            save_checkpoint(path, step, model.module)
            with engine.no_grad():
                predicted = model(engine.from_numpy(x_test)).data.argmax(axis=1)
            print(f"step {step} loss {np.mean(losses):.4f} held-out accuracy "
                  f"{(predicted == y_test).mean():.1%} ({time.perf_counter() - started:.1f}s, "
                  f"checkpoint saved)", flush=True)
            losses = []
    dist.barrier()  # nobody leaves while another still needs it
    if rank == 0 and args.checkpoint is None:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)  # the job is done
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
