"""Functions the distributed autograd tests run on remote workers."""
from __future__ import annotations

import collections
import threading
import time
import uuid

import numpy as np

import actors
import engine
from engine import dist_autograd, nn


def contexts_alive() -> int:
    return len(dist_autograd.container)


def linear_forward(layer_rref, x):
    return layer_rref.local_value()(x)


def make_linear(in_features: int, out_features: int, seed: int):
    engine.manual_seed(seed)
    return nn.Linear(in_features, out_features)


def grads_of_module(module_rref, context_id: int) -> list:
    """The context's gradients of a module owned here, in parameter order."""
    grads = dist_autograd.get_gradients(context_id)
    return [grads.get(p) for p in module_rref.local_value().parameters()]


def grad_of(tensor_rref, context_id: int):
    return dist_autograd.get_gradients(context_id).get(tensor_rref.local_value())


def dot_grad_free_check(tensor_rref):
    return tensor_rref.local_value().grad


def tanh_then_next(x, next_worker: str):
    """Stage 1 of a 3-worker chain: work here, then a nested RPC to the next stage."""
    y = engine.tanh(x) * 2.0
    return actors.rpc_sync(next_worker, square_sum_rows, args=(y,))


def square_sum_rows(y):
    return (y * y).sum(axis=1)


def make_param(seed: int, shape: tuple):
    engine.manual_seed(seed)
    return engine.randn(*shape, dtype=np.float64, requires_grad=True)


class Explode(engine.Function):
    """A custom op whose backward fails."""

    @staticmethod
    def forward(ctx, x):
        return x * 3.0

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("the backward of Explode refuses to run")


def explode(x):
    return Explode.apply(x)


release_hang = threading.Event()
stalled = threading.Event()


class Stall(engine.Function):
    """A custom op whose backward waits (for the dead-worker test)."""

    @staticmethod
    def forward(ctx, x):
        return x + 1.0

    @staticmethod
    def backward(ctx, grad):
        stalled.set()
        release_hang.wait(60)
        return grad


def is_stalled() -> bool:
    return stalled.is_set()


def stall(x):
    return Stall.apply(x)


def start_context_towards(peer: str) -> int:
    """Create a context here, record a send/recv pair with `peer`, and leave it open."""
    global _held_context
    _held_context = dist_autograd.context()
    context_id = _held_context.__enter__()
    t = engine.ones(2, requires_grad=True)
    actors.rpc_sync(peer, engine.add, args=(t, t))
    return context_id


def contexts_created_by(rank: int) -> int:
    return len(dist_autograd.container.created_by(rank))


def train_step_on_own_context(peer: str, seed: int) -> list:
    """Run a whole context from this worker (for concurrency tests); returns grads."""
    rng = np.random.default_rng(seed)
    with dist_autograd.context() as context_id:
        a = engine.tensor(rng.standard_normal(4), requires_grad=True)
        b = actors.rpc_sync(peer, engine.mul, args=(a, a))
        loss = b.sum()
        dist_autograd.backward(context_id, [loss])
        return [a.data.copy(), dist_autograd.get_gradients(context_id)[a]]


def sleep_then_add(a, b, seconds: float):
    time.sleep(seconds)
    return a + b


def once_released_call(x, next_worker: str):
    """Wait until the caller's context is released here, then send `x` on to
    `next_worker` from the call that context is still current in."""
    context_id = dist_autograd.container.current().id
    deadline = time.monotonic() + 10
    while dist_autograd.container.find(context_id) is not None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"context {context_id} was not released within 10 s")
        time.sleep(0.01)
    return actors.rpc_sync(next_worker, engine.mul, args=(x, 2.0))


class Holder:
    """A user object carrying tensors in its attributes."""

    def __init__(self, tensor, scale):
        self.tensor = tensor
        self.scale = scale


def weighted_total(bundle):
    """Sum of everything in {"xs": [a, Holder(b, s)], "y": (c,)}: a + s*b + c, summed."""
    first, holder = bundle["xs"]
    (last,) = bundle["y"]
    return (first + holder.tensor * holder.scale + last).sum()


def sum_of_squares(x):
    return (x * x).sum()


Pair = collections.namedtuple("Pair", "first second")


class Slotted:
    """A user object that keeps its tensor in a slot (no ``__dict__``)."""

    __slots__ = ("tensor", "scale")

    def __init__(self, tensor, scale):
        self.tensor, self.scale = tensor, scale


def containers_total(bundle):
    """Sum of an OrderedDict {"pair": Pair(a, b), "slotted": Slotted(c, s), "deep": [[...[d]]]}:
    a + 2*b + s*c + d, summed."""
    deep = bundle["deep"]
    while isinstance(deep, list):
        (deep,) = deep
    pair, slotted = bundle["pair"], bundle["slotted"]
    return (pair.first + 2.0 * pair.second + slotted.tensor * slotted.scale + deep).sum()


def pair_and_dict_of(x):
    """A namedtuple and an OrderedDict holding 2*x and 3*x."""
    return Pair(x * 2.0, collections.OrderedDict(third=x * 3.0))


def call(remote: bool, worker: str, fn, *args):
    """`fn(*args)` on `worker` over RPC, or here: the same graph built in one process."""
    return actors.rpc_sync(worker, fn, args=args) if remote else fn(*args)


def passes_seen(context_id: int):
    """How many backward passes of the context reached this worker (None: no context)."""
    context = dist_autograd.container.find(context_id)
    return None if context is None else len(context.passes)


def square(x):
    return x * x


def double_with_square_aside(x, aside: str, remote: bool = True):
    """z = 2x; z² is computed on `aside` and thrown away; returns z."""
    z = x * 2.0
    call(remote, aside, square, z)
    return z


def triple_and_call_back(x, caller: str, remote: bool = True):
    """y = 3x; y² is computed back on `caller`, and y + x too but thrown away; y² + y."""
    y = x * 3.0
    u = call(remote, caller, engine.mul, y, y)
    call(remote, caller, engine.add, y, x)
    return u + y


class Scaler:
    """An object with a parameter, used through RRef proxies."""

    def __init__(self, value: float):
        self.weight = engine.tensor(np.array([value]), requires_grad=True)

    def scale_and_shift(self, x):
        """(x * w, x + w): callers use the first."""
        return x * self.weight, x + self.weight


def scaler_weight_grad(scaler_rref, context_id: int):
    return dist_autograd.get_gradients(context_id).get(scaler_rref.local_value().weight)


@actors.async_execution
def cube_then_double(x, far: str):
    """2x³: x³ on `far`, doubled in a `then` callback."""
    return actors.rpc_async(far, engine.mul, args=(x, x * x)).then(lambda done: done.wait() * 2.0)


_gates: dict = {}
_gates_lock = threading.Lock()


def _gate(key: str) -> threading.Event:
    with _gates_lock:
        return _gates.setdefault(key, threading.Event())


def square_once_opened(x, key: str):
    """x², returned once `open_gate(key)` was called (within 10 s)."""
    if not _gate(key).wait(10):
        raise TimeoutError(f"gate {key} never opened")
    return x * x


def open_gate(key: str) -> None:
    _gate(key).set()


@actors.async_execution
def square_then_square_again(x, far: str):
    """(3x²)² = 9x⁴: x² on `far`, then, from the first call's callback, a second call to
    `far` squares 3x² (the second hop is made in the callback, not in the function)."""
    result = actors.Future()

    def second_hop(first):
        again = actors.rpc_async(far, square, args=(first.wait() * 3.0,))
        again.add_done_callback(lambda done: result.set_exception(done.exception())
                                if done.exception() else result.set_result(done.value()))

    key = uuid.uuid4().hex
    first = actors.rpc_async(far, square_once_opened, args=(x, key))
    first.then(second_hop)
    # Only now may `far` answer: the callback runs where the reply arrives, not here.
    actors.rpc_async(far, open_gate, args=(key,))
    return result


@actors.async_execution
def square_then_refuse(x, far: str):
    """A `then` callback that raises after a call made in the context."""
    def refuse(done):
        raise ValueError(f"the callback refuses {done.wait().shape}")

    return actors.rpc_async(far, square, args=(x,)).then(refuse)
