"""Owed releases are flushed by a timer of the RPC world, scheduled once per batch, and
scheduled again when a world went down with its timer."""
import pytest

import actors
from engine.dist_autograd.release import FLUSH_INTERVAL, OwedReleases

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def timers(monkeypatch):
    """The flushes scheduled with `actors.run_on_pool_later`, kept here instead of run."""
    scheduled = []
    monkeypatch.setattr(actors, "run_on_pool_later",
                        lambda delay, fn: scheduled.append((delay, fn)))
    return scheduled


@pytest.fixture
def sent(monkeypatch):
    messages = []
    monkeypatch.setattr(OwedReleases, "_send",
                        staticmethod(lambda rank, ids: messages.append((rank, ids))))
    return messages


def test_releases_owed_together_share_one_flush_that_sends_one_message_per_worker(
        timers, sent):
    owed = OwedReleases(clock=lambda: 0.0)
    owed.add(1, 10)
    owed.add(2, 20)
    owed.add(1, 11)
    assert [delay for delay, _ in timers] == [FLUSH_INTERVAL]
    timers[0][1]()
    assert sent == [(1, [10, 11]), (2, [20])]
    assert owed.peek(1) is None
    owed.add(3, 30)
    assert len(timers) == 2


def test_a_flush_that_never_ran_is_replaced_by_the_next_release(timers, sent):
    now = [0.0]
    owed = OwedReleases(clock=lambda: now[0])
    owed.add(1, 10)
    now[0] = 1.5 * FLUSH_INTERVAL  # due, but not yet late
    owed.add(1, 11)
    assert len(timers) == 1
    now[0] = 3 * FLUSH_INTERVAL  # its world shut down before it ran
    owed.add(1, 12)
    assert len(timers) == 2
    timers[1][1]()
    assert sent == [(1, [10, 11, 12])]


def test_a_release_owed_while_rpc_stops_is_kept_for_the_next_flush(monkeypatch, sent):
    def stopped(delay, fn):
        raise actors.RpcNotInitializedError("RPC is not running")

    monkeypatch.setattr(actors, "run_on_pool_later", stopped)
    owed = OwedReleases(clock=lambda: 0.0)
    owed.add(1, 10)
    scheduled = []
    monkeypatch.setattr(actors, "run_on_pool_later",
                        lambda delay, fn: scheduled.append(fn))
    owed.add(1, 11)
    scheduled[0]()
    assert sent == [(1, [10, 11])]
