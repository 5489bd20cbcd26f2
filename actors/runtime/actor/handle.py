"""`Actor`: the handle a user holds; dropping it stops the actor."""
from __future__ import annotations

import inspect
import weakref
from typing import Any, Optional

from .core import ActorCore


class Actor:
    """An actor you hold: `ActorCore`'s methods, and a finalizer that stops it when dropped.

    Same arguments as `ActorCore`. The methods below are the core's own bound methods
    (a callback taken from them keeps the core alive, never this handle).
    """

    def __init__(self, address: Optional[str] = "tcp://127.0.0.1:0", *, name: str = "actor",
                 num_worker_threads: int = 4, heartbeat: float = 1.0,
                 heartbeat_timeout: float = 3.0, workers_receive: bool = False,
                 routing_id: Optional[bytes] = None):
        self.core = core = ActorCore(address, name=name, num_worker_threads=num_worker_threads,
                                     heartbeat=heartbeat, heartbeat_timeout=heartbeat_timeout,
                                     workers_receive=workers_receive, routing_id=routing_id)
        self._finalizer = weakref.finalize(self, core.close_soon)
        self._finalizer.atexit = False  # at exit the process takes its sockets along

    def start(self) -> "Actor":
        """Start the actor (see `ActorCore.start`); returns the actor, for
        ``Actor(...).start()``."""
        self.core.start()
        return self

    def stop(self, timeout: float = 5.0, *, deliver: bool = True) -> None:
        """Deliver what was sent (bounded; see `ActorCore.stop`), close the mailbox and
        join every thread; pending requests fail with ActorStoppedError."""
        self._finalizer.detach()
        self.core.stop(timeout, deliver=deliver)

    def __enter__(self) -> "Actor":
        return self if self.core.started else self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _delegate(name: str) -> property:
    member = getattr(ActorCore, name)
    doc = inspect.getdoc(member)
    if callable(member):
        # help() shows a property's doc alone, without the method's parameters.
        doc = f"``{name}{_parameters(member)}``\n\n{doc}"
    return property(lambda handle: getattr(handle.core, name), doc=doc)


def _parameters(method: Any) -> str:
    """`method`'s parameters after ``self``, with their defaults, as they are written."""
    signature = inspect.signature(method)
    parameters = [parameter.replace(annotation=inspect.Parameter.empty)
                  for parameter in list(signature.parameters.values())[1:]]
    return str(signature.replace(parameters=parameters, return_annotation=inspect.Signature.empty))


for _name in ("address", "port", "pool", "register", "on_sender_lost", "on_peer_lost",
              "report_lost", "on_push", "request", "notify", "notify_many", "reply",
              "reply_error", "push", "call_later", "call_soon", "close_soon", "attach",
              "deliver_sent", "serve_introspection", "requests_in_flight",
              "requests_being_served", "finish_serving", "read_mailbox_here",
              "interrupt_mailbox_reading"):
    setattr(Actor, _name, _delegate(_name))
