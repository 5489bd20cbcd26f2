"""The process's one ZeroMQ context, shared by every socket the project opens.

It is pyzmq's global instance (`zmq.Context.instance()`), so that an application's
own ZeroMQ sockets share it too, and a forked child gets a fresh one. It lives as
long as the process: nothing here terminates it, and garbage collection never
reaches it (the class holds it), so no finalizer can block in ``term()`` while
sockets are open. Sockets are closed one by one by their owners, with ``LINGER 0``
(but a connected socket an actor attached: see `io.attachments`);
at interpreter exit the context is left to the OS.
"""
from __future__ import annotations

import zmq


def process_context() -> zmq.Context:
    """The ZeroMQ context of this process (created on first use)."""
    return zmq.Context.instance()
