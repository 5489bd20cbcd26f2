"""torch's asynchronous-execution tutorial, ported: a parameter server that updates in batches.

Ports "Implementing Batch RPC Processing Using Asynchronous Executions": every
trainer sends its gradients to `BatchUpdateParameterServer.update_and_fetch_model`,
an `@async_execution` static method. It adds them up and returns one shared
Future; only when the last of `batch_update_size` trainers has reported does the
server step its optimizer and complete that Future with the new model, which then
answers all the waiting trainers at once. No server thread waits meanwhile. The
digits data replaces the tutorial's random images; the loss is MSE against one-hot
labels, as there.
Run: ``python examples/torch_patterns/batch_update_ps.py``.
"""
import os
import sys
import threading
from datetime import datetime

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")

import numpy as np  # noqa: E402
from _world import digits  # noqa: E402
from torch_patterns._spawn import free_port, spawn  # noqa: E402

import actors as rpc  # noqa: E402
import engine as torch  # noqa: E402
from engine import nn, optim  # noqa: E402
from engine.nn import functional as F  # noqa: E402

batch_size = 32
num_batches = 40


def timed_log(text):
    print(f"{datetime.now().strftime('%H:%M:%S.%f')[:-3]} {text}", flush=True)


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


class BatchUpdateParameterServer(object):

    def __init__(self, batch_update_size):
        self.model = make_model()
        self.lock = threading.Lock()
        self.future_model = rpc.Future()
        self.batch_update_size = batch_update_size
        self.curr_update_size = 0
        self.updates = 0
        self.optimizer = optim.SGD(self.model.parameters(), lr=0.5, momentum=0.9)
        for p in self.model.parameters():
            p.grad = np.zeros_like(p.data)

    def get_model(self):
        return self.model

    @staticmethod
    @rpc.async_execution
    def update_and_fetch_model(ps_rref, grads):
        self = ps_rref.local_value()
        with self.lock:
            for p, g in zip(self.model.parameters(), grads):
                p.grad += g
            self.curr_update_size += 1
            fut = self.future_model
            if self.curr_update_size >= self.batch_update_size:
                for p in self.model.parameters():
                    p.grad /= self.batch_update_size
                self.curr_update_size = 0
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=False)
                self.updates += 1
                fut.set_result(self.model)
                self.future_model = rpc.Future()
        return fut


class Trainer(object):

    def __init__(self, ps_rref, shard):
        self.ps_rref = ps_rref
        images, labels, _, _ = digits()
        rows = np.array_split(np.arange(len(labels)), shard[1])[shard[0]]
        self.images, self.labels = images[rows], labels[rows]

    def get_next_batch(self):
        rng = np.random.default_rng(rpc.get_worker_info().id)
        one_hot = np.eye(10, dtype=np.float32)
        for _ in range(num_batches):
            rows = rng.choice(len(self.labels), batch_size, replace=False)
            yield torch.tensor(self.images[rows]), torch.tensor(one_hot[self.labels[rows]])

    def train(self):
        name = rpc.get_worker_info().name
        m = self.ps_rref.rpc_sync().get_model()
        losses = []
        for inputs, labels in self.get_next_batch():
            loss = F.mse_loss(m(inputs), labels)
            loss.backward()
            losses.append(loss.item())
            m = rpc.rpc_sync(self.ps_rref.owner(),
                             BatchUpdateParameterServer.update_and_fetch_model,
                             args=(self.ps_rref, [p.grad for p in m.parameters()]))
        timed_log(f"{name} loss {np.mean(losses[:5]):.4f} -> {np.mean(losses[-5:]):.4f}")
        return losses


def run_trainer(ps_rref, shard):
    return Trainer(ps_rref, shard).train()


def run_ps(trainers):
    timed_log("Start training")
    ps = BatchUpdateParameterServer(len(trainers))
    ps_rref = rpc.RRef(ps)
    futs = [rpc.rpc_async(trainer, run_trainer, args=(ps_rref, (i, len(trainers))))
            for i, trainer in enumerate(trainers)]
    rpc.wait_all(futs)
    _, _, test_images, test_labels = digits()
    with torch.no_grad():
        predicted = ps.model(torch.tensor(test_images)).data.argmax(axis=1)
    timed_log(f"Finish training: {ps.updates} updates of {len(trainers)} trainers' "
              f"gradients each, accuracy {np.mean(predicted == test_labels):.1%}")


def run(rank, world_size, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=16, rpc_timeout=0)
    if rank != 0:
        rpc.init_rpc(f"trainer{rank}", rank=rank, world_size=world_size,
                     rpc_backend_options=options)
    else:
        rpc.init_rpc("ps", rank=rank, world_size=world_size, rpc_backend_options=options)
        run_ps([f"trainer{r}" for r in range(1, world_size)])
    rpc.shutdown()


if __name__ == "__main__":
    world_size = 4  # the server and three trainers
    spawn(run, args=(world_size, free_port()), nprocs=world_size)
