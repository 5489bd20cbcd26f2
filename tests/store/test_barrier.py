"""A store barrier whose members name themselves opens without the members known lost,
and counts one lost after it arrived only once."""
from __future__ import annotations

import pytest

from store import HashStore, StoreTimeoutError
from store.barrier import arrive, barrier

pytestmark = pytest.mark.timeout(30)


def test_a_barrier_opens_without_a_member_lost_before_it_arrived():
    store = HashStore()
    arrive(store, "b", 3, member=0)
    barrier(store, "b", 3, 5.0, member=2, lost=lambda: {1})


def test_a_member_lost_after_it_arrived_is_counted_once():
    store = HashStore()
    arrive(store, "b", 3, member=1)  # then lost
    with pytest.raises(StoreTimeoutError):  # member 2 has not come: the barrier stays shut
        barrier(store, "b", 3, 0.6, member=0, lost=lambda: {1})
    barrier(store, "b", 3, 5.0, member=2, lost=lambda: {1})


def test_without_losses_every_member_is_waited_for():
    store = HashStore()
    with pytest.raises(StoreTimeoutError):
        barrier(store, "b", 2, 0.6, member=0, lost=set)
    barrier(store, "b", 2, 5.0, member=1, lost=set)


def test_a_barrier_that_times_out_says_how_many_arrived():
    store = HashStore()
    arrive(store, "b", 3, member=1)
    with pytest.raises(StoreTimeoutError, match="rpc shutdown: 2 of 3 workers arrived"):
        barrier(store, "b", 3, 0.3, "rpc shutdown", "workers", member=0, lost=set)
