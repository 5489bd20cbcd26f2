"""`CallTable`: the calls a worker is serving and the calls it waits on, for STATUS.

Entries are tuples put in and taken out of plain dicts, each one atomic under the
GIL, so the call path takes no lock; functions are kept as objects and named only
when a STATUS is asked for. An asynchronous call's entry keeps its reply's future
and is dropped once that is done, so nothing runs on the I/O thread when the reply
comes.
"""
from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Dict, List, Optional

from actors.runtime import Future, Kind
from actors.runtime.introspection.recorder import (SERVE_END, SERVE_START, TRAFFIC,
                                                   describe_callable)
from actors.runtime.protocol import kind_name

# Entries an asynchronous caller may leave behind before the table is swept.
_SWEEP_SLACK = 256


class CallTable:
    """Calls in flight on one worker: `serving` (from callers) and `waiting` (to callees)."""

    def __init__(self) -> None:
        self._tokens = itertools.count(1)
        # token -> (caller name, fn, thread ident, thread name, start)
        self.serving: Dict[int, tuple] = {}
        # token -> (callee name, fn or kind, thread ident, start, timeout in seconds or
        # None, its reply's future or None)
        self.waiting: Dict[int, tuple] = {}
        self._sweep_at = _SWEEP_SLACK

    def serve_started(self, caller: str, fn: Any) -> int:
        token = next(self._tokens)
        thread = threading.current_thread()
        self.serving[token] = (caller, fn, thread.ident, thread.name, time.monotonic())
        TRAFFIC.note(SERVE_START, caller, Kind.RPC_CALL, token, 0, fn)
        return token

    def serve_ended(self, token: int) -> None:
        entry = self.serving.pop(token, None)
        if entry is not None:
            TRAFFIC.note(SERVE_END, entry[0], Kind.RPC_CALL, token, 0, entry[1])

    def wait_started(self, callee: str, what: Any, timeout: Optional[float],
                     reply: Optional[Future] = None) -> int:
        """Note a call awaited from now on; with its `reply`, no `wait_ended` is needed:
        an entry whose reply came is dropped when the table is next swept or read."""
        token = next(self._tokens)
        waiting = self.waiting
        waiting[token] = (callee, what, threading.get_ident(), time.monotonic(), timeout, reply)
        if reply is not None and len(waiting) > self._sweep_at:
            self._sweep()
        return token

    def wait_ended(self, token: int) -> None:
        self.waiting.pop(token, None)

    def _sweep(self) -> None:
        """Drop the entries whose reply came; the next sweep waits for the table to
        double, so sweeping costs a constant per call."""
        for token, entry in list(self.waiting.items()):
            if entry[5] is not None and entry[5].done():
                self.waiting.pop(token, None)
        self._sweep_at = 2 * len(self.waiting) + _SWEEP_SLACK

    def status(self) -> Dict[str, List[Dict[str, Any]]]:
        """``{"serving": [...], "waiting": [...]}``, each with its age in seconds."""
        now = time.monotonic()
        serving = [{"caller": caller, "function": describe_callable(fn), "thread": ident,
                    "thread_name": name, "age_s": round(now - start, 3)}
                   for caller, fn, ident, name, start in list(self.serving.values())]
        waiting = [{"peer": peer, "function": _what(what), "thread": ident,
                    "age_s": round(now - start, 3),
                    "deadline_in_s": None if not timeout else round(start + timeout - now, 3)}
                   for peer, what, ident, start, timeout, reply in list(self.waiting.values())
                   if reply is None or not reply.done()]
        return {"serving": serving, "waiting": waiting}


def _what(what: Any) -> Any:
    return kind_name(what) if isinstance(what, int) else describe_callable(what)
