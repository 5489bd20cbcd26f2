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
    a class attribute, so that a thread that never read one looks it up cheaply)."""

    hand_off: Optional[Callable[[], None]] = None


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
