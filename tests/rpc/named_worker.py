"""A worker command serving the functions of `tests.rpc.exposed` to clients that do not join."""
from __future__ import annotations

import contextlib
import pathlib
from typing import Iterator, List

import actors
from store import TCPStore
from tests.net import free_port
from tests.subprocesses import running
from tests.waiting import wait_until

START_TIMEOUT = 60.0


@contextlib.contextmanager
def serving(tmp_path: pathlib.Path, *flags: str) -> Iterator[tuple]:
    """A world of one worker (it hosts the store); yields (worker address, store port)."""
    with serving_process(tmp_path, *flags) as (address, port, _worker):
        yield address, port


@contextlib.contextmanager
def serving_process(tmp_path: pathlib.Path, *flags: str) -> Iterator[tuple]:
    """`serving`, yielding (worker address, store port, the worker's `Popen`)."""
    port = free_port()
    log = tmp_path / f"worker-{port}.log"
    args: List[str] = ["-m", "actors.worker", "--rank", "0", "--world-size", "1",
                       "--master-port", str(port), "--serve-forever",
                       "--import", "tests.rpc.exposed", *flags]
    with running(args, log) as worker:
        assert wait_until(lambda: "worker_serving" in log.read_text()
                          or worker.poll() is not None, START_TIMEOUT), "worker never served"
        assert worker.poll() is None, log.read_text()
        store = TCPStore("127.0.0.1", port, timeout=30)
        try:
            address = store.get("rpc/addresses/0").decode()
        finally:
            store.close()
        yield address, port, worker


def client(address: str) -> actors.ExposedClient:
    return actors.ExposedClient(address, timeout=30)
