"""`CallTable`: the calls a worker waits on, and with the calls it serves, its STATUS.

Entries are tuples put in and taken out of a plain dict, each one atomic under the
GIL, so the call path takes no lock; functions are kept as objects, threads as
idents, and both are named only when a STATUS is asked for. A call sent through the
I/O thread waits in the actor's own table of requests in flight
(`Actor.requests_in_flight`), so only calls that wait on their caller's own
connection are put here. The calls being served are the actor's requests not
answered yet (`Actor.requests_being_served`). The flight recorder has each call
already, as the request and the reply that carry it.
"""
from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional

from actors.runtime.introspection.recorder import describe_callable, enabled
from actors.runtime.io.peers import Pending
from actors.runtime.protocol import Kind, kind_name
from actors.runtime.protocol.envelope import Message

CALLS = (Kind.RPC_CALL, Kind.RPC_REMOTE)  # requests whose payload starts (fn, args, kwargs, caller)


class CallTable:
    """The calls one worker waits on (to callees on the caller's own connection); it
    stays empty when introspection is off (``ACTORGRAD_INTROSPECTION=0``), where
    every token is 0."""

    def __init__(self) -> None:
        self._tokens = itertools.count(1)
        # token -> (callee name, fn or kind, thread ident, start, timeout in seconds or None)
        self.waiting: Dict[int, tuple] = {}
        if not enabled():
            self.wait_started = self.wait_ended = _no_token  # type: ignore[method-assign]

    def wait_started(self, callee: str, what: Any, timeout: Optional[float]) -> int:
        token = next(self._tokens)
        self.waiting[token] = (callee, what, threading.get_ident(), time.monotonic(), timeout)
        return token

    def wait_ended(self, token: int) -> None:
        self.waiting.pop(token, None)

    def status(self, sent: Iterable[Pending] = (),
               callee_of: Callable[[str], Optional[str]] = lambda address: None,
               served: Iterable[Message] = (),
               caller_of: Callable[[int], Optional[str]] = lambda rank: None
               ) -> Dict[str, List[Dict[str, Any]]]:
        """``{"serving": [...], "waiting": [...]}``, each with its age in seconds; `sent`
        adds the requests in flight through the I/O thread that name what they call,
        their callee named by `callee_of` (peer address -> worker name); `served` are
        the requests being served, the calls among them go to "serving", their caller
        named by `caller_of` (rank -> worker name)."""
        now = time.monotonic()
        names = {thread.ident: thread.name for thread in threading.enumerate()}
        serving = [{"caller": caller_of(msg.payload[3]), "function": describe_callable(
                    msg.payload[0]), "thread": msg.thread, "thread_name": names.get(msg.thread),
                    "age_s": round(now - msg.received, 3)}
                   for msg in served if msg.kind in CALLS and msg.received is not None]
        waiting = list(self.waiting.values()) + [
            (callee_of(p.peer) or p.peer, p.what, p.thread, p.started, p.timeout)
            for p in sent if p.what is not None]
        return {"serving": serving, "waiting": [
            {"peer": peer, "function": _what(what), "thread": ident,
             "age_s": round(now - start, 3),
             "deadline_in_s": None if not timeout else round(start + timeout - now, 3)}
            for peer, what, ident, start, timeout in waiting]}


def _no_token(*_args: Any) -> int:
    return 0


def _what(what: Any) -> Any:
    return kind_name(what) if isinstance(what, int) else describe_callable(what)
