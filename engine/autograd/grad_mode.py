"""Whether new operations record a backward graph (per thread, as in torch).

``no_grad()``, ``enable_grad()`` and ``set_grad_enabled(mode)`` are context managers
and decorators (of generator functions too: each step of the body runs in the mode).
The flag is thread-local: an RPC handler thread starts with grad enabled whatever the
calling thread does.  Ops read ``grad_state.enabled`` once per call, and only when an
input requires grad.
"""
from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class _GradState(threading.local):
    enabled = True


grad_state = _GradState()


def is_grad_enabled() -> bool:
    """True when operations in this thread record a backward graph."""
    return grad_state.enabled


class set_grad_enabled:
    """Set grad mode to ``mode`` now; as a context manager, restore the old mode on exit."""

    def __init__(self, mode: bool) -> None:
        self._previous = grad_state.enabled
        grad_state.enabled = bool(mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        grad_state.enabled = self._previous

    def __call__(self, fn: F) -> F:
        mode = grad_state.enabled
        grad_state.enabled = self._previous  # used as a decorator: undo the eager set
        return _decorated(fn, lambda: set_grad_enabled(mode))


class _ModeScope:
    """A context manager / decorator that runs its body with grad mode set to ``_mode``."""

    _mode = True

    def __new__(cls, fn: Callable[..., Any] | None = None) -> Any:
        self = super().__new__(cls)
        if fn is not None:  # bare ``@no_grad``
            self.__init__()
            return self(fn)
        return self

    def __init__(self, fn: Callable[..., Any] | None = None) -> None:
        self._previous: list[bool] = []

    def __enter__(self) -> None:
        self._previous.append(grad_state.enabled)
        grad_state.enabled = self._mode

    def __exit__(self, *exc: object) -> None:
        grad_state.enabled = self._previous.pop()

    def __call__(self, fn: F) -> F:
        return _decorated(fn, type(self))


def _decorated(fn: F, scope: Callable[[], Any]) -> F:
    """`fn` run inside ``scope()``. A generator function runs each step of its body in
    the scope and hands the caller back its own mode between steps, as torch's
    decorators do (a plain wrapper would only cover making the generator)."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator(*args: Any, **kwargs: Any) -> Any:
            steps = fn(*args, **kwargs)
            resume, sent = steps.send, None
            while True:
                try:
                    with scope():
                        item = resume(sent)
                except StopIteration as stop:
                    return stop.value
                try:
                    resume, sent = steps.send, (yield item)
                except GeneratorExit:
                    with scope():
                        steps.close()
                    raise
                except BaseException as thrown:  # noqa: BLE001 - thrown into the body
                    resume, sent = steps.throw, thrown

        return generator  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with scope():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


class no_grad(_ModeScope):
    """Run the body without recording a backward graph."""

    _mode = False


class enable_grad(_ModeScope):
    """Run the body with graph recording on, even inside ``no_grad``."""

    _mode = True
