"""Rendezvous nodes in spawned processes, driven by a command queue, and state probes.

A node process opens its own store client (a TCPStore, or an EtcdStore: see
`open_rendezvous`), joins once, reports on `results`, then
obeys commands: "again" (next round), "close" (set_closed), "waiting" (report
num_nodes_waiting), "hang" (stop its keep-alive thread but stay connected, like a
hung agent), "exit".
"""
from __future__ import annotations

import os
import queue
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple

from store.base import Store
from store.elastic import (DynamicRendezvousHandler, EtcdRendezvousBackend, RendezvousBackend,
                           RendezvousError, RendezvousTimeout, StoreRendezvousBackend)
from store.elastic.state import RendezvousState, decode_state

COMMAND_TIMEOUT = 60.0


def open_rendezvous(spec: Tuple, run_id: str) -> Tuple[Store, RendezvousBackend]:
    """A store client and the run's backend: `("tcp", port)` or `("etcd", endpoint,
    prefix, lease_ttl)`."""
    if spec[0] == "tcp":
        from store import TCPStore

        store = TCPStore("127.0.0.1", spec[1], timeout=30)
        return store, StoreRendezvousBackend(store, run_id)
    from store.etcd import EtcdStore

    store = EtcdStore(spec[1], spec[2], timeout=30, ephemeral_ttl=spec[3])
    return store, EtcdRendezvousBackend(store, run_id)


def node_main(results: Any, commands: Any, spec: Tuple, run_id: str, min_nodes: int,
              max_nodes: int, conf: Optional[Dict[str, float]] = None) -> None:
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    conf = dict(conf or {})
    keep_alive = conf.pop("keep_alive_interval", 5)
    attempts = int(conf.pop("keep_alive_max_attempt", 3))
    store, backend = open_rendezvous(spec, run_id)
    handler = DynamicRendezvousHandler.from_backend(
        run_id, store, backend, min_nodes, max_nodes,
        timeout=RendezvousTimeout(**conf), keep_alive_interval=keep_alive,
        keep_alive_max_attempt=attempts)
    pid = os.getpid()

    def join() -> None:
        started = time.monotonic()
        try:
            info = handler.next_rendezvous()
            results.send(("joined", pid, info.rank, info.world_size, time.monotonic() - started))
        except RendezvousError as exc:
            results.send(("error", pid, type(exc).__name__, str(exc), time.monotonic() - started))

    join()
    while True:
        try:
            command = commands.get(timeout=COMMAND_TIMEOUT)
        except queue.Empty:
            command = "exit"
        if command == "again":
            join()
        elif command == "close":
            handler.set_closed()
            results.send(("closed", pid))
        elif command == "waiting":
            results.send(("waiting", pid, handler.num_nodes_waiting()))
        elif command == "hang":
            handler._stop_heartbeats()  # the keep-alive thread hangs; the connection stays
            results.send(("hung", pid))
        else:
            handler.shutdown()
            store.close()
            return


class StateProbe:
    """The test's view of a run's shared state, woken by the store's watch pushes."""

    def __init__(self, store: Any, backend: RendezvousBackend):
        self._backend = backend
        self._changed = threading.Event()
        store.watch_key(self._backend.key, lambda _old, _new: self._changed.set())

    def state(self) -> RendezvousState:
        pair = self._backend.get_state()
        return RendezvousState() if pair is None else decode_state(pair[0])

    def wait_for(self, predicate: Callable[[RendezvousState], bool], timeout: float
                 ) -> RendezvousState:
        """The first state that satisfies `predicate`; AssertionError after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            self._changed.clear()
            state = self.state()
            if predicate(state):
                return state
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"state never matched within {timeout}s: {state}")
            self._changed.wait(min(remaining, 0.5))


def pids_in(state: RendezvousState) -> set:
    return {node.pid for node in (*state.participants, *state.wait_list,
                                  *state.last_heartbeats)}
