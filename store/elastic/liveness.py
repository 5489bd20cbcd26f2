"""Fast failure detection: one session-bound ("ephemeral") liveness key per node.

A node sets its key before it enters the state; the store deletes the key when the
node's connection closes or stops answering transport heartbeats (a TCPStore's
`set_ephemeral`). So a node listed in the state whose key is missing is dead, and
the deletion's watch event wakes the survivors at once. Stores without session
keys (HashStore, FileStore, PrefixStore) leave detection to the keep-alive window.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Iterable, List, Optional, Set

from store.base import Store
from store.elastic.errors import RendezvousConnectionError
from store.elastic.settings import NodeDesc
from store.errors import StoreError


class NodeLiveness:
    """The liveness keys of one rendezvous in `store` (inert if the store has no sessions)."""

    def __init__(self, store: Store, run_id: str, on_lost: Callable[[], None],
                 recheck: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self._store = store
        self._recheck = recheck
        self._clock = clock
        self._checked_at: Optional[float] = None
        self._lost_since_check = False
        self._prefix = f"elastic/rdzv/{run_id}/alive/"
        self._on_lost = on_lost
        self._watched: Set[NodeDesc] = set()
        self._lock = threading.Lock()
        self.supported = callable(getattr(store, "set_ephemeral", None))

    def key(self, node: NodeDesc) -> str:
        return f"{self._prefix}{node}"

    def announce(self, node: NodeDesc) -> None:
        """(Re)set this node's key, owned by this store client's session."""
        if self.supported:
            self._call(self._store.set_ephemeral, self.key(node), b"1")

    def lost(self, nodes: Iterable[NodeDesc]) -> List[NodeDesc]:
        """The nodes among `nodes` whose key is gone; one round trip when all are alive.

        Asks the store only if a watched key went away since the last look, or the
        last look is `recheck` seconds old: a node sets its key before it enters the
        state, so between looks only a deletion can make a difference.
        """
        nodes = sorted(nodes)
        if not self.supported or not nodes:
            return []
        now = self._clock()
        with self._lock:
            if self._checked_at is not None and not self._lost_since_check \
                    and now - self._checked_at < self._recheck:
                return []
            self._lost_since_check = False
            self._checked_at = now
        if self._call(self._store.check, [self.key(n) for n in nodes]):
            return []
        return [n for n in nodes if not self._call(self._store.check, [self.key(n)])]

    def watch(self, nodes: Iterable[NodeDesc]) -> None:
        """Be told (`on_lost()`) when any of `nodes` loses its key; each node watched once."""
        if not self.supported:
            return
        with self._lock:
            new = [n for n in nodes if n not in self._watched]
            self._watched.update(new)
        for node in new:
            self._call(self._store.watch_key, self.key(node), self._on_change)

    @staticmethod
    def _call(operation, *args):
        try:
            return operation(*args)
        except StoreError as exc:
            raise RendezvousConnectionError(
                f"the rendezvous store failed on {operation.__name__}: {exc}") from exc

    def _on_change(self, _old: object, new: object) -> None:
        if new is None:
            with self._lock:
                self._lost_since_check = True
            self._on_lost()
