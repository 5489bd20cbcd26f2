"""Recording the distributed graph: the RPC hook that adds send and recv functions.

On the sender of a request or response made inside a context, the tensors that
require grad among its arguments (or return value) get a `SendFunction` whose edges
lead to them; the message carries ``(context_id, message_id)`` and the message's
lineage (SMART mode's liveness, see `lineage`) in its meta, and a request the
context releases owed to its receiver (see `release`). The receiver
creates the context on first sight, gives the received tensors a `RecvFunction` as
their `grad_fn`, and runs the called function inside that context, so nested calls
record too. Tensors are found wherever pickling finds them (`grad_tensors`), in the
same order on both sides.
"""
from __future__ import annotations

import contextlib
from typing import Any, Collection, ContextManager, List, Optional, Set, Tuple

import actors
from actors.rpc import RpcEnvelope, RpcHook, WorkerInfo
from actors.runtime.process.log import get_logger
from engine.autograd.graph import gradient_edge
from engine.tensor import Tensor

from .context import RANK_SHIFT, AutogradContext, container
from .exchange import send_gradients
from .functions import RecvFunction, SendFunction
from .lineage import lineage_of, received
from .release import owed, release_all

log = get_logger(__name__)

HOOK_NAME = "engine.dist_autograd"
# Objects from these packages are never searched for tensors (RRefs, arrays, modules...).
_OPAQUE_MODULES = ("actors", "store", "numpy", "zmq", "builtins", "engine.autograd")


def grad_tensors(value: Any) -> List[Tensor]:
    """The distinct tensors requiring grad inside `value`, in an order that the value's
    unpickled copy gives too: the order in which pickling writes them.

    Lists, tuples and dicts (their subclasses too: a namedtuple, an OrderedDict) are
    searched in order, at any depth; any other object by what it pickles (its
    ``__reduce_ex__``: its ``__dict__``, ``__slots__`` or ``__getstate__``). TypeError
    for such a tensor inside a set, whose order differs between processes.
    """
    found: List[Tensor] = []
    seen = set()
    held = []  # what reductions made, alive until the end: no id of `seen` is reused
    stack = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        if isinstance(item, Tensor):
            seen.add(id(item))
            if item.requires_grad:
                found.append(item)
            continue
        parts = _parts(item)
        if parts:
            seen.add(id(item))
            held.append(parts)
            stack.extend(reversed(parts))
    return found


def _parts(item: Any) -> Optional[Collection[Any]]:
    """What pickling writes of `item` that may hold tensors, in its order (a container's
    own items, not a copy); None for a leaf."""
    if isinstance(item, (list, tuple)):
        return item
    if isinstance(item, dict):
        return item.values()
    if isinstance(item, (set, frozenset)):
        if grad_tensors(list(item)):
            raise TypeError("a tensor that requires grad is inside a set, whose order "
                            "differs between processes: send it in a list or a tuple")
        return None
    if isinstance(item, type) or type(item).__module__.startswith(_OPAQUE_MODULES):
        return None
    try:
        reduction = item.__reduce_ex__(4)
    except Exception:  # noqa: BLE001 - not picklable: sending it fails, with its own error
        return None
    if not isinstance(reduction, tuple):
        return None  # a global's name
    args, state = reduction[1:3] if len(reduction) > 2 else (reduction[1], None)
    parts = [args, state]
    for items in reduction[3:5]:  # list items, dict items
        if items is not None:
            parts.append(list(items))
    return parts


def new_message_id() -> int:
    return container.new_id(actors.get_worker_info().id)


def record_send(context: AutogradContext, envelope: RpcEnvelope, value: Any
                ) -> Tuple[Optional[int], Optional[Tuple[int, ...]]]:
    """Add a SendFunction for `value`'s grad tensors; its message id and lineage, if any.

    The lineage travels as a tuple, None if empty.
    """
    context.workers.add(envelope.peer.id)
    tensors = grad_tensors(value)
    if not tensors:
        return None, None
    message_id = new_message_id()
    edges = [gradient_edge(t) for t in tensors]
    context.sends[message_id] = SendFunction(message_id, edges)
    return message_id, tuple(lineage_of(edges)) or None


def record_recv(context: AutogradContext, message_id: Optional[int], peer: WorkerInfo,
                value: Any, carried: Optional[Tuple[int, ...]]) -> None:
    """Make a RecvFunction the grad_fn of `value`'s received grad tensors."""
    context.workers.add(peer.id)
    if message_id is None:
        return
    tensors = grad_tensors(value)
    recv = RecvFunction(message_id, peer, len(tensors), send_gradients, context.id,
                        received(message_id, carried or ()))
    for slot, tensor in enumerate(tensors):
        tensor.grad_fn, tensor.output_nr = recv, slot
    context.recvs[message_id] = recv


def _tag(envelope: RpcEnvelope, context: Optional[AutogradContext], request: bool) -> None:
    """Put ``(context_id, message_id, released_ids, lineage)`` in the message's meta, if
    any is set.

    A request also carries the context releases owed to its receiver (see `release`).
    """
    message_id = lineage = None
    if context is not None:
        message_id, lineage = record_send(context, envelope, envelope.payload)
        if context.released:
            # A call still running in a context released here: the release went to the
            # workers known then, and a context this message made on its receiver would
            # never be released. Read after record_send added the receiver to the
            # workers, and release() sets the flag before reading them, so the receiver
            # is either told of the release or never given the context.
            context = message_id = lineage = None
    released = owed.peek(envelope.peer.id) if request else None
    if context is not None or released:
        envelope.meta[HOOK_NAME] = (None if context is None else context.id, message_id,
                                    released, lineage)


def _untag(envelope: RpcEnvelope
           ) -> Tuple[Optional[int], Optional[int], Optional[Tuple[int, ...]]]:
    """Apply the releases a received message carries; its context id, message id and
    lineage."""
    tag = envelope.meta.get(HOOK_NAME)
    if tag is None:
        return None, None, None
    context_id, message_id, released, lineage = tag
    if released:
        release_all(released, envelope.peer.id)
    return context_id, message_id, lineage


class DistAutogradHook(RpcHook):
    """Attaches distributed autograd to every RPC (see the module docstring)."""

    def __init__(self) -> None:
        self._lost: Set[int] = set()  # the ranks of this world's lost workers

    def idle(self) -> bool:
        return container.current() is None and not owed.any()

    def request_sent(self, envelope: RpcEnvelope) -> None:
        _tag(envelope, container.current(), request=True)

    def request_received(self, envelope: RpcEnvelope) -> ContextManager:
        context_id, message_id, lineage = _untag(envelope)
        # A call from a lost worker, served late, must not bring back a context dropped
        # for that loss (`worker_lost`): nobody would release it again.
        context = None if context_id is None or envelope.peer.id in self._lost \
            else container.get_or_create(context_id)
        if context is None:  # untagged, or released while this call was in flight
            return contextlib.nullcontext()
        record_recv(context, message_id, envelope.peer, envelope.payload, lineage)
        return container.using(context)

    def response_sent(self, envelope: RpcEnvelope) -> None:
        tag = envelope.request_meta.get(HOOK_NAME)
        _tag(envelope, container.find(tag[0]) if tag and tag[0] is not None else None,
             request=False)

    def response_received(self, envelope: RpcEnvelope) -> None:
        sent = envelope.request_meta.get(HOOK_NAME)
        if sent is not None and sent[2]:  # the releases it carried arrived
            owed.settle(envelope.peer.id, sent[2])
        context_id, message_id, lineage = _untag(envelope)
        context = None if context_id is None else container.find(context_id)
        if context is not None:
            record_recv(context, message_id, envelope.peer, envelope.payload, lineage)

    def world_left(self) -> None:
        """Forget every context and owed release of the world this worker left: the
        workers of a later world may reuse their ids."""
        owed.clear()
        container.clear()
        self._lost.clear()

    def worker_lost(self, worker: WorkerInfo) -> None:
        """Drop the contexts nobody will release now (`ContextContainer.unreleasable`):
        those the lost worker created, and those whose part here exchanged messages only
        with lost workers, e.g. the far end of a chain whose middle worker died."""
        owed.drop(worker.id)
        self._lost.add(worker.id)
        for context_id in container.unreleasable(self._lost, actors.get_worker_info().id):
            # Dropped, not released, while its creator lives: a call from a worker not
            # lost may bring it back, and that worker, which then knows this one, will
            # pass on the creator's release.
            container.release(context_id, remember=context_id >> RANK_SHIFT in self._lost)
            log.info("dist_autograd_context_dropped", context_id=context_id,
                     lost=worker.name)
