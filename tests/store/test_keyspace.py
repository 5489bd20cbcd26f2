"""The store rules on plain data: every KeySpace rule, fast and without I/O."""
from __future__ import annotations

import pickle

import pytest

from store.keyspace import INTERNAL_PREFIX, KeySpace

pytestmark = pytest.mark.timeout(10)


@pytest.fixture
def space():
    return KeySpace()


@pytest.fixture
def changes(space):
    seen = []
    space.on_change = lambda key, old, new: seen.append((key, old, new))
    return seen


def test_get_returns_none_for_a_missing_key(space):
    assert space.get("nope") is None


def test_set_then_get_returns_the_value(space):
    space.set("k", b"v")
    assert space.get("k") == b"v"


def test_adds_of_1_2_3_leave_decimal_ascii_6(space):
    assert [space.add("c", n) for n in (1, 2, 3)] == [1, 3, 6]
    assert space.get("c") == b"6"


def test_add_counts_a_missing_key_as_zero_and_creates_it_even_for_zero(space):
    assert space.add("c", 0) == 0
    assert space.get("c") == b"0"


def test_add_accepts_negative_amounts_and_an_existing_decimal_value(space):
    space.set("c", b"10")
    assert space.add("c", -15) == -5
    assert space.get("c") == b"-5"


def test_add_to_a_non_integer_value_raises_value_error_naming_the_key(space):
    space.set("name", b"alice")
    with pytest.raises(ValueError, match="'name'"):
        space.add("name", 1)
    assert space.get("name") == b"alice"


def test_compare_set_on_a_present_equal_key_sets_and_returns_desired(space):
    space.set("k", b"old")
    assert space.compare_set("k", b"old", b"new") == b"new"
    assert space.get("k") == b"new"


def test_compare_set_on_a_present_different_key_returns_the_current_value(space):
    space.set("k", b"current")
    assert space.compare_set("k", b"other", b"new") == b"current"
    assert space.get("k") == b"current"


def test_compare_set_on_a_missing_key_with_empty_expected_sets_desired(space):
    assert space.compare_set("k", b"", b"new") == b"new"
    assert space.get("k") == b"new"


def test_compare_set_on_a_missing_key_with_nonempty_expected_returns_expected_and_sets_nothing(
    space, changes
):
    assert space.compare_set("k", b"exp", b"new") == b"exp"
    assert space.get("k") is None
    assert changes == []


def test_compare_set_with_empty_expected_on_an_empty_value_sets_it(space):
    space.set("k", b"")
    assert space.compare_set("k", b"", b"x") == b"x"


def test_delete_reports_whether_the_key_existed(space):
    space.set("k", b"v")
    assert space.delete("k") is True
    assert space.delete("k") is False
    assert space.get("k") is None


def test_check_and_missing_look_at_every_key(space):
    space.set("a", b"1")
    assert space.check(["a"]) and space.check([])
    assert not space.check(["a", "b"])
    assert space.missing(["b", "a", "c"]) == ["b", "c"]


def test_num_keys_counts_user_keys_only(space):
    space.set("a", b"1")
    space.add("b", 1)
    space.set(INTERNAL_PREFIX + "bookkeeping", b"x")
    space.queue_push("q", b"item")
    assert space.num_keys() == 2
    space.delete(INTERNAL_PREFIX + "bookkeeping")
    space.delete("a")
    assert space.num_keys() == 1


def test_multi_set_sets_each_key_in_order(space, changes):
    space.multi_set(["a", "b", "a"], [b"1", b"2", b"3"])
    assert (space.get("a"), space.get("b")) == (b"3", b"2")
    assert [c[0] for c in changes] == ["a", "b", "a"]


def test_append_creates_then_extends_the_value(space):
    space.append("log", b"ab")
    space.append("log", b"cd")
    assert space.get("log") == b"abcd"


def test_queues_are_fifo_and_pop_returns_none_when_empty(space):
    for item in (b"1", b"2", b"3"):
        space.queue_push("q", item)
    assert space.queue_len("q") == 3
    assert [space.queue_pop("q") for _ in range(3)] == [b"1", b"2", b"3"]
    assert space.queue_pop("q") is None
    assert space.queue_len("q") == 0


def test_queues_are_a_namespace_apart_from_plain_keys(space):
    space.queue_push("x", b"queued")
    assert space.get("x") is None and not space.check(["x"])
    space.set("x", b"plain")
    assert space.delete("x")
    assert space.queue_pop("x") == b"queued"


def test_on_change_reports_creation_update_and_deletion(space, changes):
    space.set("k", b"1")
    space.set("k", b"2")
    space.delete("k")
    assert changes == [("k", None, b"1"), ("k", b"1", b"2"), ("k", b"2", None)]


def test_on_change_reports_every_kind_of_write(space, changes):
    space.add("c", 5)
    space.compare_set("c", b"5", b"6")
    space.append("c", b"0")
    assert changes == [("c", None, b"5"), ("c", b"5", b"6"), ("c", b"6", b"60")]


def test_on_change_fires_even_when_the_bytes_do_not_change(space, changes):
    space.set("k", b"same")
    space.set("k", b"same")
    assert len(changes) == 2


def test_on_queue_push_names_the_queue(space):
    pushed = []
    space.on_queue_push = pushed.append
    space.queue_push("q", b"x")
    assert pushed == ["q"]


def test_version_moves_on_every_mutation_and_not_on_reads_or_failed_ops(space):
    v = space.version
    space.get("k"), space.check(["k"]), space.queue_pop("q"), space.delete("k")
    space.compare_set("k", b"x", b"y")
    assert space.version == v
    space.set("k", b"1")
    space.queue_push("q", b"1")
    space.queue_pop("q")
    assert space.version == v + 3


def test_state_round_trips_through_pickle(space):
    space.set("a", b"1")
    space.set(INTERNAL_PREFIX + "x", b"2")
    space.queue_push("q", b"i1")
    space.queue_push("q", b"i2")
    copy = KeySpace.from_state(pickle.loads(pickle.dumps(space.to_state())))
    assert copy.get("a") == b"1"
    assert copy.num_keys() == 1
    assert [copy.queue_pop("q"), copy.queue_pop("q")] == [b"i1", b"i2"]
