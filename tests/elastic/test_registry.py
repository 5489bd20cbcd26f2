"""torch's handler registry, RendezvousParameters, RendezvousInfo and from_backend's order."""
from __future__ import annotations

import gc
import os
import socket
import time
from datetime import timedelta

import pytest

from store import FileStore, HashStore
from store.elastic import (C10dRendezvousBackend, DynamicRendezvousHandler,
                           RendezvousConnectionError, RendezvousHandlerRegistry, RendezvousInfo,
                           RendezvousParameters, RendezvousStoreInfo, RendezvousTimeout,
                           StoreRendezvousBackend, get_rendezvous_handler)
from store.elastic import registry
from store.elastic.registry import parse_rendezvous_endpoint
from tests import limits
from tests.limits import within
from tests.net import free_port
from tests.store.processes import ctx, spawned

pytestmark = pytest.mark.timeout(60)

QUICK = dict(join_timeout=20, last_call_timeout=0.2, keep_alive_interval=0.5)


def test_parameters_refuse_what_torch_refuses():
    with pytest.raises(ValueError, match="backend"):
        RendezvousParameters("", "h:1", "run", 1, 1)
    with pytest.raises(ValueError, match="min_nodes"):
        RendezvousParameters("c10d", "h:1", "run", 0, 1)
    with pytest.raises(ValueError, match="max_nodes"):
        RendezvousParameters("c10d", "h:1", "run", 3, 2)


def test_parameters_read_options_as_bool_and_int_like_torch():
    params = RendezvousParameters("c10d", "h:1", "run", 1, 2, yes="True", no=0, n="7", bad="x")
    assert params.get_as_bool("yes") is True and params.get_as_bool("no") is False
    assert params.get_as_bool("missing") is None and params.get_as_bool("missing", True)
    assert params.get_as_int("n") == 7 and params.get("missing", 3) == 3
    with pytest.raises(ValueError, match="'bad' is not a boolean"):
        params.get_as_bool("bad")
    with pytest.raises(ValueError, match="'bad' is not an integer"):
        params.get_as_int("bad")


def test_an_unregistered_backend_is_a_value_error_like_torch():
    with pytest.raises(ValueError, match="'nope' is not registered.*c10d"):
        get_rendezvous_handler(RendezvousParameters("nope", "", "run", 1, 1))


def test_registering_a_name_twice_with_another_creator_is_a_value_error_like_torch():
    registry = RendezvousHandlerRegistry()

    def creator(params):
        return None

    registry.register("mine", creator)
    registry.register("mine", creator)  # the same creator again is fine
    with pytest.raises(ValueError, match="already registered"):
        registry.register("mine", lambda params: None)


def test_a_creator_whose_handler_names_another_backend_is_refused_like_torch():
    registry = RendezvousHandlerRegistry()
    store = HashStore()
    registry.register("mine", lambda params: DynamicRendezvousHandler.from_backend(
        params.run_id, store, StoreRendezvousBackend(store, params.run_id), 1, 1))
    with pytest.raises(RuntimeError, match="'mine' made a handler of backend 'store'"):
        registry.create_handler(RendezvousParameters("mine", "", "run", 1, 1))


def test_from_backend_takes_torchs_positional_order_and_info_unpacks():
    store = HashStore()
    handler = DynamicRendezvousHandler.from_backend(
        "order", store, C10dRendezvousBackend(store, "order"), 1, 1, "127.0.0.1",
        RendezvousTimeout(last_call=timedelta(seconds=0.1)), 5, 3)
    try:
        info = handler.next_rendezvous()
        assert isinstance(info, RendezvousInfo)
        round_store, rank, world_size = info
        assert (rank, world_size, handler.get_backend()) == (0, 1, "c10d")
        assert round_store is info.store
        bootstrap = info.bootstrap_store_info
        assert bootstrap.master_addr == "127.0.0.1" and 0 < bootstrap.master_port < 65536
        assert RendezvousStoreInfo.build(1, info.store, None) == bootstrap
    finally:
        handler.shutdown()


def test_the_file_store_type_keeps_the_state_in_a_file_like_torch(tmp_path):
    path = str(tmp_path / "rdzv")
    handler = get_rendezvous_handler(RendezvousParameters(
        "c10d", path, "files", 1, 1, local_addr="127.0.0.1", store_type="file", **QUICK))
    try:
        info = handler.next_rendezvous()
        assert (info.rank, info.world_size) == (0, 1)
        assert os.path.getsize(path) > 0
        assert FileStore(path).check(["elastic/rdzv/files/state"])
    finally:
        handler.shutdown()


def test_the_static_backend_needs_a_rank_and_a_fixed_size_like_torch():
    with pytest.raises(ValueError, match="needs the option rank"):
        get_rendezvous_handler(RendezvousParameters("static", "127.0.0.1:1", "s", 2, 2))
    with pytest.raises(ValueError, match="fixed number of nodes"):
        get_rendezvous_handler(RendezvousParameters("static", "127.0.0.1:1", "s", 1, 2, rank=0))


def test_endpoints_parse_as_in_torch():
    assert parse_rendezvous_endpoint("node1:1234") == ("node1", 1234)
    assert parse_rendezvous_endpoint("node1") == ("node1", 29400)
    assert parse_rendezvous_endpoint("") == ("localhost", 29400)
    assert parse_rendezvous_endpoint("[::1]:5") == ("::1", 5)
    with pytest.raises(ValueError, match="not a number"):
        parse_rendezvous_endpoint("node1:http")


def test_an_address_of_any_interface_of_this_machine_is_this_machine(monkeypatch):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent
        except OSError:
            pytest.skip("no route off loopback on this machine")
        mine = probe.getsockname()[0]
    # Not the address the host name resolves to: only the interface itself says so.
    monkeypatch.setattr(registry, "_own_address", lambda: None)
    assert registry._is_this_machine(mine)
    assert not registry._is_this_machine("192.0.2.1")  # TEST-NET-1, nobody's


@pytest.mark.slow
def test_a_client_with_no_host_to_reach_raises_the_connection_error_like_torch():
    params = RendezvousParameters("c10d", f"127.0.0.1:{free_port()}", "nohost", 1, 1,
                                  is_host=False, read_timeout=1)
    started = time.monotonic()
    with pytest.raises(RendezvousConnectionError, match="cannot reach the rendezvous store"):
        get_rendezvous_handler(params)
    within(started + 1, limits.AFTER_TIMEOUT, "after a timeout")  # at most read_timeout


def join_through_registry(results, port: int, backend: str, options: dict) -> None:
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    handler = get_rendezvous_handler(RendezvousParameters(
        backend, f"127.0.0.1:{port}", "reg", 2, 2, local_addr="127.0.0.1", **QUICK, **options))
    try:
        info = handler.next_rendezvous()
        bootstrap = info.bootstrap_store_info
        results.put((info.rank, info.world_size, handler.get_backend(),
                     bootstrap.master_addr, bootstrap.master_port))
        # The hosting process keeps the store up until both have read from it.
        if info.store.add("read", 1) == 2:
            info.store.set("both_read", "1")
        info.store.wait(["both_read"], 20)
    finally:
        handler.shutdown()


@pytest.mark.parametrize("backend", ["c10d", "store", "static"])
def test_two_processes_get_handlers_from_the_registry_and_one_hosts_the_store(backend):
    port, results = free_port(), ctx.Queue()
    options = [{"rank": 1}, {"rank": 0}] if backend == "static" else [{}, {}]
    with spawned(join_through_registry, [(results, port, backend, o) for o in options]):
        got = sorted(results.get(timeout=40) for _ in range(2))
    assert [g[:3] for g in got] == [(0, 2, backend), (1, 2, backend)]
    assert got[0][3:] == got[1][3:] and got[0][3] == "127.0.0.1"


@pytest.mark.parametrize("backend", ["etcd", "etcd-v2"])
def test_the_etcd_backends_keep_the_state_in_etcd_under_the_key_prefix(backend, etcd_endpoint,
                                                                      etcd_prefix):
    from store.elastic import EtcdRendezvousBackend
    from store.etcd import EtcdStore

    handler = get_rendezvous_handler(RendezvousParameters(
        backend, etcd_endpoint, "etcd-run", 1, 1, key_prefix=etcd_prefix,
        last_call_timeout=0.1))
    try:
        assert handler.get_backend() == backend
        assert handler.next_rendezvous().rank == 0
        observer = EtcdStore(etcd_endpoint, etcd_prefix, timeout=5)
        state = EtcdRendezvousBackend(observer, "etcd-run").get_state()
        assert state is not None and isinstance(state[1], int)  # the token is a revision
        observer.close()
    finally:
        handler.shutdown()
        del handler
        gc.collect()  # the store the registry made for it goes with it, and its lease


@pytest.mark.slow
def test_an_unreachable_etcd_is_the_connection_error_naming_it():
    port = free_port()
    with pytest.raises(RendezvousConnectionError, match=f"cannot reach etcd at 127.0.0.1:{port}"):
        get_rendezvous_handler(RendezvousParameters("etcd", f"127.0.0.1:{port}", "x", 1, 1,
                                                    read_timeout=1))
