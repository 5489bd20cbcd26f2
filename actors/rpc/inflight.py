"""`CallTable`: the calls a worker is serving and the calls it waits on, for STATUS.

Entries are tuples put in and taken out of plain dicts, each one atomic under the
GIL, so the call path takes no lock; functions are kept as objects and named only
when a STATUS is asked for.
"""
from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Dict, List, Optional

from actors.runtime import Kind
from actors.runtime.introspection.recorder import (SERVE_END, SERVE_START, TRAFFIC,
                                                   describe_callable)
from actors.runtime.protocol import kind_name


class CallTable:
    """Calls in flight on one worker: `serving` (from callers) and `waiting` (to callees)."""

    def __init__(self) -> None:
        self._tokens = itertools.count(1)
        # token -> (caller name, fn, thread ident, thread name, start)
        self.serving: Dict[int, tuple] = {}
        # token -> (callee name, fn or kind, thread ident, start, timeout in seconds or None)
        self.waiting: Dict[int, tuple] = {}

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

    def wait_started(self, callee: str, what: Any, timeout: Optional[float]) -> int:
        token = next(self._tokens)
        self.waiting[token] = (callee, what, threading.get_ident(), time.monotonic(), timeout)
        return token

    def wait_ended(self, token: int) -> None:
        self.waiting.pop(token, None)

    def status(self) -> Dict[str, List[Dict[str, Any]]]:
        """``{"serving": [...], "waiting": [...]}``, each with its age in seconds."""
        now = time.monotonic()
        serving = [{"caller": caller, "function": describe_callable(fn), "thread": ident,
                    "thread_name": name, "age_s": round(now - start, 3)}
                   for caller, fn, ident, name, start in list(self.serving.values())]
        waiting = [{"peer": peer, "function": _what(what), "thread": ident,
                    "age_s": round(now - start, 3),
                    "deadline_in_s": None if not timeout else round(start + timeout - now, 3)}
                   for peer, what, ident, start, timeout in list(self.waiting.values())]
        return {"serving": serving, "waiting": waiting}


def _what(what: Any) -> Any:
    return kind_name(what) if isinstance(what, int) else describe_callable(what)
