"""Telling the runtime that this thread is about to block.

A worker that read a request itself (`LeaderPool`) runs it while still the only
reader of its actor's mailbox, because handing the mailbox to another thread costs
a thread wake-up on every request. Before it blocks, on a nested call or a future,
it must hand the mailbox on: the request it waits for may be one only this actor
can read. The runtime's blocking waits call `about_to_block` for that.
"""
from __future__ import annotations

import threading
from typing import Callable, Optional

class _Reader(threading.local):
    """Whether this thread reads a mailbox: `hand_off` passes it on (None: it does not;
    a class attribute, so that a thread that never read one looks it up cheaply), and
    the actor whose I/O loop it runs, if any (`io_loop`)."""

    hand_off: Optional[Callable[[], None]] = None
    io_loop: Optional[str] = None


_state = _Reader()


def about_to_block() -> None:
    """Hand the mailbox on if this thread holds it; cheap when it does not."""
    hand_off = _state.hand_off
    if hand_off is not None:
        _state.hand_off = None
        hand_off()


def holding_mailbox(hand_off: Optional[Callable[[], None]]) -> None:
    """Mark this thread as the mailbox's reader (`hand_off` passes it on), or clear it."""
    _state.hand_off = hand_off


def running_io_loop(actor: str) -> None:
    """Mark this thread as the I/O thread of `actor`, which must never wait: the replies
    and timeouts that would end a wait come through it."""
    _state.io_loop = actor


def refuse_waiting_on_io_loop() -> None:
    """RuntimeError on an actor's I/O thread, where a wait for a pending future (from a
    completion callback, which runs there) would never end; elsewhere nothing."""
    actor = _state.io_loop
    if actor is not None:
        raise RuntimeError(
            f"a wait for a pending future on the I/O thread of actor {actor!r}, where "
            f"completion callbacks run, would never end: the reply it waits for comes "
            f"through this thread; chain the work with then() instead of waiting")
