"""`Actor`: a mailbox plus message handlers, pending requests and a worker pool.

Requests arriving at the actor's `Router` are decoded and dispatched by kind to a
handler, either inline (for handlers that never block, like store operations) or on
the worker pool. Who reads the router is decided once, when the actor is built: the
mailbox's I/O thread, or with ``workers_receive`` the pool's own threads
(`LeaderPool`), so that a request runs on the thread that read it.

A handler's return value is the reply; a returned `Future` is replied when it
completes; an exception becomes an error reply. Malformed or foreign input is
logged and answered with an error, and the actor keeps serving.

**Lifecycle** (`ActorCore`): *setup* in the constructor (bind the router, build the
mailbox and the pool), *running* from `start()`, *teardown* when the mailbox loop has
closed its sockets (`_teardown`, on the I/O thread): the router is closed and every
pending request fails with ActorStoppedError. `close_soon()` only asks for the
teardown and returns at once; `stop()` also waits for the threads.

**Ownership**: the threads run an `ActorCore`; users hold an `Actor`, a handle that
the threads never reference. Dropping the handle runs its finalizer, which calls
`close_soon()`: a dropped actor releases its threads, sockets and port.

Its parts: `core.py` (`ActorCore`: set-up, lifecycle, attached sockets,
introspection), `calling.py` (`Calling`: the requests it sends and their replies),
`serving.py` (`Serving`: the requests it receives and their replies), `handle.py`
(`Actor`).
"""
from .core import ActorCore
from .handle import Actor
from .serving import Handler

__all__ = ["Actor", "ActorCore", "Handler"]
