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


def test_a_launchers_rendezvous_store_leads_to_the_store_its_latest_round_names():
    rendezvous = HashStore(timeout=10)
    for round_, port in ((0, 31000), (3, 31003), (2, 31002)):
        prefix = f"elastic/rdzv/run-1/round/{round_}/"
        rendezvous.multi_set([prefix + "MASTER_ADDR", prefix + "MASTER_PORT"],
                             ["10.0.0.7", str(port)])
    assert directory.workers_store(rendezvous) == "10.0.0.7:31003"
    static = HashStore(timeout=10)
    static.multi_set(["elastic/static/run-2/round/0/MASTER_ADDR",
                      "elastic/static/run-2/round/0/MASTER_PORT"], ["127.0.0.1", "29600"])
    assert directory.workers_store(static) == "127.0.0.1:29600"


def test_a_store_with_entries_of_its_own_is_the_jobs_store():
    store = HashStore(timeout=10)
    store.multi_set(["round/0/MASTER_ADDR", "round/0/MASTER_PORT"], ["127.0.0.1", "29600"])
    directory.publish(store, "pg", "tcp://127.0.0.1:1", None, 0)
    assert directory.workers_store(store) is None
    assert directory.workers_store(HashStore(timeout=10)) is None  # nothing to follow
