"""The effects: sync the shared state through the backend, then apply the operators' actions.

`StateHolder.sync()` writes our changes with compare-and-set (or reads the latest
state), then drops dead nodes: those whose keep-alive is older than the window and
those whose liveness key is gone. A removal is written back at once, so every node
sees it. `OpExecutor.run(op, deadline)` is torch's loop (sync, decide, apply, mark
dirty) except for SYNC: instead of sleeping a second, it waits until the state or a
liveness key changes, or until the next moment a time-based decision can change.
"""
from __future__ import annotations

import contextlib
import random
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from actors.runtime.process.log import get_logger
from actors.runtime.process.waits import SlowWait
from store.elastic.backend import RendezvousBackend
from store.elastic.errors import RendezvousClosedError, RendezvousTimeoutError
from store.elastic.liveness import NodeLiveness
from store.elastic.operators import Action, RendezvousContext
from store.elastic.settings import NodeDesc, RendezvousSettings
from store.elastic.state import (RendezvousState, dead_nodes, decode_state, encode_state,
                                 last_beats, remove_nodes, remove_participant_epilogue)

log = get_logger(__name__)

Clock = Callable[[], float]
# How often to look at the state when the backend cannot say it changed (torch's poll).
POLL_INTERVAL = 1.0
# Back-off step after a lost compare-and-set race (seconds, times the races in a row).
RACE_BACKOFF = 0.0005
# Bound on compare-and-set rounds spent writing back a removal of dead nodes.
_MAX_REPAIR_ROUNDS = 16


class ChangeSignal:
    """A generation counter many threads can wait on without missing a change."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generation = 0

    def mark(self) -> int:
        with self._cond:
            return self._generation

    def notify(self) -> None:
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def wait_since(self, generation: int, timeout: float) -> bool:
        """Wait until a change after `mark()` returned `generation`; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._generation != generation, timeout)


class StateHolder:
    """This node's copy of the shared state and the token it was read at."""

    def __init__(self, backend: RendezvousBackend, settings: RendezvousSettings,
                 liveness: Optional[NodeLiveness], wall_clock: Clock):
        self._backend = backend
        self._settings = settings
        self._liveness = liveness
        self._wall = wall_clock
        self.state = RendezvousState()
        self._token = None
        self._dirty = False
        self._pushed: Optional[tuple] = None  # the newest (state, token) the backend pushed
        self._pushed_lock = threading.Lock()

    def offer(self, pair: Optional[tuple]) -> None:
        """A state the backend pushed: the next read uses it instead of asking again.

        Pushes arrive in the order of the writes, so it is at worst older than a
        reply we already had; a decision made on it is then refused by the
        compare-and-set, which hands us the current state.
        """
        with self._pushed_lock:
            self._pushed = pair

    def mark_dirty(self) -> None:
        self._dirty = True

    def sync(self, fresh: bool = False) -> Optional[bool]:
        """Write our change (if any) or read; then remove dead nodes. True if ours was written.

        A read takes a newer pushed state when one came; `fresh` asks the backend always.
        """
        has_set = self._exchange(fresh)
        for _ in range(_MAX_REPAIR_ROUNDS):
            dead = self._dead()
            if not dead:
                break
            remove_nodes(self.state, self._settings, dead)
            # Once the job ended (closed), nodes that go quiet are leaving, not lost.
            (log.info if self.state.closed else log.warning)(
                "rendezvous_nodes_removed", run_id=self._settings.run_id,
                nodes=[str(n) for n in dead], **self.state.summary())
            self._dirty = True
            self._exchange()
        return has_set

    def _exchange(self, fresh: bool = False) -> Optional[bool]:
        if self._dirty:
            self._dirty = False
            self.state.version += 1
            result = self._backend.set_state(encode_state(self.state), self._token)
            if result is None:
                self.state, self._token = RendezvousState(), None
                return False
            self.state, self._token = decode_state(result[0]), result[1]
            return result[2]
        with self._pushed_lock:
            pushed, self._pushed = self._pushed, None
        if pushed is not None and not fresh:
            state = decode_state(pushed[0])
            if state.version > self.state.version:
                self.state, self._token = state, pushed[1]
                return None
            if state.version == self.state.version and self._token is not None:
                return None  # the push of the state we hold
            # An older push (pushes can lag behind replies): ask for the current state.
        pair = self._backend.get_state()
        if pair is None:
            self.state, self._token = RendezvousState(), None
        else:
            self.state, self._token = decode_state(pair[0]), pair[1]
        return None

    @property
    def beats_in_keys(self) -> bool:
        """Whether keep-alives go to this node's liveness key instead of the state."""
        return self._liveness is not None and self._liveness.supported

    def announce(self) -> None:
        """A keep-alive of this node through its liveness key (see `beats_in_keys`)."""
        self._liveness.announce()

    def heard(self) -> Dict[NodeDesc, float]:
        """Keep-alives heard through the liveness keys since the state's heartbeats.

        They decide who is dead and never enter the shared state: only a node's own
        writes move its heartbeat there, so a node that stopped heart-beating cannot
        be kept alive by what others heard of it.
        """
        return self._liveness.last_heard() if self.beats_in_keys else {}

    def _dead(self) -> list:
        state = self.state
        if not self.beats_in_keys:
            return dead_nodes(state, self._settings, self._wall())
        now = self._wall()
        lost = self._liveness.observe(state.last_heartbeats, now, self._settings.dead_after)
        # This node's own keep-alives are its heartbeat, as its state writes would be.
        own, heard = self._liveness.node, self.heard()
        if own in state.last_heartbeats and own in heard:
            state.last_heartbeats[own] = max(state.last_heartbeats[own], heard[own])
        return dead_nodes(state, self._settings, now, lost, heard)


StateHandler = Callable[[RendezvousContext, float], Action]
Describe = Callable[[RendezvousContext, float], Any]
_ROUTINE = frozenset({Action.SYNC, Action.KEEP_ALIVE, Action.FINISH})


class OpExecutor:
    """Runs an operator to completion against the shared state (torch's distributed executor)."""

    def __init__(self, node: NodeDesc, holder: StateHolder, settings: RendezvousSettings,
                 changed: ChangeSignal, pushes_changes: bool, clock: Clock, wall_clock: Clock):
        self._node = node
        self._holder = holder
        self._settings = settings
        self._changed = changed
        self._poll = settings.keep_alive_interval if pushes_changes else POLL_INTERVAL
        self._clock = clock
        self._wall = wall_clock
        self._lock = threading.RLock()
        self._apply: Dict[Action, Callable[[RendezvousState], None]] = {
            Action.KEEP_ALIVE: self._keep_alive,
            Action.ADD_TO_PARTICIPANTS: self._add_to_participants,
            Action.ADD_TO_WAIT_LIST: self._add_to_wait_list,
            Action.REMOVE_FROM_PARTICIPANTS: self._remove_from_participants,
            Action.REMOVE_FROM_WAIT_LIST: self._remove_from_wait_list,
            Action.MARK_RENDEZVOUS_COMPLETE: self._mark_complete,
            Action.MARK_RENDEZVOUS_CLOSED: self._mark_closed,
        }

    @property
    def lock(self) -> threading.RLock:
        """Held while an operation or a query uses the state holder."""
        return self._lock

    def run(self, op: StateHandler, deadline: float, operation: str,
            describe: Optional[Describe] = None) -> RendezvousState:
        """Sync, decide and apply until `op` says FINISH; the closed or timeout error otherwise.

        With `describe`, a long wait reports `describe(context, deadline)` of the latest
        sync (a `SlowWait`): the executor then also wakes when a report is due.
        """
        latest: List[RendezvousContext] = []
        report = SlowWait(lambda: describe(latest[-1], deadline)) if describe else None
        with report or contextlib.nullcontext():
            return self._run(op, deadline, operation, report, latest)

    def _run(self, op: StateHandler, deadline: float, operation: str,
             report: Optional[SlowWait], latest: List[RendezvousContext]) -> RendezvousState:
        settings = self._settings
        races_lost = 0
        while True:
            if races_lost:
                # Jittered back-off after a lost compare-and-set, so that many nodes
                # writing at once do not all retry in lockstep.
                time.sleep(random.uniform(0, RACE_BACKOFF * min(races_lost, 8)))
            with self._lock:
                generation = self._changed.mark()
                has_set = self._holder.sync()
                races_lost = races_lost + 1 if has_set is False else 0
                state = self._holder.state
                ctx = RendezvousContext(self._node, state, settings, self._clock(), self._wall())
                action = op(ctx, deadline)
                # State-changing decisions at info, the routine ones at debug.
                (log.debug if action in _ROUTINE else log.info)(
                    "rendezvous_action", run_id=settings.run_id, node=str(self._node),
                    operation=operation, action=action.name, **state.summary())
                if action is Action.FINISH:
                    return state
                if action is Action.ERROR_CLOSED:
                    raise RendezvousClosedError(
                        f"rendezvous {settings.run_id!r} is closed; {operation} refused")
                if action is Action.ERROR_TIMEOUT:
                    raise RendezvousTimeoutError(
                        f"rendezvous {settings.run_id!r}: {operation} of node {self._node} "
                        f"timed out ({state.summary()})")
                if action is Action.KEEP_ALIVE and self._holder.beats_in_keys:
                    self._holder.announce()
                    continue
                if action is not Action.SYNC:
                    self._apply[action](state)
                    self._holder.mark_dirty()
                    continue
                wait = self._sync_wait(ctx, deadline)
                if report is not None:
                    latest[:] = [ctx]
                    report.tick()
                    wait = min(wait, report.next_in())
            self._changed.wait_since(generation, wait)

    def _sync_wait(self, ctx: RendezvousContext, deadline: float) -> float:
        """Seconds until a time-based decision may change, capped by the poll interval."""
        state, settings = ctx.state, self._settings
        moments = [deadline - ctx.now + 0.001, self._poll]
        wall_moments = []
        if state.deadline is not None:
            wall_moments.append(state.deadline)
        own_beat = state.last_heartbeats.get(self._node)
        if own_beat is not None:
            wall_moments.append(own_beat + settings.keep_alive_interval)
        beats = last_beats(state, self._holder.heard())
        if beats:
            wall_moments.append(min(beats.values()) + settings.dead_after)
        moments += [m - ctx.wall_now + 0.001 for m in wall_moments]
        return max(0.001, min(moments))

    # ---- the actions' effects on the local copy (torch's business functions) --------

    def _keep_alive(self, state: RendezvousState) -> None:
        state.last_heartbeats[self._node] = self._wall()

    def _add_to_participants(self, state: RendezvousState) -> None:
        state.wait_list.discard(self._node)
        state.participants[self._node] = 0  # ranks are given when the round completes
        self._keep_alive(state)
        if len(state.participants) == self._settings.min_nodes:
            state.deadline = self._wall() + self._settings.timeout.last_call
        if len(state.participants) == self._settings.max_nodes:
            self._mark_complete(state)

    def _add_to_wait_list(self, state: RendezvousState) -> None:
        state.wait_list.add(self._node)
        self._keep_alive(state)

    def _remove_from_participants(self, state: RendezvousState) -> None:
        del state.participants[self._node]
        state.last_heartbeats.pop(self._node, None)
        remove_participant_epilogue(state, self._settings)

    def _remove_from_wait_list(self, state: RendezvousState) -> None:
        state.wait_list.discard(self._node)
        state.last_heartbeats.pop(self._node, None)

    def _mark_complete(self, state: RendezvousState) -> None:
        state.complete = True
        state.deadline = None
        for rank, node in enumerate(sorted(state.participants)):
            state.participants[node] = rank

    def _mark_closed(self, state: RendezvousState) -> None:
        state.closed = True
