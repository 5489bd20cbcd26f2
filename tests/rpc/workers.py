"""Functions that RPC tests run remotely, and the worker processes that serve them."""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np

import actors
from actors.rpc import RpcEnvelope, RpcHook

calls = {"count": 0}
release = threading.Event()


def add(a, b):
    return a + b


def whoami():
    return actors.get_worker_info().name


def count_calls():
    calls["count"] += 1
    return calls["count"]


def lost_workers():
    """The workers this worker has found lost, by name."""
    from actors.rpc.state import current_agent

    return sorted(current_agent()._lost)


def call_count():
    return calls["count"]


def nested_add(to, a, b):
    """A remote function that itself makes an RPC."""
    return actors.rpc_sync(to, add, args=(a, b)) * 10


@actors.async_execution
def chain(path, value):
    """Hop along `path` (worker names), adding 1 at each, without holding a thread."""
    if not path:
        return _completed(value)
    return actors.rpc_async(path[0], chain, args=(path[1:], value + 1)).then(
        lambda done: done.value())


def _completed(value):
    future = actors.Future()
    future.set_result(value)
    return future


def blocking_chain(path, value):
    """The same hops holding the worker thread while waiting (deadlocks with 1 thread)."""
    if not path:
        return value
    return actors.rpc_sync(path[0], blocking_chain, args=(path[1:], value + 1))


def sleep_then(seconds, value):
    time.sleep(seconds)
    return value


def hang():
    threading.Event().wait(120)


def raise_key_error(key):
    raise KeyError(f"no entry {key!r}")


def call_raising_key_error(to, key):
    """Call worker `to`, whose function raises; the KeyError passes on uncaught."""
    return actors.rpc_sync(to, raise_key_error, args=(key,))


def die_now():
    os.kill(os.getpid(), signal.SIGKILL)


def call_dying(to):
    """Call worker `to`, which dies serving the call."""
    return actors.rpc_sync(to, die_now, timeout=60)


def raise_base(name):
    """Raise SystemExit or KeyboardInterrupt, which are not `Exception`s."""
    raise {"SystemExit": SystemExit, "KeyboardInterrupt": KeyboardInterrupt}[name](name)


class UnpicklableAtCaller(Exception):
    """Pickles fine, but cannot be rebuilt: the caller falls back to RemoteError."""

    def __reduce__(self):
        return _refuse_to_unpickle, (str(self),)


def _refuse_to_unpickle(message):
    raise RuntimeError("this exception cannot be rebuilt here")


def raise_unpicklable(message):
    raise UnpicklableAtCaller(message)


class Unpicklable:
    def __reduce__(self):
        raise TypeError("this object refuses to be pickled")


def return_unpicklable():
    return Unpicklable()


class Counter:
    def __init__(self, start=0):
        self.value = start

    def increment(self, by=1):
        self.value += by
        return self.value


def owned_values():
    """How many RRef values this worker owns right now."""
    from actors.rpc.state import current_agent

    return len(current_agent().owners)


def local_value_of(rref):
    return rref.local_value().value


def fetch_from_third(rref):
    return rref.to_here().value


def make_array(n):
    return np.arange(n, dtype=np.float64)


class TracingHook(RpcHook):
    """Records the meta it sees and tags each message with the sender's name."""

    seen: list = []

    def request_sent(self, envelope: RpcEnvelope) -> None:
        envelope.meta["trace"] = ("request", actors.get_worker_info().name)

    def request_received(self, envelope: RpcEnvelope):
        TracingHook.seen.append(envelope.meta.get("trace"))
        args, kwargs = envelope.payload
        if args and args[0] == "wrap-me":
            envelope.payload = (("wrapped",) + tuple(args[1:]), kwargs)
        return super().request_received(envelope)

    def response_sent(self, envelope: RpcEnvelope) -> None:
        envelope.meta["trace"] = ("response", actors.get_worker_info().name)

    def response_received(self, envelope: RpcEnvelope) -> None:
        TracingHook.seen.append(envelope.meta.get("trace"))


def seen_by_hook():
    return list(TracingHook.seen)


def echo(value):
    return value


def serve(rank: int, world_size: int, port: int, threads: int, with_hook: bool) -> None:
    """A worker that serves until the world shuts down."""
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    if with_hook:
        actors.register_hook("trace", TracingHook())
    actors.init_rpc(f"worker{rank}", rank, world_size,
                    init_method=f"tcp://127.0.0.1:{port}", num_worker_threads=threads,
                    timeout=30)
    actors.shutdown(graceful=True, timeout=120)


class AsyncCounter:
    """A value whose method answers later, from another worker's reply (torch's pattern)."""

    def __init__(self, helper):
        self.value = 0
        self.helper = helper

    @actors.async_execution
    def add_later(self, by):
        def store(done):
            self.value = done.value()
            return self.value

        return actors.rpc_async(self.helper, add, args=(self.value, by)).then(store)


def confirmed_there(rref):
    return rref.confirmed_by_owner()


def shared_blocks_mapped() -> int:
    """How many other processes' shared-memory blocks this worker has mapped."""
    from actors.runtime.protocol import shared_buffers

    return shared_buffers.BLOCKS.mapped()


kept: list = []
kept_one = threading.Event()
holding, let_go = threading.Event(), threading.Event()


def hold() -> None:
    """Keep this worker's thread until the test lets go (nothing reads its mailbox
    meanwhile when it has one thread)."""
    holding.set()
    let_go.wait(60)


def keep(value) -> None:
    """Keep `value` in this process (a test reads it from `kept`)."""
    kept.append(value)
    kept_one.set()


def send_and_leave(port: int, array, sent) -> None:
    """Rank 1 of a world of 2: send `array` to rank 0 without waiting, say so on the
    queue `sent`, and end at once, with no shutdown (a normal interpreter exit)."""
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    actors.init_rpc("worker1", 1, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=30)
    actors.rpc_async("worker0", keep, args=(array,))
    sent.put("sent")
