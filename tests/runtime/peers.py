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
