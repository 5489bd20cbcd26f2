"""Failure detection and keep-alives through one session-bound ("ephemeral") key per node.

A node sets its key before it enters the state, and sets it again at every
keep-alive; the store deletes the key when the node's connection closes or stops
answering transport heartbeats (a TCPStore's or EtcdStore's `set_ephemeral`). Each
node watches the keys of the nodes it sees in the state, so:

- a deletion names a dead node at once (a node listed in the state whose key is gone);
- a set is a keep-alive heard, with no write of the shared state: keep-alives never
  compete with joins for the state's compare-and-set, however many nodes wait;
- a node that stays connected but stops setting its key (a stuck agent) is found by
  the keep-alive window, measured from the newest of its heartbeat in the state and
  the last set heard. What a node hears of others stays in its own decisions: the
  shared state holds only what each node wrote of itself.

A node new to this one is watched, then asked about once, so that one that died
before the watch began is found within a second or so.

Stores without session keys (HashStore, FileStore) leave both to the heartbeats in the
state, as torch does.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Dict, List, Set

from store.base import Store
from store.elastic.backend import call_store
from store.elastic.settings import NodeDesc

# How often a node asks the store about the keys of nodes it has just begun to watch.
ASK_EVERY = 1.0


class NodeLiveness:
    """The liveness keys of one rendezvous in `store`, seen from node `node` (inert if the
    store has no sessions). `on_lost()` is called when a watched key goes away."""

    def __init__(self, store: Store, run_id: str, node: NodeDesc, on_lost: Callable[[], None],
                 wall_clock: Callable[[], float] = time.time):
        self._store = store
        self._node = node
        self._wall = wall_clock
        self._prefix = f"elastic/rdzv/{run_id}/alive/"
        self._on_lost = on_lost
        self._watching: Set[NodeDesc] = set()  # nodes whose key this node watches
        self._known: Set[NodeDesc] = set()  # ... and has asked the store about once
        self._heard: Dict[NodeDesc, float] = {}  # wall time each node was last heard from
        self._gone: Set[NodeDesc] = set()
        self._asked_at = float("-inf")
        self._lock = threading.Lock()
        self.supported = callable(getattr(store, "set_ephemeral", None))

    @property
    def node(self) -> NodeDesc:
        """The node these keys are seen from."""
        return self._node

    def key(self, node: NodeDesc) -> str:
        return f"{self._prefix}{node}"

    def announce(self) -> None:
        """(Re)set this node's key, owned by this store client's session: a keep-alive."""
        if not self.supported:
            return
        now = self._wall()
        call_store(self._store.set_ephemeral, self.key(self._node), f"{now:.3f}".encode())
        with self._lock:
            self._heard[self._node] = now

    def observe(self, beats: Dict[NodeDesc, float], now: float, window: float
                ) -> List[NodeDesc]:
        """Watch the nodes of `beats` (node → its heartbeat in the state) that are new to
        this node, and ask the store once whether their keys are there; the nodes among
        `beats` whose key is gone.

        A new node whose heartbeat would leave the keep-alive `window` before the next
        batch is asked about at once (that heartbeat alone would make it look dead);
        the others together, at most once every `ASK_EVERY` seconds, so that a crowd of
        joins costs no store call per sync. A key that is there counts as a keep-alive
        heard `now` (wall-clock seconds). A store error leaves the nodes it concerns
        new, for the next call.
        """
        if not self.supported:
            return []
        with self._lock:
            # A node that left the state is new again if it comes back: what was heard
            # of it before (its key's deletion, say) may predate its return.
            for node in self._known.difference(beats):
                self._known.discard(node)
                self._gone.discard(node)
                self._heard.pop(node, None)
            new = [n for n in beats if n not in self._known and n != self._node]
        for node in new:
            self._watch(node)
        if now - self._asked_at >= ASK_EVERY:
            ask = new
            if new:
                self._asked_at = now
        else:
            ask = [n for n in new if beats[n] + window < now + ASK_EVERY]
        present = set(self._present(ask))
        with self._lock:
            for node in ask:
                self._known.add(node)
                if node in present:
                    self._heard[node] = max(self._heard.get(node, now), now)
                else:
                    self._gone.add(node)
            return sorted(n for n in beats if n in self._gone)

    def still_connected(self, nodes: List[NodeDesc]) -> List[NodeDesc]:
        """Those of `nodes` whose key is still there. Each is watched from now on, so
        that its key's deletion calls `on_lost()` (empty if the store has no sessions)."""
        if not self.supported:
            return []
        for node in nodes:
            self._watch(node)
        return self._present(nodes)

    def _present(self, nodes: List[NodeDesc]) -> List[NodeDesc]:
        """Those of `nodes` whose key exists: one round trip when all do."""
        if not nodes or call_store(self._store.check, [self.key(n) for n in nodes]):
            return nodes
        return [n for n in nodes if call_store(self._store.check, [self.key(n)])]

    def last_heard(self) -> Dict[NodeDesc, float]:
        """When nodes were last heard from through their keys (this one included), in
        wall-clock seconds."""
        with self._lock:
            return dict(self._heard)

    def _watch(self, node: NodeDesc) -> None:
        with self._lock:  # the keep-alive thread and the node's own may both ask
            if node in self._watching:
                return
            self._watching.add(node)
        try:
            call_store(self._store.watch_key, self.key(node), self._watcher(node))
        except BaseException:
            with self._lock:
                self._watching.discard(node)
            raise

    def _watcher(self, node: NodeDesc) -> Callable[[object, object], None]:
        def on_change(_old: object, new: object) -> None:
            with self._lock:
                if new is None:
                    self._gone.add(node)
                else:
                    self._gone.discard(node)
                    self._heard[node] = self._wall()
            if new is None:
                self._on_lost()
        return on_change
