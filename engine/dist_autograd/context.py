"""Distributed autograd contexts: one per `with dist_autograd.context()`, on every worker
it touches.

A context holds, for one forward/backward iteration, the send and recv functions
recorded on this worker (by message id), the gradients accumulated for this
worker's leaves, the workers it exchanged messages with (so release can follow),
and the backward passes under way. Ids are ``(rank << 48) | counter``.
"""
from __future__ import annotations

import itertools
from collections import OrderedDict
import threading
from contextvars import ContextVar
from typing import AbstractSet, Dict, Iterable, List, Optional, Set, Tuple

import numpy as np

from actors.runtime.introspection import status

from engine.autograd.accumulate import merge_gradient
from engine.autograd.scheduler import GraphTask
from engine.errors import AutogradError

from .errors import UnknownContextError
from .functions import RecvFunction, SendFunction

RANK_SHIFT = 48
_RELEASED_KEPT = 10_000


class BackwardPass:
    """This worker's part of one backward pass of a context.

    On creation its send functions become roots, each waiting for one injection: the
    gradients its recv function will send back. FAST mode (`live` None) takes every
    send function of the context; SMART mode only those of `live`, the message ids
    the pass's roots reach (see `lineage`), so dependencies are counted only from
    what will run. `version` counts the changes to the pass, to order reports of it.
    """

    def __init__(self, context: "AutogradContext", pass_id: int, retain_graph: bool,
                 live: Optional[Iterable[int]] = None):
        self.pass_id = pass_id
        self.retain_graph = retain_graph
        self.version = 0
        self.task = GraphTask(retain_graph=retain_graph, accumulate=context.accumulate)
        self.sends = list(context.sends.values()) if live is None else \
            [context.send(message_id) for message_id in live]
        for send in self.sends:
            self.task.add_root(send, pending=1)

    def waiting(self) -> Tuple[int, ...]:
        """The message ids of this part's send functions still waiting for a gradient."""
        dependencies = self.task.dependencies
        return tuple(send.message_id for send in self.sends if dependencies[send] > 0)


class AutogradContext:
    """The state of one context on one worker (see the module docstring)."""

    def __init__(self, context_id: int):
        self.id = context_id
        self.lock = threading.Lock()
        self.sends: Dict[int, SendFunction] = {}
        self.recvs: Dict[int, RecvFunction] = {}
        self.grads: Dict[object, np.ndarray] = {}
        self.workers: Set[int] = set()
        self.passes: Dict[int, BackwardPass] = {}
        self._claimed: Set[int] = set()
        # Set when the container lets the context go; a call still running in it must
        # not take it to a new worker (see recording._tag).
        self.released = False

    @property
    def creator(self) -> int:
        """Rank of the worker that created this context."""
        return self.id >> RANK_SHIFT

    def accumulate(self, tensor: object, grad: Optional[np.ndarray]) -> None:
        """The leaf sink of this context's passes: gradients stay here, never in `.grad`."""
        if grad is not None:
            self.grads[tensor] = merge_gradient(self.grads.get(tensor), grad, tensor,
                                                self._claimed)

    def send(self, message_id: int) -> SendFunction:
        """The send function of message `message_id`; AutogradError if there is none."""
        send = self.sends.get(message_id)
        if send is None:
            raise AutogradError(f"context {self.id} has no send function for message "
                                f"{message_id}")
        return send

    def backward_pass(self, pass_id: int, retain_graph: bool,
                      live: Optional[Iterable[int]] = None) -> BackwardPass:
        """This worker's part of pass `pass_id`, set up on first sight (`live` as for
        BackwardPass). Hold `lock`."""
        found = self.passes.get(pass_id)
        if found is None:
            found = self.passes[pass_id] = BackwardPass(self, pass_id, retain_graph, live)
        return found


class ContextContainer:
    """The contexts alive on this worker, and the one current in each thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._contexts: Dict[int, AutogradContext] = {}
        # Recently released ids: a call still in flight when its context was released
        # must not bring the context back (nobody would release it again).
        self._released: "OrderedDict[int, None]" = OrderedDict()
        self._counter = itertools.count(1)

    def new_id(self, rank: int) -> int:
        return (rank << RANK_SHIFT) | next(self._counter)

    def create(self, rank: int) -> AutogradContext:
        context = AutogradContext(self.new_id(rank))
        with self._lock:
            self._contexts[context.id] = context
        return context

    def get_or_create(self, context_id: int) -> Optional[AutogradContext]:
        """The context, created on first sight; None if it was released already."""
        with self._lock:
            context = self._contexts.get(context_id)
            if context is None:
                if context_id in self._released:
                    return None
                context = self._contexts[context_id] = AutogradContext(context_id)
            return context

    def get(self, context_id: int, worker: str = "") -> AutogradContext:
        context = self._contexts.get(context_id)
        if context is None:
            raise UnknownContextError(context_id, worker)
        return context

    def find(self, context_id: int) -> Optional[AutogradContext]:
        return self._contexts.get(context_id)

    def release(self, context_id: int, remember: bool = True) -> Optional[AutogradContext]:
        """Forget the context here; with `remember`, its id too, so that a call still in
        flight in it does not bring it back (`get_or_create`)."""
        with self._lock:
            if remember:
                self._released[context_id] = None
                if len(self._released) > _RELEASED_KEPT:
                    self._released.popitem(last=False)
            context = self._contexts.pop(context_id, None)
            if context is not None:
                context.released = True
            return context

    def clear(self) -> None:
        """Forget every context and released id (this worker left its world)."""
        with self._lock:
            self._contexts.clear()
            self._released.clear()

    def created_by(self, rank: int) -> List[int]:
        with self._lock:
            return [cid for cid in self._contexts if cid >> RANK_SHIFT == rank]

    def unreleasable(self, lost: AbstractSet[int], me: int) -> List[int]:
        """The contexts no release can reach here any more, now that the workers `lost`
        are gone: those a lost worker created, and those created elsewhere whose every
        other worker here is lost. A release comes from the creator through the workers
        each part exchanged messages with (`release`), so from one of those."""
        with self._lock:
            unreleasable = []
            for cid, context in self._contexts.items():
                creator = cid >> RANK_SHIFT
                others = context.workers - {me}
                if creator in lost or (creator != me and others and others <= lost):
                    unreleasable.append(cid)
            return unreleasable

    def __len__(self) -> int:
        return len(self._contexts)

    # ---- the current context ----------------------------------------------------

    def current(self) -> Optional[AutogradContext]:
        return _current.get()

    def using(self, context: Optional[AutogradContext]) -> "_Using":
        """Make `context` current for the duration (None: no context)."""
        return _Using(context)


# The current context: a context variable, not a thread's, so that a future's callbacks
# run in the context current where they were added (actors' Future runs each in the
# context variables of its `add_done_callback`; torch's run without it). Unset outside
# every context: a thread with no variable set adds callbacks at the least cost.
_current: "ContextVar[Optional[AutogradContext]]" = ContextVar(
    "dist_autograd_context", default=None)


class _Using:
    """`ContextContainer.using`: a class, not a generator, as it wraps every call."""

    __slots__ = ("_context", "_token")

    def __init__(self, context: Optional[AutogradContext]):
        self._context = context

    def __enter__(self) -> None:
        self._token = _current.set(self._context)

    def __exit__(self, *exc: object) -> None:
        # A reset, not a set of the previous value: the variable is unset again after
        # the outermost block, and callbacks added then carry nothing.
        _current.reset(self._token)


container = ContextContainer()
"""This worker's distributed autograd contexts (torch keeps the same in its C++ container)."""


def _contexts_status() -> dict:
    """The contexts open on this worker, for STATUS (actors.runtime.introspection)."""
    ids = sorted(list(container._contexts))
    return {"open": len(ids), "ids": ids[:64]}


status.add_section("autograd_contexts", _contexts_status)
