"""Grad mode: no_grad, enable_grad, set_grad_enabled, as context managers and decorators."""
from __future__ import annotations

import threading

import pytest

import engine

pytestmark = pytest.mark.timeout(60)


def test_ops_under_no_grad_record_no_graph():
    x = engine.ones(2, requires_grad=True)
    with engine.no_grad():
        y = x * 2
    assert y.grad_fn is None and not y.requires_grad
    assert engine.is_grad_enabled()


def test_enable_grad_inside_no_grad_records_again():
    x = engine.ones(2, requires_grad=True)
    with engine.no_grad():
        with engine.enable_grad():
            y = x * 2
        z = x * 2
    assert y.grad_fn is not None and z.grad_fn is None


def test_no_grad_works_as_a_decorator_with_and_without_parentheses():
    x = engine.ones(2, requires_grad=True)

    @engine.no_grad()
    def double(t):
        return t * 2

    @engine.no_grad
    def triple(t):
        return t * 3

    assert double(x).grad_fn is None and triple(x).grad_fn is None
    assert (x * 2).grad_fn is not None


def test_set_grad_enabled_switches_and_restores():
    with engine.set_grad_enabled(False):
        assert not engine.is_grad_enabled()
    assert engine.is_grad_enabled()


def test_grad_mode_is_per_thread():
    seen = []
    with engine.no_grad():
        thread = threading.Thread(target=lambda: seen.append(engine.is_grad_enabled()))
        thread.start()
        thread.join()
    assert seen == [True]


@pytest.mark.parametrize("decorator", [engine.no_grad, lambda: engine.no_grad,
                                       lambda: engine.set_grad_enabled(False)],
                         ids=["no_grad()", "no_grad", "set_grad_enabled(False)"])
def test_a_decorated_generator_runs_its_body_in_the_mode_and_the_caller_in_its_own(decorator):
    x = engine.ones(2, requires_grad=True)

    @decorator()
    def predictions(count):
        for _ in range(count):
            received = yield x * 2.0
            assert received is None or not engine.is_grad_enabled()
        return "done"

    items = predictions(3)
    first = next(items)
    assert not first.requires_grad  # the body ran without recording, as torch's
    assert engine.is_grad_enabled() and (x * 2.0).requires_grad  # the caller's mode
    assert not items.send("sent").requires_grad
    assert not next(items).requires_grad
    with pytest.raises(StopIteration) as stop:
        next(items)
    assert stop.value.value == "done" and engine.is_grad_enabled()
