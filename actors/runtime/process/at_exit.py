"""Delivering, at a normal interpreter exit, the messages this process's code already sent.

A message handed to an actor leaves through its I/O thread and then libzmq's; a
process that returns from its script right after sending can end before either has
written it out. At exit, every running actor asks each peer it sent to since start
for an answer (`ActorCore.confirm_delivery`): a peer answers a request only after
every earlier message on the same connection, so the answer proves them delivered.
Buffers lent through shared memory are then waited for, with a bound of their own,
until their readers have copied them (`shared_buffers`): unlike frames already in a
peer's socket, that memory goes when the process does.
The wait is bounded by `EXIT_FLUSH_TIMEOUT`; what stays unconfirmed is logged, by
peer, with the count of messages it may lack.

Handlers registered with `on_exit` (a process group saying it leaves) run first;
those registered with `after_deliveries` (writing the flight-recorder files that the
steps before may still ask for) run last, with a bound of their own. A forked child
keeps the latter, which hold nothing of its parent, and drops the former.
"""
from __future__ import annotations

import atexit
import multiprocessing.util
import os
import threading
import time
import weakref
from typing import Any, Callable, List

from ..concurrency.futures import failures_by
from ..errors import RequestTimeoutError
from ..protocol import shared_buffers
from .log import get_logger

log = get_logger(__name__)

# The longest a normal exit waits for its messages to be confirmed (seconds).
EXIT_FLUSH_TIMEOUT = 2.0

_lock = threading.Lock()
_actors: "weakref.WeakSet[Any]" = weakref.WeakSet()
_handlers: List[Callable[[float], None]] = []
_last_handlers: List[Callable[[float], None]] = []
_registered = False
_flushed = False


def track(actor: Any) -> None:
    """Confirm `actor`'s deliveries at exit while it runs (a weak reference)."""
    with _lock:
        _actors.add(actor)
        _register()


def on_exit(handler: Callable[[float], None]) -> None:
    """Run ``handler(deadline)`` at exit, before deliveries are confirmed; once per handler."""
    with _lock:
        if handler not in _handlers:
            _handlers.append(handler)
        _register()


def after_deliveries(handler: Callable[[float], None]) -> None:
    """Run ``handler(deadline)`` at exit after deliveries are confirmed, with a deadline
    of its own; once per handler, and in forked children too."""
    with _lock:
        if handler not in _last_handlers:
            _last_handlers.append(handler)
        _register()


def _register() -> None:
    global _registered
    if not _registered:
        _registered = True
        # pyzmq's garbage collector holds the memory of frames sent zero-copy until
        # libzmq has written them, and its exit handler stops it and lets that memory
        # go: it must run after ours (atexit runs the last registered first), which it
        # does once the module that registers it at import is imported before.
        import zmq.utils.garbage  # noqa: F401

        # A multiprocessing child ends with os._exit after its own exit finalizers,
        # without running atexit's: both lead here, and the first one flushes.
        atexit.register(flush_all)
        multiprocessing.util.Finalize(None, flush_all, exitpriority=10)


def flush_all(timeout: float = EXIT_FLUSH_TIMEOUT) -> None:
    """Run the exit handlers, then confirm every running actor's deliveries, within `timeout`.

    Once per process: later calls return at once.
    """
    global _flushed
    with _lock:
        if _flushed:
            return
        _flushed = True
    deadline = time.monotonic() + timeout
    _run(_handlers, deadline)
    with _lock:
        actors = list(_actors)
    confirm_deliveries(actors, deadline, "exit")
    # A peer that has not read its mailbox yet has the frames, but not the memory of
    # blocks this process lends: they go with it. So they get a bound of their own.
    unread = shared_buffers.BLOCKS.drain(time.monotonic() + timeout)
    if unread:
        log.warning("shared_buffers_unread_at_exit", blocks=unread)
    _run(_last_handlers, time.monotonic() + timeout)


def _run(handlers: List[Callable[[float], None]], deadline: float) -> None:
    for handler in list(handlers):
        try:
            handler(deadline)
        except Exception:  # noqa: BLE001 - one failing handler must not keep others' messages
            log.exception("exit_handler_failed", handler=getattr(handler, "__qualname__", ""))


def confirm_deliveries(actors: List[Any], deadline: float, moment: str) -> None:
    """Wait until `deadline` (monotonic) for the peers of `actors` to confirm the
    messages sent to them; log at warning, by peer, what stays unconfirmed.

    `moment` names the occasion in the log lines ("exit", "stop").
    """
    answers, counts = {}, {}
    # Those that wait for their own deliveries (attached sockets: `blocks_to_confirm`)
    # come after those that only send pings, whose pings then go out first.
    for actor in sorted(actors, key=lambda owner: getattr(owner, "blocks_to_confirm", False)):
        try:
            for peer, (count, answer) in actor.confirm_delivery(deadline).items():
                answers[actor, peer], counts[actor, peer] = answer, count
        except RequestTimeoutError:
            log.warning("delivery_check_skipped", actor=actor.name, moment=moment,
                        reason="its I/O thread did not answer")
        except Exception:  # noqa: BLE001 - the other actors' messages still count
            log.exception("delivery_check_failed", actor=actor.name, moment=moment)
    # Every ping is out before any is waited for: one silent peer costs the deadline once.
    for actor, peer in failures_by(answers, deadline):
        log.warning(f"messages_maybe_undelivered_at_{moment}", actor=actor.name, peer=peer,
                    messages=counts[actor, peer])


def _forget_the_parent() -> None:
    """A forked child runs none of its parent's actors, and of its exit handlers only
    those after deliveries."""
    global _lock, _actors, _registered, _flushed
    _lock = threading.Lock()
    _actors = weakref.WeakSet()
    _handlers.clear()
    # multiprocessing clears its exit finalizers in a forked child: register anew.
    _registered = _flushed = False


os.register_at_fork(after_in_child=_forget_the_parent)
