"""What a node waiting to join a rendezvous waits for, decided from the state alone.

`join_wait(ctx, deadline)` reads an operator's context into a `JoinWait` (plain data);
its `str` is the text a long join logs, e.g.
``rendezvous 'job' round 0: 1 of 2 nodes joined, waiting (min 2)``. The launcher turns
the same data into its own words. No I/O, no clock: the context carries the times.
"""
from __future__ import annotations

import time
from typing import NamedTuple, Optional

from store.elastic.operators import RendezvousContext


class JoinWait(NamedTuple):
    """One moment of a join: the round, who joined, and what would end the wait."""

    run_id: str
    round: int
    joined: int
    min_nodes: int
    max_nodes: int
    complete: bool  # the round is complete without this node: it waits for the next
    waiting: int  # nodes on the wait list, this one included when it is there
    on_wait_list: bool
    last_call_ends: Optional[float]  # wall-clock seconds; None until min_nodes joined
    last_call_left: Optional[float]  # seconds until then
    join_left: float  # seconds until this join gives up

    def __str__(self) -> str:
        return join_wait_text(self)


def join_wait(ctx: RendezvousContext, deadline: float) -> JoinWait:
    """The wait of this node's join, from the synced state and the join's `deadline`
    (monotonic, as the operators take it)."""
    state, settings = ctx.state, ctx.settings
    ends = state.deadline if not state.complete else None
    return JoinWait(settings.run_id, state.round, len(state.participants), settings.min_nodes,
                    settings.max_nodes, state.complete, len(state.wait_list),
                    ctx.node in state.wait_list, ends,
                    None if ends is None else max(0.0, ends - ctx.wall_now),
                    max(0.0, deadline - ctx.now))


def clock_time(wall: float) -> str:
    """`wall` (epoch seconds) as ``HH:MM:SS UTC``, for a person."""
    return time.strftime("%H:%M:%S UTC", time.gmtime(wall))


def join_wait_text(wait: JoinWait) -> str:
    """The log text of a long join (see the module's docstring)."""
    head = f"rendezvous {wait.run_id!r} round {wait.round}"
    tail = f"; the join gives up in {wait.join_left:.0f} s"
    if wait.complete and wait.on_wait_list:
        return (f"{head} runs with {wait.joined} nodes; waiting for the next round "
                f"({wait.waiting} on the wait list){tail}")
    if wait.complete:
        return (f"{head} is full ({wait.joined} of {wait.max_nodes} nodes); waiting for "
                f"a place in a later round{tail}")
    if wait.last_call_ends is not None:
        return (f"{head}: {wait.joined} of {wait.max_nodes} nodes joined (min "
                f"{wait.min_nodes}), waiting for more until {clock_time(wait.last_call_ends)}"
                f" (last call, {wait.last_call_left:.0f} s left)")
    return (f"{head}: {wait.joined} of {wait.max_nodes} nodes joined, waiting "
            f"(min {wait.min_nodes}){tail}")
