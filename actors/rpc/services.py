"""Services: message kinds of their own that a layer above RPC serves on every worker.

Distributed autograd's backward steps and context releases are not calls of
Python functions: they are kinds of their own (``Kind.AUTOGRAD_*``), served on
each worker of the RPC world by a handler the engine registers here. They travel
as ``(caller_rank, payload)`` to the worker's mailbox, bypass the RPC hooks, and
are served on the worker pool. A handler is ``handler(caller: WorkerInfo,
payload)`` and returns the reply, or an `actors.Future` of it.

Registration holds for every RPC world of the process, present and future.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Optional

from actors.runtime import ActorStoppedError, Future, WorkerPool

from . import state
from .directory import Destination, WorkerInfo

ServiceHandler = Callable[[WorkerInfo, Any], Any]

_handlers: Dict[int, ServiceHandler] = {}


def register_service(kind: int, handler: ServiceHandler) -> None:
    """Serve messages of `kind` with `handler` on this process's RPC worker.

    ValueError if the kind is taken; TypeError if `handler` is not callable.
    """
    if not callable(handler):
        raise TypeError(f"handler must be callable, got {type(handler).__name__}")
    kind = int(kind)
    if kind in _handlers:
        raise ValueError(f"a service for kind 0x{kind:04x} is already registered")
    _handlers[kind] = handler
    agent = state.agent_or_none()
    if agent is not None:
        agent.serve(kind, handler)


def services() -> Dict[int, ServiceHandler]:
    """The registered services, by kind (for an agent that starts)."""
    return dict(_handlers)


def call_service(to: Destination, kind: int, payload: Any,
                 timeout: Optional[float] = None) -> Any:
    """Send `payload` to `to`'s service `kind` and wait for its reply, on this thread.

    Raises what the handler raised, WorkerLostError for a lost worker, and a
    TimeoutError after `timeout` seconds (default: the world's RPC timeout).
    """
    return state.current_agent().call_service(to, kind, payload, timeout)


def call_service_async(to: Destination, kind: int, payload: Any,
                       timeout: Optional[float] = None) -> Future:
    """`call_service` without waiting: a Future of the reply."""
    return state.current_agent().call_service_async(to, kind, payload, timeout)


def notify_service(to: Destination, kind: int, payload: Any) -> None:
    """Send `payload` to `to`'s service `kind` with no reply; a lost worker is skipped."""
    state.current_agent().notify_service(to, kind, payload)


def run_on_pool(fn: Callable[..., Any], *args: Any) -> None:
    """Run `fn(*args)` on this worker's pool, the threads that serve requests."""
    state.current_agent().actor.pool.submit(fn, *args)


def run_on_pool_later(delay: float, fn: Callable[..., Any], *args: Any) -> None:
    """`run_on_pool` in `delay` seconds, timed by the worker's I/O loop; any thread.

    Periodic work of a layer above RPC needs no thread of its own this way. A timer
    still waiting when the world shuts down never runs. Raises RpcNotInitializedError
    without a world, ActorStoppedError while it shuts down.
    """
    actor = state.current_agent().actor
    actor.call_soon(actor.call_later, delay, _submit, actor.pool, fn, args)


def _submit(pool: WorkerPool, fn: Callable[..., Any], args: tuple) -> None:
    # A timer due while the world shuts down finds the pool stopped: the work goes with it.
    with contextlib.suppress(ActorStoppedError):
        pool.submit(fn, *args)
