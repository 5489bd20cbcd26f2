"""Recording the distributed graph: the RPC hook that adds send and recv functions.

On the sender of a request or response made inside a context, the tensors that
require grad among its arguments (or return value) get a `SendFunction` whose edges
lead to them; the message carries ``(context_id, message_id)``. The receiver
creates the context on first sight, gives the received tensors a `RecvFunction` as
their `grad_fn`, and runs the called function inside that context, so nested calls
record too. Tensors are found in lists, tuples, dicts and user objects' attributes,
in the same order on both sides.
"""
from __future__ import annotations

import contextlib
from typing import Any, ContextManager, List, Optional

from actors.rpc import RpcEnvelope, RpcHook, WorkerInfo
from engine.autograd.graph import gradient_edge
from engine.tensor import Tensor

from .context import AutogradContext, container
from .functions import RecvFunction, SendFunction

HOOK_NAME = "engine.dist_autograd"
_MAX_DEPTH = 8
# Objects from these packages are never searched for tensors (RRefs, arrays, modules...).
_OPAQUE_MODULES = ("actors", "store", "numpy", "zmq", "builtins", "engine.autograd")


def grad_tensors(value: Any) -> List[Tensor]:
    """The distinct tensors requiring grad inside `value`, in a deterministic order."""
    found: List[Tensor] = []
    seen = set()

    def visit(item: Any, depth: int) -> None:
        if id(item) in seen or depth > _MAX_DEPTH:
            return
        kind = type(item)
        if kind is Tensor or isinstance(item, Tensor):
            seen.add(id(item))
            if item.requires_grad:
                found.append(item)
            return
        if kind in (list, tuple):
            seen.add(id(item))
            for element in item:
                visit(element, depth + 1)
        elif kind is dict:
            seen.add(id(item))
            for element in item.values():
                visit(element, depth + 1)
        elif hasattr(item, "__dict__") and not kind.__module__.startswith(_OPAQUE_MODULES) \
                and not isinstance(item, type):
            seen.add(id(item))
            for element in vars(item).values():
                visit(element, depth + 1)

    visit(value, 0)
    return found


def new_message_id() -> int:
    from actors import get_worker_info

    return container.new_id(get_worker_info().id)


def record_send(context: AutogradContext, envelope: RpcEnvelope, value: Any) -> None:
    """Add a SendFunction for `value`'s grad tensors and tag the message with the context."""
    context.workers.add(envelope.peer.id)
    tensors = grad_tensors(value)
    message_id = None
    if tensors:
        message_id = new_message_id()
        context.sends[message_id] = SendFunction(message_id,
                                                 [gradient_edge(t) for t in tensors])
    envelope.meta[HOOK_NAME] = (context.id, message_id)


def record_recv(context: AutogradContext, message_id: Optional[int], peer: WorkerInfo,
                value: Any) -> None:
    """Make a RecvFunction the grad_fn of `value`'s received grad tensors."""
    context.workers.add(peer.id)
    if message_id is None:
        return
    from .exchange import send_gradients

    tensors = grad_tensors(value)
    recv = RecvFunction(message_id, peer, len(tensors), send_gradients, context.id)
    for slot, tensor in enumerate(tensors):
        tensor.grad_fn, tensor.output_nr = recv, slot
    context.recvs[message_id] = recv


class DistAutogradHook(RpcHook):
    """Attaches distributed autograd to every RPC (see the module docstring)."""

    def request_sent(self, envelope: RpcEnvelope) -> None:
        context = container.current()
        if context is not None:
            record_send(context, envelope, envelope.payload)

    def request_received(self, envelope: RpcEnvelope) -> ContextManager:
        tag = envelope.meta.get(HOOK_NAME)
        if tag is None:
            return contextlib.nullcontext()
        context_id, message_id = tag
        context = container.get_or_create(context_id)
        if context is None:  # released while this call was in flight
            return contextlib.nullcontext()
        record_recv(context, message_id, envelope.peer, envelope.payload)
        return container.using(context)

    def response_sent(self, envelope: RpcEnvelope) -> None:
        tag = envelope.request_meta.get(HOOK_NAME)
        context = container.find(tag[0]) if tag else None
        if context is not None:
            record_send(context, envelope, envelope.payload)

    def response_received(self, envelope: RpcEnvelope) -> None:
        tag = envelope.meta.get(HOOK_NAME)
        context = container.find(tag[0]) if tag else None
        if context is not None:
            record_recv(context, tag[1], envelope.peer, envelope.payload)

    def worker_lost(self, worker: WorkerInfo) -> None:
        """Drop the contexts the lost worker created: nobody will release them now."""
        from .backward import log

        for context_id in container.created_by(worker.id):
            container.release(context_id)
            log.info("dist_autograd_context_dropped", context_id=context_id,
                     creator=worker.name)
