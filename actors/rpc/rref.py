"""`RRef`: a reference to a value that lives on its owner worker.

The holder side of the reference counting described in `owners.py`: each RRef
object is one fork; pickling an RRef (passing it in an RPC) registers a new fork
with the owner before the message leaves, and a dropped RRef tells the owner.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from actors.runtime import Future, PeerLostError, ProtocolError, RequestTimeoutError
from actors.runtime.concurrency.futures import InvalidStateError, completed

from .directory import Destination, WorkerInfo
from .errors import RRefError
from .failures import raised_here
from .state import agent_or_none, current_agent
from .timeouts import call_timeout


class RRef:
    """A remote reference: `to_here()` fetches a copy, the proxies run methods on the owner.

    ``RRef(value)`` makes this worker the owner of `value` (as torch's ``RRef(obj)``);
    the other RRefs come from `remote()` or arrive in RPCs.
    """

    def __init__(self, owner: Any, rref_id: Optional[int] = None, fork_id: Optional[int] = None,
                 created: Optional[Future] = None):
        self._agent = agent = current_agent()
        if rref_id is None:  # RRef(value): a value owned here
            value, owner = owner, agent.info
            rref_id, fork_id = agent.new_id(), agent.new_id()
            agent.owners.add(rref_id, fork_id).set_result(value)
        # An owner rank is resolved on first use: an RRef may arrive (in a call) while
        # this worker is still reading the world's directory.
        self._owner_ref = owner
        self._rref_id = rref_id
        self._fork_id = fork_id
        self._created = created

    # ---- identity -----------------------------------------------------------------

    @property
    def _owner(self) -> WorkerInfo:
        if isinstance(self._owner_ref, int):
            self._owner_ref = self._agent.directory.resolve(self._owner_ref)
        return self._owner_ref

    def owner(self) -> WorkerInfo:
        """The `WorkerInfo` of the worker that holds the value."""
        return self._owner

    def owner_name(self) -> str:
        """The name of the worker that holds the value."""
        return self._owner.name

    def is_owner(self) -> bool:
        """Whether this process holds the value (then `local_value` works)."""
        return self._owner.id == self._agent.rank

    def confirmed(self) -> Future:
        """Completes when the owner has created the value (or failed to), on the creator."""
        return self._created if self._created is not None else completed(None)

    def confirmed_by_owner(self) -> bool:
        """True once the owner knows of this reference, as torch's `confirmed_by_owner`.

        The owner's own RRefs and received ones always are: a fork is announced to
        the owner, on an ordered channel, before the RRef that carries it is sent.
        An RRef made by `remote()` is once the owner has answered its creation (with
        the value, or the error the function raised): not when the creation timed out
        or the owner was lost.
        """
        created = self._created
        return created is None or (created.done() and not raised_here(
            created.exception(), (RequestTimeoutError, PeerLostError)))

    def _check_created(self) -> None:
        """Raise, as torch does at the next use, if the owner never answered `remote()`
        in time: it may never hold the value."""
        created = self._created
        if created is not None and created.done():
            exc = created.exception()
            if raised_here(exc, RequestTimeoutError):
                raise RequestTimeoutError(f"the creation of {self!r} by remote() timed out, "
                                          f"so its owner may not hold it: {exc}") from exc
            if isinstance(exc, ProtocolError):
                raise self._rejected(exc) from exc

    def _rejected(self, exc: ProtocolError) -> ProtocolError:
        return ProtocolError(f"the owner {self._owner.name!r} rejected the creation of "
                             f"{self!r} by remote() unrun, so it never holds the value: {exc}")

    def _unless_rejected(self, call: Future) -> Future:
        """`call`, failed as soon as the owner rejects this RRef's `remote()` unrun.

        A request the owner cannot accept (an undecodable argument, a function safe
        mode refuses) never creates the value, so a call waiting for it on the owner
        would otherwise wait out its whole timeout.
        """
        created = self._created
        if created is None or created.done():
            return call
        outcome = Future()

        def settle(done: Future) -> None:
            exc = done.exception()
            if done is created and not isinstance(exc, ProtocolError):
                return
            try:
                if done is created:
                    outcome.set_exception(self._rejected(exc))
                elif exc is not None:
                    outcome.set_exception(exc)
                else:
                    outcome.set_result(done.value())
            except InvalidStateError:
                pass  # the other one came first

        created.add_done_callback(settle)
        call.add_done_callback(settle)
        return outcome

    def __repr__(self) -> str:
        return f"RRef(owner={self._owner.name!r}, id=0x{self._rref_id:x})"

    # ---- values -------------------------------------------------------------------

    def local_value(self) -> Any:
        """The value itself, on its owner; elsewhere an RRefError."""
        if not self.is_owner():
            raise RRefError(f"local_value() of {self!r} called on worker "
                            f"{self._agent.name!r}; only the owner {self._owner.name!r} has it")
        return self._agent.owners.value(self._rref_id).wait(self._agent.timeout or None)

    def to_here(self, timeout: Optional[float] = None) -> Any:
        """A copy of the value, fetched from the owner (`timeout` as for rpc_sync)."""
        timeout = call_timeout(timeout)
        self._check_created()
        if self.is_owner():
            return self._agent.owners.value(self._rref_id).wait(timeout or None)
        fetched = self._agent.call(self._owner, _fetch, (self._rref_id,), {}, timeout)
        return self._unless_rejected(fetched).wait()

    def backward(self, dist_autograd_ctx_id: int = -1, retain_graph: bool = False,
                 mode: str = "fast") -> None:
        """Run backward from the value, a scalar tensor, as torch's `RRef.backward`.

        With a distributed autograd context id, the owner runs that context's
        backward pass from the value, in `mode` (gradients then come from
        `get_gradients` of the context); with -1 (or None) a local backward pass,
        which only the owner may run (RRefError elsewhere).
        """
        self._check_created()
        if dist_autograd_ctx_id is None or dist_autograd_ctx_id == -1:
            if not self.is_owner():
                raise RRefError(f"backward() of {self!r} without a distributed autograd "
                                f"context must be called on its owner {self._owner.name!r}")
            self.local_value().backward(retain_graph=retain_graph)
            return
        args = (self._rref_id, dist_autograd_ctx_id, retain_graph, mode)
        if self.is_owner():
            _backward_on_owner(*args)
        else:
            self._agent.call_sync(self._owner, _backward_on_owner, args, {}, call_timeout(None))

    # ---- proxies ------------------------------------------------------------------

    def rpc_sync(self, timeout: Optional[float] = None) -> "_Proxy":
        """``rref.rpc_sync().method(*args)`` runs the method on the owner and waits."""
        return _Proxy(self, "rpc_sync", timeout)

    def rpc_async(self, timeout: Optional[float] = None) -> "_Proxy":
        """``rref.rpc_async().method(*args)`` runs the method on the owner; a Future."""
        return _Proxy(self, "rpc_async", timeout)

    def remote(self, timeout: Optional[float] = None) -> "_Proxy":
        """``rref.remote().method(*args)`` runs the method on the owner; an RRef to the result."""
        return _Proxy(self, "remote", timeout)

    # ---- reference counting -------------------------------------------------------

    def __reduce__(self):
        fork_id = self._agent.fork(self._owner, self._rref_id)
        return _rebuild, (self._owner.id, self._rref_id, fork_id)

    def __del__(self) -> None:
        agent = agent_or_none()
        if agent is not None and agent is getattr(self, "_agent", None):
            try:
                agent.release(self._owner, self._rref_id, self._fork_id)
            except Exception:  # noqa: BLE001 - never raise from a finalizer
                pass


def create_remote(to: Destination, fn: Callable, args: tuple, kwargs: dict,
                  timeout: Optional[float]) -> RRef:
    """Run `fn(*args, **kwargs)` on `to`, which keeps the value; an RRef to it."""
    agent = current_agent()
    info = agent.directory.resolve(to)
    rref_id, fork_id = agent.new_id(), agent.new_id()
    created = agent.call(info, fn, args, kwargs, timeout, remote=(rref_id, fork_id))
    created.add_done_callback(
        lambda done: agent.report_rejection(info, rref_id, fork_id, done))
    return RRef(info, rref_id, fork_id, created)


class _Proxy:
    """Method calls on an RRef's value, run on its owner."""

    def __init__(self, rref: RRef, mode: str, timeout: Any):
        self._rref, self._mode = rref, mode
        self._timeout = call_timeout(timeout)

    def __getattr__(self, method: str):
        def invoke(*args: Any, **kwargs: Any) -> Any:
            self._rref._check_created()
            call_args = (self._rref, method, args, kwargs)
            owner, timeout = self._rref.owner(), self._timeout
            if self._mode == "remote":
                return create_remote(owner, _invoke_method, call_args, {}, timeout)
            agent = current_agent()
            if self._mode == "rpc_sync" and self._rref.confirmed().done():
                return agent.call_sync(owner, _invoke_method, call_args, {}, timeout)
            called = self._rref._unless_rejected(
                agent.call(owner, _invoke_method, call_args, {}, timeout))
            return called.wait() if self._mode == "rpc_sync" else called

        return invoke


def _invoke_method(rref: RRef, method: str, args: tuple, kwargs: dict) -> Future:
    """Runs on the owner: the method's result, or its own Future if it is async_execution."""
    bound = getattr(rref.local_value(), method)
    result = bound(*args, **kwargs)
    return result if getattr(bound, "_async_execution", False) else completed(result)


_invoke_method._async_execution = True

# The distributed backward pass, registered by the autograd layer above this one.
_distributed_backward: Optional[Callable[[int, list, bool, str], None]] = None


def register_distributed_backward(run: Callable[[int, list, bool, str], None]) -> None:
    """Let `RRef.backward` run `run(context_id, roots, retain_graph, mode)` on owners."""
    global _distributed_backward
    _distributed_backward = run


def _backward_on_owner(rref_id: int, context_id: int, retain_graph: bool, mode: str) -> None:
    if _distributed_backward is None:
        raise RRefError("RRef.backward with a context needs distributed autograd "
                        "(import engine.dist_autograd)")
    value = current_agent().owners.value(rref_id).wait()
    _distributed_backward(context_id, [value], retain_graph, mode)


def _fetch(rref_id: int) -> Future:
    """Runs on the owner: the value, once created (an async_execution function)."""
    return current_agent().owners.value(rref_id)


_fetch._async_execution = True


def _rebuild(owner_id: int, rref_id: int, fork_id: int) -> RRef:
    return RRef(owner_id, rref_id, fork_id)


