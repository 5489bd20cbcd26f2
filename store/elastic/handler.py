"""`DynamicRendezvousHandler`: the public face of the rendezvous (torch's handler).

It owns this node's identity, the state holder and executor, the liveness key and
the keep-alive thread, and turns a completed round into a `RendezvousInfo` with a
store private to that round.
"""
from __future__ import annotations

import threading
import time
import weakref
from typing import Callable, List, Optional, Set

from actors.runtime.process.log import get_logger
from actors.runtime.concurrency.threads import start_thread
from actors.runtime.process.waits import SlowWait
from store.base import Store
from store.elastic.backend import RendezvousBackend
from store.elastic.errors import RendezvousError
from store.elastic.executor import ChangeSignal, OpExecutor, StateHandler, StateHolder
from store.elastic.info import RendezvousInfo, RendezvousStoreInfo
from store.elastic.liveness import NodeLiveness
from store.elastic.operators import CloseOp, ExitOp, JoinOp, KeepAliveOp
from store.elastic.waiting import join_wait
from store.elastic.settings import (NodeDesc, RendezvousSettings, RendezvousTimeout, Seconds,
                                    new_node_desc)
from store.prefix_store import PrefixStore

log = get_logger(__name__)

Clock = Callable[[], float]
_JOIN_THREAD_TIMEOUT = 10.0


class DynamicRendezvousHandler:
    """Rounds of rendezvous among `min_nodes` to `max_nodes` nodes.

    Build it with `from_backend`. `clock` (monotonic) and `wall_clock` (epoch
    seconds) can be injected; the keep-alive thread waits in real time.
    """

    def __init__(self, node: NodeDesc, settings: RendezvousSettings, backend_name: str,
                 store: Store, executor: OpExecutor, holder: StateHolder,
                 liveness: NodeLiveness, peer_lost: ChangeSignal, clock: Clock,
                 local_addr: Optional[str] = None):
        self._node = node
        self._local_addr = local_addr
        self._settings = settings
        self._backend_name = backend_name
        self._store = store
        self._executor = executor
        self._holder = holder
        self._liveness = liveness
        self._peer_lost = peer_lost
        self._clock = clock
        self._heartbeat_thread: Optional[threading.Thread] = None
        self._heartbeat_stop = threading.Event()
        weakref.finalize(self, _stop_keep_alive, self._heartbeat_stop, peer_lost)

    @classmethod
    def from_backend(cls, run_id: str, store: Store, backend: RendezvousBackend,
                     min_nodes: int, max_nodes: int, local_addr: Optional[str] = None,
                     timeout: Optional[RendezvousTimeout] = None,
                     keep_alive_interval: Seconds = 5, keep_alive_max_attempt: int = 3,
                     *, clock: Clock = time.monotonic,
                     wall_clock: Clock = time.time) -> "DynamicRendezvousHandler":
        """A handler for run `run_id` whose state lives in `backend` and round stores in `store`.

        The positional order is torch's. `local_addr` names this node (default: the
        host name) and is the bootstrap address it publishes when it is rank 0.
        """
        if not isinstance(store, Store):
            raise TypeError(f"store must be a Store, got {type(store).__name__}")
        if not isinstance(backend, RendezvousBackend):
            raise TypeError(f"backend must be a RendezvousBackend, got {type(backend).__name__}")
        settings = RendezvousSettings(run_id, min_nodes, max_nodes, timeout or RendezvousTimeout(),
                                      keep_alive_interval, keep_alive_max_attempt)
        node = new_node_desc(local_addr)
        state_changed, peer_lost = ChangeSignal(), ChangeSignal()

        def on_lost() -> None:
            peer_lost.notify()
            state_changed.notify()

        liveness = NodeLiveness(store, run_id, node, on_lost, wall_clock)
        holder = StateHolder(backend, settings, liveness, wall_clock)

        def on_state(pair: Optional[tuple]) -> None:
            holder.offer(pair)
            state_changed.notify()

        pushes = backend.watch(on_state)
        executor = OpExecutor(node, holder, settings, state_changed, pushes, clock, wall_clock)
        log.info("rendezvous_handler_created", run_id=run_id, node=str(node),
                 min_nodes=min_nodes, max_nodes=max_nodes, backend=backend.name,
                 liveness_keys=liveness.supported, timeout=repr(settings.timeout))
        return cls(node, settings, backend.name, store, executor, holder, liveness, peer_lost,
                   clock, local_addr)

    # ---- the handler API ----------------------------------------------------------

    @property
    def settings(self) -> RendezvousSettings:
        """The rendezvous settings: run id, node bounds, timeouts and keep-alive interval."""
        return self._settings

    @property
    def node(self) -> NodeDesc:
        """This node's identity in the rendezvous state (host address, process id, local id)."""
        return self._node

    def get_backend(self) -> str:
        """The name of the backend the state is kept in (``c10d``, ``etcd``, ...), as torch's
        handlers."""
        return self._backend_name

    def get_run_id(self) -> str:
        """The run id that every node of this job passes."""
        return self._settings.run_id

    def next_rendezvous(self) -> RendezvousInfo:
        """Leave the current round, join the next, and return this node's place in it.

        Rank 0 publishes the round's bootstrap address before returning; the others
        read it from the round store when `bootstrap_store_info` is first asked for.
        """
        self._stop_heartbeats()
        self._log("rendezvous_join_started")
        self._liveness.announce()
        deadline = self._clock() + self._settings.timeout.join
        self._run(ExitOp(), deadline, "exit")
        state = self._executor.run(JoinOp(), deadline, "join", describe=join_wait)
        self._start_heartbeats()
        rank, world_size = state.participants[self._node], len(state.participants)
        store = PrefixStore(f"elastic/rdzv/{self._settings.run_id}/round/{state.round}",
                            self._store)
        bootstrap = (RendezvousStoreInfo.build(0, store, self._local_addr) if rank == 0
                     else None)
        self._log("rendezvous_joined", round=state.round, rank=rank, world_size=world_size)
        members = [str(node) for node in sorted(state.participants, key=state.participants.get)]
        return RendezvousInfo(store, rank, world_size, bootstrap, round=state.round,
                              members=members)

    def is_closed(self) -> bool:
        """Whether the rendezvous is closed (read from the shared state, so another node's close
        counts)."""
        return self._query().closed

    def set_closed(self) -> None:
        """Close the rendezvous: every join from now on raises RendezvousClosedError."""
        self._run(CloseOp(), self._clock() + self._settings.timeout.close, "close")
        self._log("rendezvous_closed")

    def lost_since(self, info: RendezvousInfo) -> Set[int]:
        """The ranks of round `info`'s nodes that are no longer among its participants
        (found dead, or left), read from the shared state now; none once the state has
        gone on to another round."""
        state = self._query()
        if state.round != info.round:
            return set()
        alive = {str(node) for node in state.participants}
        return {rank for rank, member in enumerate(info.members) if member not in alive}

    def num_nodes_waiting(self) -> int:
        """Nodes on the wait list, that would join if the group restarted."""
        return len(self._query().wait_list)

    def leave(self) -> None:
        """Stop heart-beating without closing: the other nodes find this node gone (its
        liveness key goes when its store connection closes; without such keys, its
        heartbeats stop) and re-form without it, as after a crash. For an agent stopped
        by a signal, which must not end the job for every node (torch's launcher skips
        `shutdown` then)."""
        self._stop_heartbeats()
        self._log("rendezvous_left")

    def shutdown(self) -> bool:
        """Stop heart-beating and close the rendezvous; False (logged) if closing failed."""
        self._stop_heartbeats()
        try:
            self.set_closed()
        except RendezvousError as exc:
            self._log("rendezvous_shutdown_failed", error=str(exc))
            return False
        return True

    def wait_for_nodes_to_leave(self, timeout: Optional[Seconds] = None) -> List[NodeDesc]:
        """Wait up to `timeout` seconds (default: the close timeout) until every other
        node of the state has closed its store connection; the nodes still connected then.

        The node that hosts the store calls it after `shutdown`, before closing the
        store: a node that has not yet read the closed state (one on the wait list)
        then reads it, and fails with RendezvousClosedError rather than with a lost
        store. Needs liveness keys (a store with sessions); without them, returns at once.
        """
        timeout = self._settings.timeout.close if timeout is None else timeout
        state = self._query()
        connected = sorted((set(state.participants) | state.wait_list) - {self._node})
        deadline = self._clock() + timeout
        with SlowWait(lambda: f"the rendezvous {self._settings.run_id!r} is closed; keeping "
                              f"its store up until {len(connected)} other node(s) leave "
                              f"(at most {timeout:g} s)") as report:
            while True:
                generation = self._peer_lost.mark()
                connected = self._liveness.still_connected(connected)
                left = deadline - self._clock()
                if not connected or left <= 0:
                    return connected
                report.tick()
                self._peer_lost.wait_since(generation, min(left, report.next_in()))

    # ---- internals ----------------------------------------------------------------

    def _run(self, op: StateHandler, deadline: float, operation: str):
        return self._executor.run(op, deadline, operation)

    def _query(self):
        with self._executor.lock:
            self._holder.sync(fresh=True)
            return self._holder.state

    def _log(self, event: str, **fields) -> None:
        log.info(event, run_id=self._settings.run_id, node=str(self._node),
                 **{**self._holder.state.summary(), **fields})

    def _start_heartbeats(self) -> None:
        self._heartbeat_stop.clear()
        # The thread holds the handler weakly, so that a dropped handler (and the
        # store it may own) goes, and its finalizer stops the thread.
        self._heartbeat_thread = start_thread(
            _keep_alive_loop, name=f"rdzv-keep-alive-{self._node.local_id}",
            owner="store.elastic.handler.DynamicRendezvousHandler",
            purpose="sends the node's rendezvous keep-alives",
            args=(weakref.ref(self), self._heartbeat_stop, self._peer_lost,
                  self._settings.keep_alive_interval))

    def _stop_heartbeats(self) -> None:
        thread = self._heartbeat_thread
        if thread is None:
            return
        self._heartbeat_stop.set()
        self._peer_lost.notify()
        thread.join(_JOIN_THREAD_TIMEOUT)
        self._heartbeat_thread = None

    def keep_alive(self) -> None:
        """One keep-alive: refresh the liveness key (or, where the store has no sessions,
        the heartbeat in the state) and drop the nodes found dead meanwhile."""
        try:
            self._liveness.announce()
            self._run(KeepAliveOp(), self._clock() + self._settings.timeout.heartbeat,
                      "keep_alive")
            log.debug("rendezvous_keep_alive", run_id=self._settings.run_id,
                      node=str(self._node))
        except (RendezvousError, OSError) as exc:
            self._log("rendezvous_keep_alive_failed", error=str(exc))


def _keep_alive_loop(handler_ref: "weakref.ref[DynamicRendezvousHandler]",
                     stop: threading.Event, peer_lost: ChangeSignal, interval: float) -> None:
    """Keep-alive every interval, and at once when a peer's liveness key goes away."""
    while not stop.is_set():
        generation = peer_lost.mark()
        peer_lost.wait_since(generation, interval)
        handler = handler_ref()
        if stop.is_set() or handler is None:
            return
        handler.keep_alive()
        del handler


def _stop_keep_alive(stop: threading.Event, peer_lost: ChangeSignal) -> None:
    stop.set()
    peer_lost.notify()
