"""`calls_status`: the calls a worker waits on and the calls it serves, for its STATUS.

Nothing here is kept per call: each part is read from the table that has it anyway. A
call sent through the I/O thread waits in the actor's table of requests in flight
(`Actor.requests_in_flight`), a call that waits on its caller's own connection in
that connection (`Channel.calls_waiting`), and the calls being served are the actor's
requests not answered yet (`Actor.requests_being_served`); all three are empty when
introspection is off. Functions are kept as objects and threads as idents, named
only here, when a STATUS is asked for. The flight recorder has each call already, as
the request and the reply that carry it.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from actors.runtime.introspection.recorder import RECORDING, describe_callable
from actors.runtime.io.peers import Pending
from actors.runtime.protocol import Kind, kind_name
from actors.runtime.protocol.envelope import Message

CALLS = (Kind.RPC_CALL, Kind.RPC_REMOTE)  # requests whose payload starts (fn, args, kwargs, caller)

# (peer address, what it calls, thread ident, monotonic start, timeout in seconds or None)
Waiting = Tuple[str, Any, int, float, Optional[float]]


def calls_status(sent: Iterable[Pending] = (), waited: Iterable[Waiting] = (),
                 served: Iterable[Message] = (),
                 callee_of: Callable[[str], Optional[str]] = lambda address: None,
                 caller_of: Callable[[int], Optional[str]] = lambda rank: None
                 ) -> Dict[str, List[Dict[str, Any]]]:
    """``{"serving": [...], "waiting": [...]}``, each with its age in seconds.

    "waiting": the requests in flight through the I/O thread that name what they
    call (`sent`) and the calls waiting on their callers' own connections (`waited`),
    their callee named by `callee_of` (peer address -> worker name). "serving": the
    calls among the requests being served (`served`), their caller named by
    `caller_of` (rank -> worker name).
    """
    now = time.monotonic()
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    serving = [{"caller": caller_of(msg.payload[3]), "function": describe_callable(
                msg.payload[0]), "thread": msg.thread, "thread_name": names.get(msg.thread),
                "age_s": round(now - msg.received, 3)}
               for msg in served if msg.kind in CALLS and msg.received is not None]
    # The table of requests in flight is kept for their replies, introspection on or off:
    # off, a part of the calls alone would read as if the others were not there.
    waiting = list(waited) + [(p.peer, p.what, p.thread, p.started, p.timeout)
                              for p in sent if p.what is not None and RECORDING]
    return {"serving": serving, "waiting": [
        {"peer": callee_of(peer) or peer, "function": called_name(what), "thread": ident,
         "age_s": round(now - start, 3),
         "deadline_in_s": None if not timeout else round(start + timeout - now, 3)}
        for peer, what, ident, start, timeout in waiting]}


def called_name(what: Any) -> Any:
    """What a request calls, by name: a function's `module.qualname`, else its kind."""
    return kind_name(what) if isinstance(what, int) else describe_callable(what)
