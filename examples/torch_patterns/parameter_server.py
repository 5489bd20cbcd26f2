"""torch's RPC parameter-server tutorial, ported: a shared model behind a lock.

Ports "Implementing a Parameter Server Using Distributed RPC Framework": one
process is the parameter server; each trainer asks it for the model through
`get_parameter_server`, which creates the one `ParameterServer` behind a module
lock the first time and hands every later caller the same one. Trainers run the
model remotely, compute the loss locally, and update the server's parameters with
distributed autograd and a `DistributedOptimizer`. The digits data replaces MNIST.
Run: ``python examples/torch_patterns/parameter_server.py``.
"""
import argparse
import os
import sys
from threading import Lock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")

import numpy as np  # noqa: E402
from _world import digits  # noqa: E402
from torch_patterns._spawn import free_port, spawn  # noqa: E402

import actors as rpc  # noqa: E402
import engine as torch  # noqa: E402
from engine import dist_autograd, nn, optim  # noqa: E402
from engine.nn import functional as F  # noqa: E402
from engine.optim import DistributedOptimizer  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), axis=1)


def call_method(method, rref, *args, **kwargs):
    """Run `method` on the value `rref` holds; this runs on the rref's owner."""
    return method(rref.local_value(), *args, **kwargs)


def remote_method(method, rref, *args, **kwargs):
    return rpc.rpc_sync(rref.owner(), call_method, args=[method, rref, *args], kwargs=kwargs)


class ParameterServer(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.model = Net()
        print("ParameterServer created", flush=True)

    def forward(self, inp):
        return self.model(inp)

    def get_param_rrefs(self):
        return [rpc.RRef(param) for param in self.model.parameters()]


# One server per process, created by the first trainer that asks: this state is
# shared only because every trainer's call runs this script's own function here.
param_server = None
global_lock = Lock()


def get_parameter_server():
    global param_server
    with global_lock:
        if not param_server:
            param_server = ParameterServer()
        return param_server


def accuracy_of(ps_rref_value, images, labels):
    with torch.no_grad():
        predicted = ps_rref_value.forward(torch.tensor(images)).data.argmax(axis=1)
    return float((predicted == labels).mean())


def run_parameter_server(rank, world_size):
    rpc.init_rpc(name="parameter_server", rank=rank, world_size=world_size)
    rpc.shutdown()  # serves the trainers until they all shut down


class TrainerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.param_server_rref = rpc.remote("parameter_server", get_parameter_server)

    def get_global_param_rrefs(self):
        return remote_method(ParameterServer.get_param_rrefs, self.param_server_rref)

    def forward(self, x):
        return remote_method(ParameterServer.forward, self.param_server_rref, x)


def run_training_loop(rank, images, labels, test_images, test_labels, epochs):
    net = TrainerNet()
    opt = DistributedOptimizer(optim.SGD, net.get_global_param_rrefs(), lr=0.05, momentum=0.9)
    order = np.random.default_rng(rank)
    for epoch in range(epochs):
        losses = []
        for rows in np.array_split(order.permutation(len(labels)), len(labels) // 32):
            with dist_autograd.context() as cid:
                model_output = net(torch.tensor(images[rows]))
                loss = F.nll_loss(model_output, labels[rows])
                dist_autograd.backward(cid, [loss])
                opt.step(cid)
            losses.append(loss.item())
        print(f"trainer {rank}: epoch {epoch + 1} loss {np.mean(losses):.4f}", flush=True)
    accuracy = rpc.rpc_sync("parameter_server", accuracy_of_server,
                            args=(test_images, test_labels))
    print(f"trainer {rank}: accuracy {accuracy:.1%}", flush=True)


def accuracy_of_server(images, labels):
    return accuracy_of(get_parameter_server(), images, labels)


def run_worker(rank, world_size, shard, epochs):
    train_x, train_y, test_x, test_y = digits()
    rows = np.array_split(np.arange(len(train_y)), world_size - 1)[shard]
    rpc.init_rpc(name=f"trainer_{rank}", rank=rank, world_size=world_size)
    run_training_loop(rank, train_x[rows], train_y[rows], test_x, test_y, epochs)
    rpc.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--world-size", type=int, default=3, help="server + trainers")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(free_port())
    spawn(run_process, args=(args.world_size, args.epochs), nprocs=args.world_size)
    print("all processes finished")


def run_process(rank, world_size, epochs):
    if rank == 0:
        run_parameter_server(rank, world_size)
    else:
        run_worker(rank, world_size, rank - 1, epochs)


if __name__ == "__main__":
    main()
