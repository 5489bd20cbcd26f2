"""The rendezvous operators: pure decisions from (state, settings, time) to one Action.

Each operator is torch's: it reads a `RendezvousContext` and an operation deadline
and returns the next `Action`; it does no I/O and reads no clock (the executor puts
the current times in the context), so tests decide any case instantly.
"""
from __future__ import annotations

import enum
from typing import NamedTuple

from store.elastic.settings import NodeDesc, RendezvousSettings
from store.elastic.state import RendezvousState

# After its deadline, a join still gets this long to take itself out of the state.
ROLLBACK_PERIOD = 5.0


class Action(enum.Enum):
    KEEP_ALIVE = 1
    ADD_TO_PARTICIPANTS = 2
    ADD_TO_WAIT_LIST = 3
    REMOVE_FROM_PARTICIPANTS = 4
    REMOVE_FROM_WAIT_LIST = 5
    MARK_RENDEZVOUS_COMPLETE = 6
    MARK_RENDEZVOUS_CLOSED = 7
    SYNC = 8
    ERROR_CLOSED = 9
    ERROR_TIMEOUT = 10
    FINISH = 11


class RendezvousContext(NamedTuple):
    """What an operator sees: this node, the synced state, the settings and the time.

    `now` is monotonic seconds (compared with operation deadlines); `wall_now` is
    wall-clock seconds (compared with the times stored in the state).
    """

    node: NodeDesc
    state: RendezvousState
    settings: RendezvousSettings
    now: float
    wall_now: float


def should_keep_alive(ctx: RendezvousContext) -> bool:
    """True when this node is in the state and its last keep-alive is one interval old."""
    beat = ctx.state.last_heartbeats.get(ctx.node)
    return beat is not None and beat <= ctx.wall_now - ctx.settings.keep_alive_interval


class KeepAliveOp:
    """Refresh this node's heartbeat if it is due."""

    def __call__(self, ctx: RendezvousContext, deadline: float) -> Action:
        if should_keep_alive(ctx):
            return Action.ERROR_TIMEOUT if ctx.now > deadline else Action.KEEP_ALIVE
        return Action.FINISH


class CloseOp:
    """Mark the rendezvous closed."""

    def __call__(self, ctx: RendezvousContext, deadline: float) -> Action:
        if ctx.state.closed:
            return Action.FINISH
        if ctx.now > deadline:
            return Action.ERROR_TIMEOUT
        return Action.MARK_RENDEZVOUS_CLOSED


class ExitOp:
    """Leave the participants (before joining the next round)."""

    def __call__(self, ctx: RendezvousContext, deadline: float) -> Action:
        if ctx.node in ctx.state.participants:
            return Action.ERROR_TIMEOUT if ctx.now > deadline else \
                Action.REMOVE_FROM_PARTICIPANTS
        return Action.FINISH


class JoinOp:
    """Join the current round, or wait for the next one, until the round completes."""

    def __call__(self, ctx: RendezvousContext, deadline: float) -> Action:
        state, settings = ctx.state, ctx.settings
        is_participant = ctx.node in state.participants
        if state.complete and is_participant:
            # Our round completed before anyone closed the rendezvous: it stands.
            return Action.FINISH
        if state.closed:
            return Action.ERROR_CLOSED
        if ctx.now > deadline:
            # A short grace after the deadline to take ourselves out; if we cannot,
            # our keep-alive expiring will do it.
            if ctx.now <= deadline + ROLLBACK_PERIOD:
                if is_participant:
                    return Action.REMOVE_FROM_PARTICIPANTS
                if ctx.node in state.wait_list:
                    return Action.REMOVE_FROM_WAIT_LIST
            return Action.ERROR_TIMEOUT
        if state.complete:
            # Not part of this round: wait for the next one if there is room.
            if len(state.participants) < settings.max_nodes and ctx.node not in state.wait_list:
                return Action.ADD_TO_WAIT_LIST
        elif is_participant:
            if (len(state.participants) >= settings.min_nodes and state.deadline is not None
                    and state.deadline < ctx.wall_now):
                return Action.MARK_RENDEZVOUS_COMPLETE
        else:
            return Action.ADD_TO_PARTICIPANTS
        if should_keep_alive(ctx):
            return Action.KEEP_ALIVE
        return Action.SYNC
