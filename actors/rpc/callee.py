"""`Callee`: the serving half of `RpcAgent`, which runs the calls its peers send.

A call runs on the worker pool inside the context managers its hooks return (none
when every hook is idle and the request carries no meta); its reply is ``(value,
meta)``, or a Future of it for `async_execution` functions. `RPC_REMOTE` keeps the
value in the owner table and replies once it exists.
"""
from __future__ import annotations

import itertools
import threading
import time
from typing import Any, List, Optional, Tuple

from actors.runtime import Future, Message
from actors.runtime.actor.calling import SERVED_CALL
from actors.runtime.concurrency.contained import escapes
from actors.runtime.concurrency.futures import completed, failed
from actors.runtime.introspection.recorder import RECORDING

from . import hooks as hook_registry
from . import services
from .directory import WorkerInfo
from .errors import RpcNotInitializedError
from .hooks import RpcEnvelope

# Negative: never a thread's ident (see `Callee._hand_over`).
_ASYNC_TOKENS = itertools.count(-1, -1)


class Callee:
    """What `RpcAgent` serves; it uses the agent's actor, directory, owner table and
    the ranks of the connections that called it."""

    def serve(self, kind: int, handler: services.ServiceHandler) -> None:
        """Serve service `kind` (see `services`) on the worker pool."""
        def serve_service(msg: Message) -> Any:
            caller, payload = msg.payload
            return handler(self._caller(msg, caller), payload)

        self.actor.register(kind, serve_service)

    def _caller(self, msg: Message, rank: int) -> WorkerInfo:
        """The worker that sent `msg`, noted so that its lost connection is noticed."""
        # A peer that finished joining may call before this worker has read the world.
        if not self._joined.is_set() and not self._joined.wait(self.init_timeout):
            raise RpcNotInitializedError(f"worker {self.name!r} has not joined its world")
        self._sender_ranks[msg.sender] = rank
        return self.directory.resolve(rank)

    def _run(self, msg: Message) -> Tuple[Any, WorkerInfo]:
        """Run a received call inside its hooks' contexts: ``(result, caller)``, the result
        a Future for async functions."""
        fn, args, kwargs, caller, meta = msg.payload[:5]
        peer = self._caller(msg, caller)
        if meta:
            hook_registry.load_hooks_for(meta)
        thread = msg.thread = threading.get_ident()  # for STATUS: its nested calls wait on it
        is_async = getattr(fn, "_async_execution", False)
        since = time.monotonic() if is_async else 0.0
        tag = [thread] if RECORDING else None
        served = None if tag is None else SERVED_CALL.set(tag)
        try:
            if not meta and hook_registry.all_idle():
                result = fn(*args, **kwargs)
            else:
                envelope = RpcEnvelope((args, kwargs), peer, meta)
                with hook_registry.request_contexts(envelope):
                    args, kwargs = envelope.payload
                    result = fn(*args, **kwargs)
        finally:
            msg.thread = None
            if served is not None:
                SERVED_CALL.reset(served)
                tag[0] = None  # callbacks that run from now on work for no call being served
        if is_async:
            if not isinstance(result, Future):
                raise TypeError(f"async_execution function {fn.__qualname__} must return an "
                                f"actors.Future, got {type(result).__name__}")
            if tag is not None and not result.done():
                self._hand_over(msg, tag, thread, since)
        return result, peer

    def _hand_over(self, msg: Message, tag: List[Optional[int]], thread: int,
                   since: float) -> None:
        """For STATUS: an async_execution call that returned before its reply keeps the
        requests it sent linked to it, and those its future's callbacks send later. It
        and they get a token no thread has, in place of the thread they were made on,
        which goes on to serve other calls."""
        token = tag[0] = next(_ASYNC_TOKENS)
        for pending in self.actor.requests_in_flight():
            if pending.thread == thread and pending.started >= since:
                pending.thread = token
        msg.thread = token

    def _serve_call(self, msg: Message) -> Any:
        """The reply ``(value, meta)``: now, or as a Future for async_execution functions."""
        result, peer = self._run(msg)
        request_meta = msg.payload[4]
        if getattr(msg.payload[0], "_async_execution", False):
            if not result.done() or result.exception() is not None:
                return result.then(lambda done: self._respond(done.value(), peer, request_meta))
            result = result.value()  # answered at once: no continuation to chain
        return self._respond(result, peer, request_meta)

    @staticmethod
    def _respond(value: Any, peer: WorkerInfo, request_meta: dict) -> tuple:
        if not request_meta and hook_registry.all_idle():
            return value, {}
        envelope = RpcEnvelope(value, peer, None, request_meta)
        for _, hook in hook_registry.hooks():
            hook.response_sent(envelope)
        return envelope.payload, envelope.meta

    def _serve_remote(self, msg: Message) -> Future:
        """Register the creator's fork at once (mailbox order), then create on the pool."""
        rref_id, fork_id = msg.payload[5:7]
        value = self.owners.add(rref_id, fork_id)
        created = Future()

        def create() -> None:
            escaping = None
            try:
                result, _ = self._run(msg)
                if not getattr(msg.payload[0], "_async_execution", False):
                    result = completed(result)
            except BaseException as exc:  # noqa: BLE001 - delivered to the value and the creator
                result, escaping = failed(exc), exc if escapes(exc) else None
            result.add_done_callback(settle)
            if escaping is not None:
                raise escaping

        def settle(done: Future) -> None:
            exc = done.exception()
            if not value.done():
                value.set_exception(exc) if exc else value.set_result(done.value())
            created.set_exception(exc) if exc else created.set_result((None, {}))

        self.actor.pool.submit(create)
        return created
