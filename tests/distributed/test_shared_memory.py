"""The same-host shared region: its slots and marks in one process, then between ranks."""
import os

import numpy as np
import pytest

from actors.distributed.shared_memory import (SLOT_BYTES, SLOTS, Region, RegionOffer,
                                              SharedArray, SharedRegions)
from tests.distributed import scenarios
from tests.distributed.ranks import run_ranks

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def pair():
    """A region of a world of 3 and a second mapping of it, as a peer would have."""
    region, fd, nonce = Region.create(3)
    try:
        peer = Region.attach(RegionOffer(0, os.getpid(), fd, 3, nonce))
    finally:
        os.close(fd)
    yield region, peer
    peer.close()
    region.close()


def test_an_array_written_once_is_read_in_place_by_each_reader(pair):
    region, peer = pair
    array = np.arange(300_000, dtype=np.float64).reshape(1000, 300)
    shared = region.write(0, array, [1, 2])
    assert shared == SharedArray(0, 0, 3, "<f8", (1000, 300))
    np.testing.assert_array_equal(peer.view(shared), array)
    array[:] = -1  # the region holds its own copy
    assert peer.view(shared)[0, 1] == 1.0


def test_slots_are_free_again_only_once_every_reader_has_released_them(pair):
    region, peer = pair
    whole = np.zeros(SLOTS * SLOT_BYTES, np.uint8)
    first = region.write(0, whole, [1, 2])
    assert region.write(0, np.zeros(10, np.uint8), [1]) is None  # full
    peer.release(first, 1)
    assert region.write(0, np.zeros(10, np.uint8), [1]) is None  # rank 2 still reads it
    peer.release(first, 2)
    assert region.write(0, np.zeros(10, np.uint8), [1]).start == 0


def test_a_write_takes_the_first_run_of_free_slots_long_enough(pair):
    region, peer = pair
    slot = np.zeros(SLOT_BYTES, np.uint8)
    held = [region.write(0, slot, [1]) for _ in range(SLOTS)]
    for index in (3, 5, 6):
        peer.release(held[index], 1)
    assert region.write(0, np.zeros(2 * SLOT_BYTES, np.uint8), [1]).start == 5
    assert region.write(0, slot, [1]).start == 3
    assert region.write(0, slot, [1]) is None


@pytest.mark.parametrize("shared", [
    SharedArray(0, 30, 9, "<f4", (10,)),  # past the last slot
    SharedArray(0, -1, 1, "<f4", (10,)),
    SharedArray(0, 0, 1, "<f4", (SLOT_BYTES,)),  # longer than its slots
    SharedArray(0, 0, 1, "|O", (4,)),  # objects are never shared
])
def test_a_malformed_shared_array_is_refused_with_a_value_error(pair, shared):
    with pytest.raises((ValueError, TypeError)):
        pair[1].view(shared)


def test_a_descriptor_that_is_not_the_senders_region_is_refused():
    region, fd, nonce = Region.create(2)
    try:
        with pytest.raises(OSError, match="not the sender's region"):
            Region.attach(RegionOffer(0, os.getpid(), fd, 2, b"x" * 16))
        with pytest.raises(OSError):
            Region.attach(RegionOffer(0, os.getpid(), 0, 2, nonce))  # stdin, not a region
    finally:
        os.close(fd)
        region.close()


def test_a_peer_that_cannot_map_the_region_is_sent_frames_from_then_on():
    regions = SharedRegions(0)
    regions.set_peers(3, {1, 2})
    offers = []

    def share(rank, offer):
        offers.append(rank)
        if rank == 2:
            raise OSError("cannot open it")

    array = np.ones(1 << 20, np.float32)
    try:
        for _ in range(2):
            shared, rest = regions.write([1, 2], array, share)
            assert shared is not None and rest == [2]
        assert offers == [1, 2]  # asked once each
        assert regions.write([1], np.ones(10, np.float32), share) == (None, [1])  # small
    finally:
        regions.close()
    assert regions.write([1], array, share) == (None, [1])  # closed


def test_arrays_beyond_the_region_travel_as_frames_and_none_is_lost():
    received = run_ranks(2, scenarios.shared_flood, SLOTS + 8)[1]
    assert received == {tag: (float(tag), float(tag)) for tag in range(SLOTS + 8)}


def test_a_malformed_shared_array_fails_that_recv_and_the_rank_keeps_receiving():
    error, whole = run_ranks(2, scenarios.malformed_shared_array)[1]
    assert "does not fit a shared region" in error
    assert whole


def test_a_destroyed_group_leaves_no_mapping_descriptor_or_thread(tmp_path):
    for mapped_during, mapped_after, released, fds in run_ranks(
            2, scenarios.shared_resources, str(tmp_path / "store")):
        assert mapped_during >= 2  # its own region and the peer's
        assert mapped_after == 0
        assert released, fds
