"""torch's pipeline-parallel RPC tutorial, ported: a model in two shards chained by RRefs.

Ports "Distributed Pipeline Parallelism Using RPC": each shard lives on its own
worker (`rpc.remote`). The master cuts every batch into micro-batches; for each it
wraps the input in an RRef, asks shard 1 for an RRef to its output
(`p1_rref.remote().forward`) and hands that RRef to shard 2
(`p2_rref.rpc_async().forward`), so shard 2 fetches shard 1's output directly and
both shards work on different micro-batches at once. Distributed autograd and a
`DistributedOptimizer` train both shards. MLP shards on the digits replace the
ResNet50 on random images; the loss is MSE against one-hot labels, as there.
Run: ``python examples/torch_patterns/rref_pipeline.py``.
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")

import numpy as np  # noqa: E402
from _world import digits  # noqa: E402
from torch_patterns._spawn import free_port, spawn  # noqa: E402

import actors as rpc  # noqa: E402
import engine as torch  # noqa: E402
from actors import RRef  # noqa: E402
from engine import dist_autograd, nn, optim  # noqa: E402
from engine.nn import functional as F  # noqa: E402
from engine.optim import DistributedOptimizer  # noqa: E402

num_batches = 100
batch_size = 64


class ShardBase(nn.Module):
    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()  # micro-batches of one shard run one at a time

    def parameter_rrefs(self):
        return [RRef(p) for p in self.parameters()]


class Shard1(ShardBase):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.seq = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU())

    def forward(self, x_rref):
        x = x_rref.to_here()
        with self._lock:
            out = self.seq(x)
        return out


class Shard2(ShardBase):
    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.seq = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x_rref):
        x = x_rref.to_here()
        with self._lock:
            out = self.seq(x)
        return out


class DistNet(nn.Module):
    """Assembles the two shards and pipelines micro-batches through them."""

    def __init__(self, split_size, workers):
        super().__init__()
        self.split_size = split_size
        self.p1_rref = rpc.remote(workers[0], Shard1)
        self.p2_rref = rpc.remote(workers[1], Shard2)

    def forward(self, xs):
        out_futures = []
        for start in range(0, len(xs), self.split_size):
            x_rref = RRef(torch.tensor(xs[start:start + self.split_size]))
            y_rref = self.p1_rref.remote().forward(x_rref)
            z_fut = self.p2_rref.rpc_async().forward(y_rref)
            out_futures.append(z_fut)
        return torch.concatenate(rpc.wait_all(out_futures))

    def parameter_rrefs(self):
        remote_params = []
        remote_params.extend(self.p1_rref.remote().parameter_rrefs().to_here())
        remote_params.extend(self.p2_rref.remote().parameter_rrefs().to_here())
        return remote_params


def run_master(split_size):
    images, labels, test_images, test_labels = digits()
    model = DistNet(split_size, ["worker1", "worker2"])
    opt = DistributedOptimizer(optim.SGD, model.parameter_rrefs(), lr=0.3, momentum=0.9)
    one_hot = np.eye(10, dtype=np.float32)
    order = np.random.default_rng(0).permutation(len(labels))
    started, losses = time.perf_counter(), []
    for i in range(num_batches):
        rows = order[(i * batch_size) % len(order):][:batch_size]
        inputs, targets = images[rows], torch.tensor(one_hot[labels[rows]])
        with dist_autograd.context() as context_id:
            outputs = model(inputs)
            loss = F.mse_loss(outputs, targets)
            dist_autograd.backward(context_id, [loss])
            opt.step(context_id)
        losses.append(loss.item())
    with torch.no_grad():
        predicted = model(test_images).data.argmax(axis=1)
    print(f"split size {split_size:2d}: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
          f"accuracy {np.mean(predicted == test_labels):.1%}, "
          f"{time.perf_counter() - started:.2f} s", flush=True)


def run_worker(rank, world_size, split_size, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=16, rpc_timeout=300)
    if rank == 0:
        rpc.init_rpc("master", rank=rank, world_size=world_size, rpc_backend_options=options)
        run_master(split_size)
    else:
        rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size,
                     rpc_backend_options=options)
    rpc.shutdown()


if __name__ == "__main__":
    world_size = 3
    for num_split in [64, 16, 8]:
        spawn(run_worker, args=(world_size, num_split, free_port()), nprocs=world_size)
    print("pipeline done")
