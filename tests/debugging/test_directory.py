"""A process's introspection entry in the job's store: there while it is in the job,
gone once it leaves cleanly, so that the commands never report it dead."""
from __future__ import annotations

import pytest

import actors
import actors.distributed as dist
from actors.debug import directory
from store.hash_store import HashStore

pytestmark = pytest.mark.timeout(60)


def test_an_rpc_worker_takes_its_entry_back_when_it_shuts_down():
    store = HashStore(timeout=10)
    actors.init_rpc("w0", 0, 1, store=store)
    try:
        assert [(e["role"], e["name"]) for e in directory.entries(store)] == [("rpc", "w0")]
    finally:
        actors.shutdown()
    assert directory.entries(store) == []


def test_a_process_group_takes_its_entry_back_when_it_is_destroyed():
    store = HashStore(timeout=10)
    dist.init_process_group(store=store, rank=0, world_size=1)
    try:
        assert [(e["role"], e["rank"]) for e in directory.entries(store)] == [("pg", 0)]
    finally:
        dist.destroy_process_group()
    assert directory.entries(store) == []
