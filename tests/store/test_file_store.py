"""FileStore specifics: surviving killed processes, the file format, world_size cleanup."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from store import FileStore, StoreError, file_store
from store.file_format import MAGIC, decode_state, encode_state
from tests.store import workers
from tests.store.processes import collect, ctx, spawned
from tests.waiting import raised_by

pytestmark = pytest.mark.timeout(60)

READY = 30.0


def kill(proc) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    assert proc.exitcode == -signal.SIGKILL


def test_a_process_killed_holding_the_lock_mid_write_leaves_the_file_usable(tmp_path):
    path = str(tmp_path / "store")
    holding, release = ctx.Event(), ctx.Event()
    with FileStore(path, timeout=READY) as store:
        store.set("before", b"intact")
        with spawned(workers.die_holding_the_lock, [(path, holding, release)]) as (child,):
            assert holding.wait(READY)
            assert os.path.getsize(path + ".tmp") > 0  # the torn snapshot the child left
            done = threading.Event()
            adder = threading.Thread(target=lambda: (store.add("after", 1), done.set()))
            adder.start()
            try:
                assert not done.wait(0.3), "a write got in while another process held the lock"
                kill(child)
                assert done.wait(READY), "the lock of a killed process was not released"
            finally:
                adder.join(READY)
        assert store.get("before") == b"intact"
        assert store.get("after") == b"1"
        store.set("more", b"ok")
    with FileStore(path, timeout=READY) as other:
        assert other.multi_get(["before", "after", "more"]) == [b"intact", b"1", b"ok"]


def test_a_short_store_timeout_does_not_bound_waiting_for_the_lock(tmp_path):
    """As in torch: the store timeout is for keys to appear, not for the lock, which
    another process may hold for longer than a short timeout."""
    path = str(tmp_path / "store")
    holding, release = ctx.Event(), ctx.Event()

    def open_and_write():
        with FileStore(path, timeout=0.05) as store:  # counting itself in takes the lock
            store.set("k", b"v")
            assert store.add("n", 1) == 1

    outcome = []
    with spawned(workers.die_holding_the_lock, [(path, holding, release)]):
        assert holding.wait(READY)
        writer = threading.Thread(target=lambda: outcome.append(raised_by(open_and_write)))
        writer.start()
        writer.join(0.5)  # ten store timeouts
        assert writer.is_alive() and not outcome, outcome
        release.set()
        writer.join(READY)
    assert outcome == [None]


def test_a_holder_that_keeps_the_lock_without_changing_the_store_is_named_stuck(
        tmp_path, monkeypatch):
    monkeypatch.setattr(file_store, "LOCK_STUCK_AFTER", 0.5)
    path = str(tmp_path / "store")
    holding, release = ctx.Event(), ctx.Event()
    with spawned(workers.die_holding_the_lock, [(path, holding, release)]):
        assert holding.wait(READY)
        started = time.monotonic()
        with pytest.raises(file_store.FileLockStuckError) as info:
            FileStore(path, timeout=READY)
        assert 0.5 <= time.monotonic() - started < READY
        release.set()
    error = info.value
    assert isinstance(error, StoreError) and isinstance(error, TimeoutError)
    assert f"the lock {path}.lock" in str(error) and "keys" not in str(error)


def test_waiting_for_a_lock_that_others_keep_using_is_not_stuck(tmp_path, monkeypatch):
    monkeypatch.setattr(file_store, "LOCK_STUCK_AFTER", 0.2)
    path = str(tmp_path / "store")
    progress = [ctx.Event() for _ in range(2)]
    with FileStore(path, timeout=0.01) as store:
        store.set("big", b"x" * 500_000)  # each write rewrites it, holding the lock longer
        with spawned(workers.write_forever, [(path, each) for each in progress]) as children:
            assert all(each.wait(READY) for each in progress)
            try:
                assert [store.add("n", 1) for _ in range(50)][-1] == 50
            finally:
                for child in children:
                    kill(child)


@pytest.mark.slow
def test_a_writer_killed_at_an_arbitrary_moment_never_leaves_a_file_that_fails_to_load(tmp_path):
    path = str(tmp_path / "store")
    for _ in range(3):
        progress = ctx.Event()
        with spawned(workers.write_forever, [(path, progress)]) as (child,):
            assert progress.wait(READY)
            kill(child)
        with FileStore(path, timeout=READY) as store:
            counter = int(store.get("counter"))
            store.set("counter", str(counter + 1))
            assert store.get("counter") == str(counter + 1).encode()


def test_a_damaged_file_is_reported_as_a_store_error_naming_the_path(tmp_path):
    path = tmp_path / "store"
    with FileStore(str(path)) as store:
        store.set("k", b"v")
    blob = bytearray(path.read_bytes())
    blob[-1] ^= 0xFF
    path.write_bytes(bytes(blob))
    with pytest.raises(StoreError, match=str(path)):
        FileStore(str(path))


def test_an_existing_empty_file_is_an_empty_store(tmp_path):
    path = tmp_path / "store"
    path.write_bytes(b"")
    with FileStore(str(path)) as store:
        assert store.num_keys() == 0
        store.set("k", b"v")
        assert store.get("k") == b"v"


def test_the_snapshot_format_round_trips_keys_values_and_queues():
    state = {"data": {"k": b"v", "é": b"\x00" * 3, "": b""}, "queues": {"q": [b"1", b""]}}
    blob = encode_state(state)
    assert blob.startswith(MAGIC)
    assert decode_state(blob, "p") == state


def test_ops_after_close_raise_store_error(tmp_path):
    store = FileStore(str(tmp_path / "store"))
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.set("k", b"v")


def test_the_last_of_world_size_users_to_close_deletes_the_file(tmp_path):
    path = tmp_path / "store"
    first = FileStore(str(path), world_size=2)
    second = FileStore(str(path), world_size=2)
    first.set("k", b"v")
    first.close()
    assert path.exists()
    assert second.get("k") == b"v"
    second.close()
    assert sorted(os.listdir(tmp_path)) == []


def test_without_world_size_the_file_outlives_its_users(tmp_path):
    path = tmp_path / "store"
    FileStore(str(path)).close()
    assert path.exists()
    with FileStore(str(path)) as again:
        assert again.num_keys() == 0


def test_users_of_different_processes_count_towards_world_size(tmp_path):
    path = str(tmp_path / "store")
    results = ctx.Queue()
    url = f"file://{path}"
    with FileStore(path, world_size=3) as mine, spawned(
        workers.rendezvous_and_meet, [(results, url, r, 3) for r in (1, 2)]
    ):
        mine.set("rank/0", str(os.getpid()))
        mine.wait(["left/1", "left/2"], timeout=READY)
        assert sorted(rank for rank, _, _ in collect(results, 2)) == [1, 2]
    assert not os.path.exists(path)


def test_a_watch_sees_changes_made_by_another_process(tmp_path):
    path = str(tmp_path / "store")
    seen, changed = [], threading.Event()
    with FileStore(path, timeout=READY) as store:
        store.watch_key("from-child", lambda old, new: (seen.append((old, new)), changed.set()))
        results = ctx.Queue()
        with spawned(workers.set_key, [(results, ("file", path), "from-child", b"hello")]):
            assert collect(results, 1) == [True]
        assert changed.wait(READY)
        assert seen == [(None, b"hello")]
