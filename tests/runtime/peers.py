"""Actors that tests run in spawned processes, and the kinds they serve.

Kinds from 0xF000 up are free for applications; the tests use a few.
"""
import threading
import time

import numpy as np

from actors.runtime import Actor

ECHO = 0xF001
FAIL = 0xF002
HANG = 0xF003
SUM = 0xF004
SLOW = 0xF005  # answers after the number of seconds it is sent


class Unpicklable:
    def __reduce__(self):
        raise TypeError("this object refuses to be pickled")


def turn_on(actor: Actor) -> bool:
    """Whether a thread reads `actor`'s mailbox in its turn now (asked without taking one)."""
    return actor.core._mailbox._turns.lent


class Handled:
    """Each payload a server's inline handler took, in mailbox order, and the name of
    the thread it ran on."""

    def __init__(self) -> None:
        self.seen: list = []  # (payload, thread name)
        self._cond = threading.Condition()

    def take(self, msg) -> object:
        with self._cond:
            self.seen.append((msg.payload, threading.current_thread().name))
            self._cond.notify_all()
        return msg.payload

    def payloads(self) -> list:
        with self._cond:
            return [payload for payload, _ in self.seen]

    def threads(self) -> set:
        with self._cond:
            return {thread for _, thread in self.seen}

    def wait_for(self, count: int, timeout: float) -> list:
        """The payloads, once `count` have come (asserted within `timeout` seconds)."""
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.seen) >= count, timeout), \
                f"{len(self.seen)} of {count} messages arrived"
        return self.payloads()


def _fail(msg):
    raise KeyError(f"no entry named {msg.payload!r}")


def make_actor(address: str = "tcp://127.0.0.1:0", workers_receive: bool = False) -> Actor:
    actor = Actor(address, name="peer", num_worker_threads=4, workers_receive=workers_receive)
    actor.register(ECHO, lambda msg: msg.payload)
    actor.register(FAIL, _fail)
    actor.register(HANG, lambda msg: threading.Event().wait(60))
    actor.register(SUM, lambda msg: float(np.sum(msg.payload)))
    actor.register(SLOW, lambda msg: time.sleep(msg.payload) or msg.payload)
    return actor


def serve(ready, address: str = "tcp://127.0.0.1:0", workers_receive: bool = False) -> None:
    """Serve the test kinds until killed; report the bound address on `ready`."""
    actor = make_actor(address, workers_receive).start()
    ready.put(actor.address)
    while True:
        time.sleep(3600)


def call_then_hang(address: str, ready) -> None:
    """Make one request to `address`, report it answered, then hang until killed."""
    client = Actor(None, name="caller").start()
    client.request(address, ECHO, "hello", timeout=30).wait(30)
    ready.put("answered")
    while True:
        time.sleep(3600)


def serve_process_group(port: int, ready) -> None:
    """Form a process group of one rank; report its transport's address, then hang until
    killed."""
    import actors.distributed as dist
    from actors.distributed import world

    dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1,
                            timeout=60)
    ready.put(world.group_or_default(None).transport.address)
    while True:
        time.sleep(3600)
