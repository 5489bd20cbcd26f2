"""`Future`: the result of work that completes on another thread or another actor.

Callbacks run on the thread that completes the future (for a reply, the actor's
I/O thread), so they must be short, and a wait there for a pending future raises
RuntimeError (`blocking.refuse_waiting_on_io_loop`); `then` chains a transformation,
and a future made with `settle` transforms its own result as it completes.

A callback runs in the context variables (`contextvars`) that were current where it
was added, as asyncio's callbacks do, not in those of the completing thread: what a
layer keeps per call in a ContextVar (distributed autograd's current context) holds in
the work chained after that call too, e.g. a second call made from a `then` inside an
`async_execution` function.
"""
from __future__ import annotations

import threading
from contextvars import copy_context
from _thread import allocate_lock as _allocate_lock
from typing import Any, Callable, Dict, Iterable, List, Optional, TypeVar

from .blocking import about_to_block, refuse_waiting_on_io_loop
from .contained import escapes
from ..errors import RequestTimeoutError


class FutureTimeoutError(RequestTimeoutError):
    """`Future.wait` gave up before the future completed."""


class InvalidStateError(RuntimeError):
    """A result was set twice, or `value()` was read before the future completed."""


_PENDING = object()
_SETTLED = object()  # a future's `settle` once a completion has claimed it
K = TypeVar("K")


Settle = Callable[[Any, Optional[BaseException]], Any]


class Future:
    """A single-assignment result with blocking wait and completion callbacks.

    With `settle`, the future holds `settle(result, exception)` of what completes it,
    or whatever that call raises (any BaseException): a transformation of the result
    without a second future (`then` makes one). It runs once, on the completing
    thread, before the future is done, its waiters wake or its callbacks run; a
    completion racing it gets InvalidStateError.
    """

    __slots__ = ("_lock", "_result", "_exception", "_callbacks", "_waiters", "_settle",
                 "__weakref__")

    def __init__(self, settle: Optional[Settle] = None) -> None:
        self._settle = settle
        self._lock = threading.Lock()
        self._result: Any = _PENDING
        self._exception: Optional[BaseException] = None
        self._callbacks: Optional[List[Callable[["Future"], None]]] = []
        # A held lock per waiting thread, released when the future completes: the
        # least a wake-up can cost (threading.Event runs a Condition in Python).
        self._waiters: Optional[List[Any]] = None

    def done(self) -> bool:
        """Whether the future has a result or an error; never blocks."""
        return self._callbacks is None

    def set_result(self, result: Any) -> None:
        """Complete the future with `result`, running its callbacks on this thread.

        InvalidStateError if it is already complete.
        """
        self._complete(result, None)

    def set_exception(self, exception: BaseException) -> None:
        """Complete the future with `exception`, which `wait` and `value` then raise.

        Callbacks run on this thread. TypeError unless `exception` is an exception;
        InvalidStateError if the future is already complete.
        """
        if not isinstance(exception, BaseException):
            raise TypeError(f"set_exception needs an exception, got {type(exception).__name__}")
        self._complete(None, exception)

    def _complete(self, result: Any, exception: Optional[BaseException]) -> None:
        settle = self._settle
        if settle is not None:
            with self._lock:  # claimed once: a second completion must not settle again
                settle, self._settle = self._settle, _SETTLED
            if settle is _SETTLED:
                raise InvalidStateError("future already completed")
            try:
                result, exception = settle(result, exception), None
            except BaseException as exc:  # noqa: BLE001 - what the future holds
                result, exception = None, exc
        with self._lock:
            if self._callbacks is None:
                raise InvalidStateError("future already completed")
            self._result, self._exception = result, exception
            callbacks, self._callbacks = self._callbacks, None
            waiters, self._waiters = self._waiters, None
        if waiters is not None:
            for waiter in waiters:
                waiter.release()
        for callback in callbacks:
            _run_callback(callback, self)

    def wait(self, timeout: Optional[float] = None) -> Any:
        """Block until done (at most `timeout` seconds); return the value or raise its error."""
        if self._callbacks is not None:
            refuse_waiting_on_io_loop()
            waiter = _allocate_lock()
            waiter.acquire()
            with self._lock:
                pending = self._callbacks is not None
                if pending:
                    if self._waiters is None:
                        self._waiters = [waiter]
                    else:
                        self._waiters.append(waiter)
            if pending:
                about_to_block()
                if not waiter.acquire(True, -1 if timeout is None else max(0.0, timeout)):
                    with self._lock:
                        if self._callbacks is not None:  # not completed meanwhile
                            self._waiters.remove(waiter)
                            raise FutureTimeoutError(
                                f"future not completed within {timeout:g}s")
        return self.value()

    def value(self) -> Any:
        """The value of a completed future; raises its error, or InvalidStateError if pending."""
        if self._callbacks is not None:
            raise InvalidStateError("value() of a future that has not completed")
        if self._exception is not None:
            raise self._exception
        return self._result

    def exception(self) -> Optional[BaseException]:
        """The exception of a completed future, or None."""
        if self._callbacks is not None:
            raise InvalidStateError("exception() of a future that has not completed")
        return self._exception

    def add_done_callback(self, callback: Callable[["Future"], None]) -> None:
        """Call `callback(self)` once done, in this thread's context variables of now (see
        the module docstring); at once, on this thread, if already done."""
        if self._callbacks is not None:
            kept = _in_current_context(callback)
            with self._lock:
                if self._callbacks is not None:
                    self._callbacks.append(kept)
                    return
        _run_callback(callback, self)

    def remove_done_callback(self, callback: Callable[["Future"], None]) -> None:
        """Forget `callback` (every callback equal to it) if it has not run; else nothing."""
        if self._callbacks is not None:
            with self._lock:
                if self._callbacks is not None:
                    self._callbacks[:] = [kept for kept in self._callbacks
                                          if kept != callback]

    def then(self, callback: Callable[["Future"], Any]) -> "Future":
        """A new future holding `callback(self)`'s return value, or the exception it raised."""
        chained = Future()

        def forward(done: Future) -> None:
            try:
                result = callback(done)
            except BaseException as exc:  # noqa: BLE001 - delivered to the chained future
                chained.set_exception(exc)
            else:
                chained.set_result(result)

        self.add_done_callback(forward)
        return chained

    def __reduce__(self) -> Any:
        # What torch says too ("Can not pickle torch.futures.Future"), with the way out;
        # otherwise the error would be about a lock inside.
        raise TypeError("a Future cannot be pickled: an RPC function that returns one "
                        "must be marked @async_execution, and its reply then carries the "
                        "Future's value")

    def __repr__(self) -> str:
        if self._callbacks is not None:
            state = "pending"
        elif self._exception is not None:
            state = f"failed {type(self._exception).__name__}"
        else:
            state = "done"
        return f"<Future {state}>"


class _InContext:
    """A callback with the context variables to run it in. Equal to the bare callback,
    so that `remove_done_callback` finds it."""

    __slots__ = ("callback", "context")

    def __init__(self, callback: Callable[[Future], None], context: Any) -> None:
        self.callback, self.context = callback, context

    def __call__(self, future: Future) -> None:
        self.context.run(self.callback, future)

    def __eq__(self, other: object) -> bool:
        return self.callback == (other.callback if isinstance(other, _InContext) else other)

    __hash__ = None  # type: ignore[assignment] - equal to its callback, not hashable as it

    def __repr__(self) -> str:
        return repr(self.callback)


def _in_current_context(callback: Callable[[Future], None]) -> Callable[[Future], None]:
    """`callback` bound to this thread's context variables of now; unchanged when none is
    set (outside served RPC calls and distributed-autograd contexts), so that it then
    costs one copy of an empty context."""
    context = copy_context()
    return _InContext(callback, context) if len(context) else callback


def _run_callback(callback: Callable[[Future], None], future: Future) -> None:
    try:
        callback(future)
    except BaseException as exc:  # noqa: BLE001 - a faulty callback must not break completion
        if escapes(exc):
            raise
        from ..process.log import get_logger

        get_logger(__name__).exception("future_callback_failed", callback=repr(callback))


def completed(result: Any = None) -> Future:
    """A future that already holds `result`."""
    future = Future()
    future.set_result(result)
    return future


def failed(exception: BaseException) -> Future:
    """A future that already holds `exception`."""
    future = Future()
    future.set_exception(exception)
    return future


def wait_all(futures: Iterable[Future], timeout: Optional[float] = None) -> list:
    """Wait for every future and return their values in order; the first error is raised.

    `timeout` bounds the whole wait, not each future (FutureTimeoutError naming it).
    """
    import time

    futures = list(futures)
    deadline = None if timeout is None else time.monotonic() + timeout
    _until_all_done_or_one_failed(futures, timeout)
    values = []
    for future in futures:
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            values.append(future.wait(remaining))
        except FutureTimeoutError:
            raise FutureTimeoutError(
                f"{len(futures)} futures not all completed within {timeout:g}s") from None
    return values


def _until_all_done_or_one_failed(futures: List[Future], timeout: Optional[float]) -> None:
    """Block until every one of `futures` is done or one of them fails (at most
    `timeout` seconds): one wake-up for them all, where waiting on each in turn wakes
    this thread once for each future still pending when its turn comes. Returns at
    once when one has failed already; leaves no callback behind."""
    pending = []
    for future in futures:
        if future._callbacks is None:
            if future._exception is not None:
                return
        else:
            pending.append(future)
    if not pending:
        return
    wake, count_lock = _allocate_lock(), _allocate_lock()
    wake.acquire()
    left = len(pending)  # completions to wait for; none once one failed

    def on_done(future: Future) -> None:
        nonlocal left
        with count_lock:
            if not left:  # woken already
                return
            left = 0 if future._exception is not None else left - 1
            now = not left
        if now:
            wake.release()

    for future in pending:
        future.add_done_callback(on_done)
    about_to_block()
    wake.acquire(True, -1 if timeout is None else max(0.0, timeout))
    for future in pending:
        future.remove_done_callback(on_done)


def failures_by(futures: Dict[K, Future], deadline: float) -> Dict[K, BaseException]:
    """Wait for every future until `deadline` (monotonic); the ones that failed or did
    not complete in time, with their exception, by key."""
    import time

    failures: Dict[K, BaseException] = {}
    for key, future in futures.items():
        try:
            future.wait(max(0.0, deadline - time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - handed to the caller
            failures[key] = exc
    return failures
