"""Fixtures: a TCPStore master in the test process, and node processes that are always reaped."""
from __future__ import annotations

import contextlib
import itertools
import time
from multiprocessing.connection import wait
from typing import Iterator, List

import pytest

from store import TCPStore
from tests.elastic.nodes import StateProbe, node_main
from tests.store.processes import ctx

_run_ids = itertools.count()
JOIN_TIMEOUT = 20.0


class Cluster:
    """Node processes of one run; each reports on its own pipe (a killed one harms none)."""

    def __init__(self, store: TCPStore, run_id: str):
        self.store, self.run_id = store, run_id
        self._receivers: List = []
        self._pending: List = []
        self.procs: List = []
        self.commands: List = []
        self.probe = StateProbe(store, run_id)

    def start(self, count: int, min_nodes: int, max_nodes: int, **conf: float) -> List:
        started = []
        for _ in range(count):
            commands = ctx.Queue()
            receiver, sender = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=node_main, daemon=True, args=(
                sender, commands, self.store.port, self.run_id, min_nodes, max_nodes, conf))
            proc.start()
            sender.close()
            self._receivers.append(receiver)
            self.procs.append(proc)
            self.commands.append(commands)
            started.append(proc)
        return started

    def collect(self, count: int, timeout: float = 30.0) -> list:
        """The next `count` reports from any node, within `timeout`."""
        deadline = time.monotonic() + timeout
        while len(self._pending) < count:
            remaining = deadline - time.monotonic()
            live = [r for r in self._receivers if not r.closed]
            ready = wait(live, remaining) if remaining > 0 and live else []
            if not ready:
                raise AssertionError(f"got {len(self._pending)} of {count} reports "
                                     f"within {timeout}s: {self._pending}")
            for receiver in ready:
                try:
                    self._pending.append(receiver.recv())
                except EOFError:
                    receiver.close()  # that node is gone
        reports, self._pending = self._pending[:count], self._pending[count:]
        return reports

    def tell(self, proc, command: str) -> None:
        self.commands[self.procs.index(proc)].put(command)

    def stop(self) -> None:
        for commands, proc in zip(self.commands, self.procs):
            if proc.is_alive():
                commands.put("exit")
        for proc in self.procs:
            proc.join(JOIN_TIMEOUT / max(1, len(self.procs)))
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
                proc.join(5)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=30)
    group = Cluster(store, f"test-run-{next(_run_ids)}")
    try:
        yield group
    finally:
        with contextlib.ExitStack() as stack:
            stack.callback(store.close)
            group.stop()


@pytest.fixture
def agents():
    started = []
    yield started
    for agent in started:
        agent.kill()
