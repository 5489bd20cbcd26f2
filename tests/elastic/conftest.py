"""Fixtures: a TCPStore master in the test process, and node processes that are always reaped."""
from __future__ import annotations

import contextlib
import itertools
import time
from multiprocessing.connection import wait
from typing import Any, Iterator, List

import pytest

from store import TCPStore
from tests.elastic.nodes import StateProbe, node_main, open_rendezvous
from tests.store.processes import ctx

_run_ids = itertools.count()
JOIN_TIMEOUT = 20.0
ETCD_LEASE_TTL = 2  # seconds: etcd's shortest lease at its default election timeout


class Cluster:
    """Node processes of one run; each reports on its own pipe (a killed one harms none).

    `spec` says how nodes reach the store (see `open_rendezvous`); `lost_within` is
    how soon a killed node must be out of the state: the TCPStore sees its connection
    close, etcd its lease expire.
    """

    def __init__(self, spec: tuple, run_id: str, lost_within: float):
        self.spec, self.run_id, self.lost_within = spec, run_id, lost_within
        self.store, backend = open_rendezvous(spec, run_id)
        self._receivers: List = []
        self._pending: List = []
        self.procs: List = []
        self.commands: List = []
        self.probe = StateProbe(self.store, backend)

    def start(self, count: int, min_nodes: int, max_nodes: int, context: Any = ctx,
              **conf: float) -> List:
        """Start `count` nodes (spawned; `tests.preloaded.ctx` for many)."""
        started = []
        for _ in range(count):
            commands = context.Queue()
            receiver, sender = context.Pipe(duplex=False)
            proc = context.Process(target=node_main, daemon=True, args=(
                sender, commands, self.spec, self.run_id, min_nodes, max_nodes, conf))
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

    def kill(self) -> None:
        """Kill every node at once (a graceful exit of each is not what a test checks)."""
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
        for proc in self.procs:
            proc.join(5)

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


@pytest.fixture(params=["tcp", "etcd"])
def cluster(request) -> Iterator[Cluster]:
    with contextlib.ExitStack() as stack:
        if request.param == "tcp":
            server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                              timeout=30)
            stack.callback(server.close)
            spec, lost_within = ("tcp", server.port), 3.0
        else:
            # A test of many nodes on few cores takes the store's default lease: a node
            # starved of CPU for 2 s while the others start must not lose its keys.
            marker = request.node.get_closest_marker("etcd_lease_ttl")
            ttl = ETCD_LEASE_TTL if marker is None else marker.args[0]
            spec = ("etcd", request.getfixturevalue("etcd_endpoint"),
                    request.getfixturevalue("etcd_prefix"), ttl)
            lost_within = ttl + 1.0
        group = Cluster(spec, f"test-run-{next(_run_ids)}", lost_within)
        stack.callback(group.store.close)
        stack.callback(group.stop)
        yield group


@pytest.fixture
def agents():
    started = []
    yield started
    for agent in started:
        agent.kill()
