"""Who a destination names in a world's directory: plain data, no processes."""
import enum

import pytest

from actors.rpc.directory import WorkerDirectory, WorkerInfo

pytestmark = pytest.mark.timeout(10)


class Rank(enum.IntEnum):
    SECOND = 1


@pytest.fixture
def directory():
    return WorkerDirectory(["a", "b"], ["tcp://127.0.0.1:1", "tcp://127.0.0.1:2"], ["", ""])


def test_a_name_a_rank_a_rank_of_an_int_type_and_a_worker_info_name_the_same_worker(directory):
    second = WorkerInfo("b", 1)
    assert {directory.resolve(to) for to in ("b", 1, Rank.SECOND, second)} == {second}
    assert directory.resolve(WorkerInfo("a", 0)) == WorkerInfo("a", 0)


@pytest.mark.parametrize("to", ["c", 2, -1, WorkerInfo("b", 0), WorkerInfo("c", 1)])
def test_what_names_no_worker_is_a_value_error_listing_the_workers(directory, to):
    with pytest.raises(ValueError, match=r"unknown worker .*'a' \(rank 0\), 'b' \(rank 1\)"):
        directory.resolve(to)


@pytest.mark.parametrize("to", [True, 1.0, ("b", 1), ["b"], None])
def test_what_is_not_a_name_rank_or_worker_info_is_refused(directory, to):
    with pytest.raises((TypeError, ValueError)):
        directory.resolve(to)
