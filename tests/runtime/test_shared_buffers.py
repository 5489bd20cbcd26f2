"""Same-host shared memory for large buffers: lending, taking, reuse and refusals.

One process plays both sides (it maps its own blocks through /proc/self's pid), so
these run fast; tests/rpc/test_shared_memory_calls.py has the processes.
"""
from __future__ import annotations

import os
import struct
import tempfile

import numpy as np
import pytest

from actors.runtime.errors import ProtocolError
from actors.runtime.protocol import JSON, SAME_HOST, SHARED, Kind, envelope, serialization
from actors.runtime.protocol import shared_buffers
from actors.runtime.protocol.shared_buffers import DESCRIPTOR, SHARED_MIN, SharedBlocks

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("own_blocks"),
              pytest.mark.skipif(not shared_buffers.enabled(), reason="no memfd or /proc, or off")]

MIB = 1 << 20


@pytest.fixture
def blocks():
    blocks = SharedBlocks()
    yield blocks
    blocks.close()


def _bytes(n: int, seed: int = 0) -> memoryview:
    return memoryview(np.random.default_rng(seed).integers(0, 255, n, dtype=np.uint8)).cast("B")


def _fd(descriptor: bytes) -> int:
    return DESCRIPTOR.unpack(descriptor)[1]


def test_a_lent_buffer_comes_back_equal_and_its_block_is_free_again(blocks):
    sent = [_bytes(3 * MIB, 1), _bytes(5 * MIB + 7, 2)]
    descriptors = blocks.lend(sent)
    assert [len(d) for d in descriptors] == [DESCRIPTOR.size] * 2
    assert blocks.unread() == 2
    taken = [blocks.take(d) for d in descriptors]
    assert [bytes(t) for t in taken] == [bytes(s) for s in sent]
    assert blocks.unread() == 0


def test_a_read_block_is_written_again_and_an_unread_one_is_not(blocks):
    first = blocks.lend([_bytes(2 * MIB)])[0]
    second = blocks.lend([_bytes(2 * MIB)])[0]
    assert _fd(second) != _fd(first)  # the first is still unread
    blocks.take(first)
    third = blocks.lend([_bytes(MIB, 3)])[0]
    assert _fd(third) == _fd(first)
    assert bytes(blocks.take(third)) == bytes(_bytes(MIB, 3))


def test_a_buffer_is_taken_once(blocks):
    descriptor = blocks.lend([_bytes(MIB)])[0]
    blocks.take(descriptor)
    with pytest.raises(ProtocolError, match="already read"):
        blocks.take(descriptor)


def test_a_stale_unread_block_is_closed_for_room_never_written_again():
    blocks = SharedBlocks(limit=MIB, stale_after=0.0)
    try:
        late = blocks.lend([_bytes(MIB, 1)])[0]
        again = blocks.lend([_bytes(MIB, 2)])[0]  # the stale block made room
        with pytest.raises(ProtocolError):  # its late reader never gets another's data
            blocks.take(late)
        assert bytes(blocks.take(again)) == bytes(_bytes(MIB, 2))
    finally:
        blocks.close()


def test_a_dropped_message_gives_its_blocks_back_and_a_failed_one_frees_the_rest():
    assert shared_buffers.BLOCKS.unread() == 0
    frames = envelope.encode(Kind.RPC_CALL, 7, (np.ones(SHARED_MIN // 8), np.ones(SHARED_MIN // 8)),
                             SAME_HOST)
    assert shared_buffers.BLOCKS.unread() == 2
    envelope.discard(frames)
    assert shared_buffers.BLOCKS.unread() == 0
    frames = envelope.encode(Kind.RPC_CALL, 8, (np.ones(SHARED_MIN // 8), np.ones(SHARED_MIN // 8)),
                             SAME_HOST)
    second, frames[3] = frames[3], bytes(DESCRIPTOR.size)  # names nothing now
    with pytest.raises(ProtocolError, match="cannot map"):
        envelope.read_payload(envelope.read_header(frames), frames)
    assert shared_buffers.BLOCKS.unread() == 1  # the first one given back
    shared_buffers.discard([second])
    assert shared_buffers.BLOCKS.unread() == 0


def test_more_buffers_than_a_message_may_lend_travel_as_frames():
    arrays = [np.ones(SHARED_MIN // 8) for _ in range(shared_buffers.MAX_LENT + 1)]
    frames = envelope.encode(Kind.RPC_CALL, 7, arrays, SAME_HOST)
    assert not envelope.read_header(frames).flags & SHARED


def test_a_memfd_of_the_right_name_but_not_sealed_is_refused(blocks):
    import secrets

    fd = os.memfd_create("actorgrad-buffers")
    try:
        os.ftruncate(fd, 2 * MIB)
        with pytest.raises(ProtocolError, match="not a shared-buffer block"):
            blocks.take(DESCRIPTOR.pack(os.getpid(), fd, secrets.token_bytes(16), 1, 10))
    finally:
        os.close(fd)


def test_a_forked_child_starts_with_no_blocks_of_its_parent():
    descriptor = shared_buffers.BLOCKS.lend([_bytes(MIB)])[0]
    pid = os.fork()
    if pid == 0:  # the child: a fresh table, and the parent's block is left alone
        os._exit(0 if shared_buffers.BLOCKS.unread() == 0 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert bytes(shared_buffers.BLOCKS.take(descriptor)) == bytes(_bytes(MIB))


def test_past_the_limit_free_blocks_make_room_and_unread_ones_are_kept():
    blocks = SharedBlocks(limit=4 * MIB)
    try:
        assert blocks.lend([_bytes(3 * MIB), _bytes(2 * MIB)]) is None
        assert blocks.unread() == 0
        kept = blocks.lend([_bytes(4 * MIB, 4)])[0]  # the free 3 MiB block made room
        assert blocks.lend([_bytes(MIB)]) is None  # the one block is unread
        assert bytes(blocks.take(kept)) == bytes(_bytes(4 * MIB, 4))
    finally:
        blocks.close()


def test_descriptors_that_name_no_block_of_the_sender_are_refused(blocks):
    descriptor = blocks.lend([_bytes(MIB)])[0]
    pid, fd, nonce, generation, length = DESCRIPTOR.unpack(descriptor)
    with pytest.raises(ProtocolError, match="malformed shared-buffer descriptor"):
        blocks.take(descriptor[:-1])
    with pytest.raises(ProtocolError, match="not the sender's"):
        blocks.take(DESCRIPTOR.pack(pid, fd, b"x" * 16, generation, length))
    with pytest.raises(ProtocolError, match="does not fit"):
        blocks.take(DESCRIPTOR.pack(pid, fd, nonce, generation, 1 << 40))
    with tempfile.TemporaryFile() as other:  # a descriptor of this process, not a block
        with pytest.raises(ProtocolError, match="not a shared-buffer block"):
            blocks.take(DESCRIPTOR.pack(pid, other.fileno(), nonce, generation, length))
    with pytest.raises(ProtocolError, match="cannot map"):
        blocks.take(DESCRIPTOR.pack(pid, 1 << 20, nonce, generation, length))
    assert bytes(blocks.take(descriptor)) == bytes(_bytes(MIB))  # the real one still reads


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_block_holds_one_descriptor_its_reader_none_and_release_gives_it_back(blocks):
    before = _open_fds()
    descriptors = blocks.lend([_bytes(MIB), _bytes(MIB)])
    assert _open_fds() == before + 2
    blocks.take(descriptors[0])
    assert _open_fds() == before + 2 and blocks.mapped() == 1
    blocks.release()
    assert _open_fds() == before + 1 and blocks.mapped() == 0  # the unread one stays
    blocks.take(descriptors[1])
    blocks.release()
    assert _open_fds() == before


def test_a_same_host_message_carries_large_buffers_as_descriptors():
    array = np.arange(SHARED_MIN // 4, dtype=np.float32)
    frames = envelope.encode(Kind.RPC_CALL, 7, ("f", array), SAME_HOST)
    header = envelope.read_header(frames)
    assert header.flags & SHARED and [len(f) for f in frames[2:]] == [DESCRIPTOR.size]
    kind, back = envelope.read_payload(header, frames)
    assert np.array_equal(back, array) and back.flags.writeable


@pytest.mark.parametrize("flags, array", [
    (SAME_HOST, np.zeros(SHARED_MIN // 16)),  # small: frames are as quick
    (SAME_HOST | JSON, np.zeros(SHARED_MIN // 4, np.float32)),  # JSON peers get frames
    (0, np.zeros(SHARED_MIN // 4, np.float32)),  # not on this host
])
def test_other_messages_carry_their_buffers_as_frames(flags, array):
    frames = envelope.encode(Kind.RPC_CALL, 7, {"x": array} if flags & JSON else array, flags)
    header = envelope.read_header(frames)
    assert not header.flags & SHARED and sum(len(f) for f in frames[2:]) == array.nbytes


def test_safe_mode_refuses_a_shared_message_before_reading_its_memory():
    frames = envelope.encode(Kind.RPC_CALL, 7, np.ones(SHARED_MIN // 4, np.float32), SAME_HOST)
    serialization.allow_pickle(False)
    try:
        with pytest.raises(ProtocolError, match="only with a pickle"):
            envelope.read_payload(envelope.read_header(frames), frames)
    finally:
        serialization.allow_pickle(True)
    assert shared_buffers.BLOCKS.unread() == 1  # untouched: still the reader's to take
    envelope.read_payload(envelope.read_header(frames), frames)
    assert shared_buffers.BLOCKS.unread() == 0


def test_a_descriptor_frame_is_a_fixed_size_struct():
    assert DESCRIPTOR.size == struct.calcsize("<II16sQQ") == 40


def test_drain_waits_for_the_reader_and_gives_up_at_its_deadline(blocks):
    import threading
    import time

    descriptor = blocks.lend([_bytes(MIB)])[0]
    assert blocks.drain(time.monotonic()) == 1  # nobody read it: given up at once
    reader = threading.Thread(target=blocks.take, args=(descriptor,))
    reader.start()
    try:
        assert blocks.drain(time.monotonic() + 30) == 0
    finally:
        reader.join(30)


def test_a_block_mapped_already_is_read_after_its_owner_closed_it():
    owner, other, reader = SharedBlocks(), SharedBlocks(), SharedBlocks()
    try:
        reader.take(owner.lend([_bytes(MIB, 1)])[0])  # mapped by the reader now
        again = owner.lend([_bytes(MIB, 2)])[0]
        owner.close()  # e.g. closed as stale while the message was on its way
        reader.take(other.lend([_bytes(MIB, 3)])[0])  # a block not mapped yet
        assert bytes(reader.take(again)) == bytes(_bytes(MIB, 2))
    finally:
        for blocks in (owner, other, reader):
            blocks.close()


def test_an_unread_mapping_of_a_closed_block_is_dropped_once_stale():
    owner, other, reader = SharedBlocks(), SharedBlocks(), SharedBlocks(stale_after=0.0)
    try:
        reader.take(owner.lend([_bytes(MIB, 1)])[0])
        late = owner.lend([_bytes(MIB, 2)])[0]  # its reader died, say
        owner.close()
        reader.take(other.lend([_bytes(MIB, 3)])[0])  # mapping a new block prunes
        assert reader.mapped() == 1
        with pytest.raises(ProtocolError):
            reader.take(late)
    finally:
        for blocks in (owner, other, reader):
            blocks.close()


def _discard_in_safe_mode(blocks, frames) -> None:
    """`envelope.discard` in safe mode, failing if it maps a block."""
    def take(descriptor, copy=True):
        raise AssertionError("a process in safe mode mapped another process's block")

    blocks.take = take
    serialization.allow_pickle(False)
    try:
        envelope.discard(frames)
    finally:
        serialization.allow_pickle(True)
        del blocks.take


def test_safe_mode_leaves_another_process_s_blocks_untouched(own_blocks):
    frames = envelope.encode(Kind.RPC_CALL, 7, np.ones(SHARED_MIN // 4, np.float32), SAME_HOST)
    ours = frames[2]
    fields = list(DESCRIPTOR.unpack(ours))
    fields[0] = os.getppid()  # as if another process had lent it
    frames[2] = DESCRIPTOR.pack(*fields)
    _discard_in_safe_mode(own_blocks, frames)
    assert own_blocks.unread() == 1 and own_blocks.mapped() == 0
    shared_buffers.discard([ours])
    assert own_blocks.unread() == 0


def test_safe_mode_gives_back_its_own_unsent_blocks_without_mapping_them(own_blocks):
    frames = envelope.encode(Kind.RPC_CALL, 7, np.ones(SHARED_MIN // 4, np.float32), SAME_HOST)
    assert own_blocks.unread() == 1
    _discard_in_safe_mode(own_blocks, frames)
    assert own_blocks.unread() == 0 and own_blocks.mapped() == 0


def test_a_copy_that_fails_for_want_of_memory_gives_the_other_blocks_back(own_blocks):
    frames = envelope.encode(Kind.RPC_CALL, 7, (np.ones(SHARED_MIN // 8), np.ones(SHARED_MIN // 8)),
                             SAME_HOST)
    assert own_blocks.unread() == 2
    take, copies = own_blocks.take, []

    def no_memory_for_the_second(descriptor, copy=True):
        if copy:
            copies.append(descriptor)
            if len(copies) == 2:
                raise MemoryError("no room for the copy")
        return take(descriptor, copy)

    own_blocks.take = no_memory_for_the_second
    with pytest.raises(ProtocolError, match="MemoryError"):
        envelope.read_payload(envelope.read_header(frames), frames)
    del own_blocks.take
    assert len(copies) == 2 and own_blocks.unread() == 0


def test_a_message_whose_header_cannot_be_packed_gives_its_blocks_back(own_blocks):
    with pytest.raises(struct.error):
        envelope.encode(1 << 20, 7, np.ones(SHARED_MIN // 4, np.float32), SAME_HOST)
    assert own_blocks.lent == [1] and own_blocks.unread() == 0
