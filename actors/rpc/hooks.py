"""The hook interface through which other layers attach to RPC messages.

Distributed autograd (in `engine`) records send/recv functions this way, the way
torch wraps a message in `RpcWithAutograd`, while `actors` never imports `engine`.
A hook sees every request and response as an `RpcEnvelope` when it is sent and
when it is received: it may replace the payload and may put picklable data under
its own name in `meta`, which travels with the message to the other side.

A hook that has nothing to do right now says so with `idle()`: a message that
carries no meta passes hooks that are all idle without an envelope being built.
"""
from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Dict, Iterator, List, Optional, Set, Tuple

from .directory import WorkerInfo


class RpcEnvelope:
    """One request or response as hooks see it.

    `payload` is ``(args, kwargs)`` for a request and the return value for a
    response; `peer` is the worker on the other side; `meta` maps hook names to the
    data they attached; `request_meta` is, for a response, the meta its request
    carried (so a hook can relate the two).
    """

    __slots__ = ("payload", "peer", "meta", "request_meta")

    def __init__(self, payload: Any, peer: WorkerInfo, meta: Optional[Dict[str, Any]] = None,
                 request_meta: Optional[Dict[str, Any]] = None):
        self.payload = payload
        self.peer = peer
        self.meta = {} if meta is None else meta
        self.request_meta = {} if request_meta is None else request_meta


class RpcHook:
    """Base class of hooks: override the steps you need; the defaults do nothing."""

    def idle(self) -> bool:
        """True while this hook would neither tag a request sent from this thread nor act
        on a message that carries none of its meta; then it is skipped for such messages.
        The default, False, shows the hook every message."""
        return False

    def request_sent(self, envelope: RpcEnvelope) -> None:
        """Before a request is pickled on the caller."""

    def request_received(self, envelope: RpcEnvelope) -> ContextManager:
        """On the callee before the function runs; the function runs inside the returned
        context manager."""
        return contextlib.nullcontext()

    def response_sent(self, envelope: RpcEnvelope) -> None:
        """On the callee before the return value is pickled."""

    def response_received(self, envelope: RpcEnvelope) -> None:
        """On the caller before the future completes with the payload."""

    def worker_lost(self, worker: WorkerInfo) -> None:
        """A worker of this world died or became unreachable."""

    def world_left(self) -> None:
        """This worker left its world (`shutdown`): what the hook kept for that world,
        it may drop; a later world starts afresh."""


_hooks: List[Tuple[str, RpcHook]] = []
_names: Set[str] = set()


def register_hook(name: str, hook: RpcHook) -> None:
    """Attach `hook` to every RPC from now on; `name` keys its meta. A name is taken once.

    Name a hook after the module that registers it when it is imported: a worker that
    receives meta under a name it has no hook for imports that module (once), so the
    callee side of a hook needs no set-up.
    """
    if any(existing == name for existing, _ in _hooks):
        raise ValueError(f"an RPC hook named {name!r} is already registered")
    if not isinstance(hook, RpcHook):
        raise TypeError(f"hook must be an RpcHook, got {type(hook).__name__}")
    _hooks.append((name, hook))
    _names.add(name)


def unregister_hook(name: str) -> None:
    """Remove the hook registered under `name`; nothing happens when there is none."""
    _hooks[:] = [(n, h) for n, h in _hooks if n != name]
    _names.discard(name)


def hooks() -> List[Tuple[str, RpcHook]]:
    return _hooks


def all_idle() -> bool:
    """Whether every registered hook is idle (see `RpcHook.idle`) on this thread now."""
    for _, hook in _hooks:
        if not hook.idle():
            return False
    return True


def request_contexts(envelope: RpcEnvelope) -> ContextManager:
    """The context managers the registered hooks return for a received request, as one."""
    if len(_hooks) == 1:  # the common case, without an ExitStack
        return _hooks[0][1].request_received(envelope)
    if not _hooks:
        return contextlib.nullcontext()
    return _all_received(list(_hooks), envelope)


@contextlib.contextmanager
def _all_received(hooks: List[Tuple[str, RpcHook]], envelope: RpcEnvelope) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for _, hook in hooks:
            stack.enter_context(hook.request_received(envelope))
        yield


def load_hooks_for(meta: dict) -> None:
    """Import the modules named by `meta` keys that no registered hook answers to."""
    if _names.issuperset(meta):
        return
    import importlib

    for name in meta:
        if name not in _names and name not in _unloadable:
            try:
                importlib.import_module(name)
            except ImportError:
                _unloadable.add(name)


_unloadable: set = set()
