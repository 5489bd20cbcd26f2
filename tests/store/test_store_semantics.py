"""One conformance suite: every Store operation of DESIGN §2, against every store."""
from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from store import PrefixStore, QueueEmptyError, StoreTimeoutError

from tests import limits
from tests.leftovers import resources
from tests.limits import within
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

SHORT = 0.2  # timeout for operations that are meant to time out
DELIVERY = 10.0  # bound on waiting for a watch callback or a woken thread


def expect_timeout(operation, keys, timeout=SHORT):
    """Check a StoreTimeoutError names these keys and timeout, and came on time."""

    class Check:
        def __enter__(self):
            self.start = time.monotonic()
            self.raises = pytest.raises(StoreTimeoutError)
            self.info = self.raises.__enter__()
            return self.info

        def __exit__(self, *exc):
            swallowed = self.raises.__exit__(*exc)
            elapsed = time.monotonic() - self.start
            err = self.info.value
            assert isinstance(err, TimeoutError)
            assert err.keys == keys, str(err)
            assert err.timeout == pytest.approx(timeout)
            assert all(k in str(err) for k in keys)
            assert f"{timeout:g}" in str(err)
            assert timeout * 0.9 <= elapsed < timeout + 5.0
            return swallowed

    return Check()


# -- set / get ------------------------------------------------------------------------


def test_set_then_get_returns_bytes(store):
    store.set("k", b"\x00\xffvalue")
    assert store.get("k") == b"\x00\xffvalue"


def test_a_str_value_is_stored_as_utf8(store):
    store.set("k", "héllo")
    assert store.get("k") == "héllo".encode()


def test_set_overwrites(store):
    store.set("k", b"1")
    store.set("k", b"2")
    assert store.get("k") == b"2"


def test_get_of_a_missing_key_times_out_naming_key_and_timeout(store):
    store.set_timeout(SHORT)
    with expect_timeout("get", ["missing"]):
        store.get("missing")


@pytest.mark.slow
def test_a_timed_out_get_is_caught_by_torchs_name_dist_store_error(store):
    import actors.distributed as dist
    import store as stores

    store.set_timeout(SHORT)
    for name in (stores.DistStoreError, dist.DistStoreError, dist.DistError, RuntimeError):
        with pytest.raises(name):
            store.get("missing")


def test_set_timeout_accepts_a_timedelta_and_timeout_is_one_as_in_torch(store):
    store.set_timeout(timedelta(milliseconds=200))
    assert isinstance(store.timeout, timedelta)
    assert store.timeout.total_seconds() == pytest.approx(SHORT)
    store.set_timeout(1.5)
    assert store.timeout == timedelta(seconds=1.5)
    store.set_timeout(timedelta(milliseconds=200))
    with expect_timeout("get", ["missing"]):
        store.get("missing")


@pytest.mark.parametrize("operation, call", [
    ("wait", lambda s: s.wait(["missing"], timeout=0)),
    ("get", lambda s: (s.set_timeout(0), s.get("missing"))),
    ("multi_get", lambda s: (s.set_timeout(timedelta(0)), s.multi_get(["missing"]))),
    ("queue_pop", lambda s: s.queue_pop("missing", timeout=0)),
])
def test_a_timeout_of_0_checks_once(store, operation, call):
    with expect_timeout(operation, ["missing"], timeout=0):
        call(store)


def test_a_thread_that_sets_a_key_wakes_a_blocked_get(store):
    setter = threading.Timer(0.1, store.set, ("late", b"here"))
    setter.start()
    try:
        start = time.monotonic()
        assert store.get("late") == b"here"
        assert time.monotonic() - start < DELIVERY
    finally:
        setter.cancel()
        setter.join(DELIVERY)


# -- add / compare_set / delete / check / num_keys -------------------------------------


def test_adds_of_1_2_3_give_b6(store):
    assert [store.add("c", n) for n in (1, 2, 3)] == [1, 3, 6]
    assert store.get("c") == b"6"


def test_add_counts_a_missing_key_as_zero_and_allows_negative_amounts(store):
    assert store.add("c", -4) == -4
    assert store.add("c", 0) == -4
    assert store.get("c") == b"-4"


def test_add_continues_a_counter_set_as_decimal_text(store):
    store.set("c", "41")
    assert store.add("c", 1) == 42


def test_a_counter_stays_a_signed_64_bit_integer_and_an_add_past_it_changes_nothing(store):
    # torch's counter is an int64 that wraps around; here the add that would wrap fails
    assert store.add("c", 2**63 - 1) == 2**63 - 1
    with pytest.raises(OverflowError, match="key '(.*/)?c'"):
        store.add("c", 1)
    assert store.add("c", 0) == 2**63 - 1
    with pytest.raises(OverflowError):
        store.add("d", 2**63)
    assert not store.check(["d"])


def test_add_to_a_non_integer_value_raises_value_error_naming_the_key(store):
    store.set("name", b"alice")
    with pytest.raises(ValueError, match="name"):
        store.add("name", 1)


def test_compare_set_on_a_present_equal_key_sets_and_returns_desired(store):
    store.set("k", b"old")
    assert store.compare_set("k", b"old", b"new") == b"new"
    assert store.get("k") == b"new"


def test_compare_set_on_a_present_different_key_returns_current_and_keeps_it(store):
    store.set("k", b"current")
    assert store.compare_set("k", b"other", b"new") == b"current"
    assert store.get("k") == b"current"


def test_compare_set_on_a_missing_key_with_empty_expected_sets_desired(store):
    assert store.compare_set("k", b"", "new") == b"new"
    assert store.get("k") == b"new"


def test_compare_set_on_a_missing_key_with_other_expected_returns_expected_sets_nothing(store):
    assert store.compare_set("k", "exp", b"new") == b"exp"
    assert not store.check(["k"])


def test_delete_key_reports_whether_the_key_existed(store):
    store.set("k", b"v")
    assert store.delete_key("k") is True
    assert store.delete_key("k") is False
    assert not store.check(["k"])


def test_check_is_true_only_when_every_key_exists_and_never_blocks(store):
    store.set("a", b"1")
    start = time.monotonic()
    assert store.check(["a"]) is True
    assert store.check(["a", "b"]) is False
    assert store.check([]) is True
    within(start, limits.AT_ONCE, "at once")


def test_num_keys_counts_only_the_users_plain_keys(store):
    assert store.num_keys() == 0
    store.set("a", b"1")
    store.add("b", 1)
    store.queue_push("q", b"item")
    assert store.num_keys() == 2
    store.delete_key("a")
    assert store.num_keys() == 1


# -- wait / multi_get / multi_set / append ------------------------------------------------


def test_wait_returns_when_every_key_exists(store):
    store.multi_set(["a", "b"], [b"1", b"2"])
    store.wait(["a", "b"], timeout=SHORT)


def test_wait_times_out_naming_only_the_missing_keys(store):
    store.set("present", b"1")
    with expect_timeout("wait", ["absent"]):
        store.wait(["present", "absent"], timeout=SHORT)


def test_wait_accepts_a_timedelta(store):
    with expect_timeout("wait", ["absent"]):
        store.wait(["absent"], timeout=timedelta(milliseconds=200))


def test_wait_without_timeout_uses_the_store_timeout(store):
    store.set_timeout(SHORT)
    with expect_timeout("wait", ["absent"]):
        store.wait(["absent"])


def test_multi_get_returns_values_in_key_order(store):
    store.multi_set(["a", "b", "c"], [b"1", "2", b"3"])
    assert store.multi_get(["c", "a", "b"]) == [b"3", b"1", b"2"]


def test_multi_get_times_out_naming_the_missing_keys(store):
    store.set("a", b"1")
    store.set_timeout(SHORT)
    with expect_timeout("multi_get", ["b"]):
        store.multi_get(["a", "b"])


def test_multi_set_with_mismatched_lengths_raises_value_error(store):
    with pytest.raises(ValueError):
        store.multi_set(["a", "b"], [b"1"])
    assert not store.check(["a"])


def test_append_creates_then_extends_a_value(store):
    store.append("log", b"ab")
    store.append("log", "cd")
    assert store.get("log") == b"abcd"


# -- queues ------------------------------------------------------------------------------


def test_queue_is_fifo_and_tracks_its_length(store):
    for item in (b"1", "2", b"3"):
        store.queue_push("q", item)
    assert store.queue_len("q") == 3
    assert [store.queue_pop("q") for _ in range(3)] == [b"1", b"2", b"3"]
    assert store.queue_len("q") == 0


def test_non_blocking_pop_of_an_empty_queue_raises_queue_empty(store):
    with pytest.raises(QueueEmptyError):
        store.queue_pop("q", block=False)


def test_blocking_pop_of_an_empty_queue_times_out_naming_the_queue(store):
    with expect_timeout("queue_pop", ["q"]):
        store.queue_pop("q", timeout=SHORT)


def test_a_push_from_another_thread_wakes_a_blocked_pop(store):
    pusher = threading.Timer(0.1, store.queue_push, ("q", b"item"))
    pusher.start()
    try:
        assert store.queue_pop("q", timeout=DELIVERY) == b"item"
    finally:
        pusher.cancel()
        pusher.join(DELIVERY)


def test_queues_and_plain_keys_are_separate_namespaces(store):
    store.queue_push("name", b"queued")
    assert not store.check(["name"])
    store.set("name", b"plain")
    assert store.delete_key("name")
    assert store.queue_len("name") == 1
    assert store.queue_pop("name", block=False) == b"queued"


def test_a_queue_holds_only_its_own_items_whatever_the_names_share(store):
    store.queue_push("a/b", b"inner")
    store.queue_push("a%2Fb", b"escaped")
    assert store.queue_len("a") == 0
    with pytest.raises(QueueEmptyError):
        store.queue_pop("a", block=False)
    with expect_timeout("queue_pop", ["a"]):
        store.queue_pop("a", timeout=SHORT)
    assert store.queue_pop("a/b", block=False) == b"inner"
    assert store.queue_pop("a%2Fb", block=False) == b"escaped"


# -- argument checks -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda s: s.set(1, b"v"), "key"),
        (lambda s: s.get(bytearray(b"k")), "key"),
        (lambda s: s.add(None, 1), "key"),
        (lambda s: s.compare_set(1, b"", b"v"), "key"),
        (lambda s: s.delete_key(1), "key"),
        (lambda s: s.check([1]), "keys"),
        (lambda s: s.check("abc"), "keys"),
        (lambda s: s.wait([1], timeout=SHORT), "keys"),
        (lambda s: s.multi_get([1]), "keys"),
        (lambda s: s.multi_set([1], [b"v"]), "keys"),
        (lambda s: s.queue_push(1, b"v"), "key"),
        (lambda s: s.watch_key(1, lambda old, new: None), "key"),
    ],
)
def test_a_non_str_key_raises_type_error_naming_the_argument(store, call, argument):
    with pytest.raises(TypeError, match=argument):
        call(store)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda s: s.set("k", 1), "value"),
        (lambda s: s.set("k", None), "value"),
        (lambda s: s.append("k", 1.5), "value"),
        (lambda s: s.queue_push("k", object()), "value"),
        (lambda s: s.compare_set("k", 1, b"v"), "expected"),
        (lambda s: s.compare_set("k", b"", 2), "desired"),
        (lambda s: s.multi_set(["k"], [3]), "values"),
        (lambda s: s.add("k", "1"), "amount"),
        (lambda s: s.set_timeout("soon"), "timeout"),
    ],
)
def test_a_value_of_the_wrong_type_raises_type_error_naming_the_argument(store, call, argument):
    with pytest.raises(TypeError, match=argument):
        call(store)


# -- watch_key ------------------------------------------------------------------------------


class Recorder:
    """Collects watch callbacks; `next()` waits for the next one with a deadline."""

    def __init__(self):
        self.events = []
        self.threads = set()
        self._cond = threading.Condition()

    def __call__(self, old, new):
        with self._cond:
            self.events.append((old, new))
            self.threads.add(threading.get_ident())
            self._cond.notify_all()

    def wait_for(self, count: int):
        with self._cond:
            ok = self._cond.wait_for(lambda: len(self.events) >= count, timeout=DELIVERY)
        assert ok, f"got {self.events} within {DELIVERY}s, expected {count} callbacks"
        return self.events[count - 1]


def test_watch_key_reports_creation_change_and_deletion_on_another_thread(store):
    rec = Recorder()
    store.watch_key("w", rec)
    # One change at a time: polling stores report the net change between two polls.
    store.set("w", b"1")
    assert rec.wait_for(1) == (None, b"1")
    store.set("w", b"2")
    assert rec.wait_for(2) == (b"1", b"2")
    store.delete_key("w")
    assert rec.wait_for(3) == (b"2", None)
    assert threading.get_ident() not in rec.threads


def test_watch_key_reports_adds_and_ignores_other_keys(store):
    rec = Recorder()
    store.watch_key("counter", rec)
    store.set("other", b"x")
    store.add("counter", 5)
    assert rec.wait_for(1) == (None, b"5")
    assert rec.events == [(None, b"5")]


def test_every_callback_of_a_key_is_called(store):
    first, second = Recorder(), Recorder()
    store.watch_key("w", first)
    store.watch_key("w", second)
    store.set("w", b"v")
    assert first.wait_for(1) == second.wait_for(1) == (None, b"v")


def test_a_failing_callback_does_not_stop_later_deliveries(store):
    def boom(old, new):
        raise RuntimeError("callback bug")

    rec = Recorder()
    store.watch_key("w", boom)
    store.watch_key("w", rec)
    store.set("w", b"1")
    assert rec.wait_for(1) == (None, b"1")
    store.set("w", b"2")
    assert rec.wait_for(2) == (b"1", b"2")


def test_a_callback_may_use_the_store(store):
    done = threading.Event()

    def copy(old, new):
        store.set("copy", new)
        done.set()

    store.watch_key("w", copy)
    store.set("w", b"payload")
    assert done.wait(DELIVERY)
    assert store.get("copy") == b"payload"


def test_list_keys_gives_the_user_keys_sorted_as_torchs_list_keys(store):
    store.set("b", b"1")
    store.add("a", 1)
    store.queue_push("q", b"x")  # a queue is not a key
    assert store.list_keys() == ["a", "b"]
    store.delete_key("a")
    assert store.list_keys() == ["b"]


def test_bytes_keys_are_taken_as_utf8_as_torch_takes_them(store):
    store.set(b"k\xc3\xa9", b"v")
    assert store.get("ké") == b"v"
    assert store.check([b"k\xc3\xa9"])
    with pytest.raises(TypeError):
        store.set(b"\xff", b"v")


def test_a_clone_reaches_the_same_data_as_torchs_clone(store):
    clone = store.clone()
    try:
        clone.set("from_clone", b"1")
        assert store.get("from_clone") == b"1"
        store.set("from_store", b"2")
        assert clone.get("from_store") == b"2"
        assert store.has_extended_api() and clone.has_extended_api()
    finally:
        if clone is not store:
            clone.close()
    store.set("after", b"3")  # closing the clone left the original open
    assert store.get("after") == b"3"


def test_closing_a_prefix_stores_clone_closes_the_client_it_made(tcp_master):
    keys = PrefixStore("job", tcp_master)
    before = resources()
    clone = keys.clone()
    clone.set_ephemeral("alive", b"1")  # owned by the clone's own session
    clone.close()
    assert wait_until(lambda: not keys.check(["alive"]))  # the session ended with it
    assert wait_until(lambda: not resources() - before), resources() - before
    keys.close()
    tcp_master.set("after", b"1")  # closing the prefix store left its store open
    assert tcp_master.get("after") == b"1"
