"""Init-method rendezvous: env://, tcp://, file://, and the handler registry."""
from __future__ import annotations

import importlib
from datetime import timedelta

import pytest

from store import FileStore, RendezvousHandlerError, StoreError, register_rendezvous_handler
from store import rendezvous as rendezvous_fn
from tests.store import workers
from tests.net import free_port
from tests.store.processes import collect, ctx, spawned

pytestmark = pytest.mark.timeout(60)

# `store.rendezvous` the attribute is the function (as in torch); this is the module.
rdzv_module = importlib.import_module("store.rendezvous")

ENV = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "RANK": "0", "WORLD_SIZE": "1"}


@pytest.fixture
def env(monkeypatch):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    return monkeypatch


@pytest.fixture
def registry(monkeypatch):
    """A copy of the handler registry, restored after the test."""
    monkeypatch.setattr(rdzv_module, "_HANDLERS", dict(rdzv_module._HANDLERS))
    return rdzv_module._HANDLERS


# -- env:// ------------------------------------------------------------------------------


def test_env_reads_master_rank_and_world_size_from_the_environment(env, tcp_master):
    env.setenv("MASTER_PORT", str(tcp_master.port))
    env.setenv("RANK", "2")
    env.setenv("WORLD_SIZE", "4")
    store, rank, world_size = next(rendezvous_fn("env://", timeout=7))
    with store:
        assert (rank, world_size) == (2, 4)
        assert (store.host, store.port, store.world_size) == ("127.0.0.1", tcp_master.port, 4)
        assert store.is_master is False and store.timeout == timedelta(seconds=7)
        store.set("from-rank-2", b"hi")
        assert tcp_master.get("from-rank-2") == b"hi"


def test_env_rank_zero_hosts_the_server(env):
    env.setenv("MASTER_PORT", str(free_port()))
    store, rank, _ = next(rendezvous_fn("env://", timeout=10))
    with store:
        assert rank == 0 and store.is_master is True


def test_env_query_overrides_the_environment_and_arguments_override_both(env, tcp_master):
    env.setenv("MASTER_PORT", str(tcp_master.port))
    env.setenv("WORLD_SIZE", "8")
    store, rank, world_size = next(rendezvous_fn("env://?rank=3&world_size=6", timeout=10))
    store.close()
    assert (rank, world_size) == (3, 6)
    store, rank, world_size = next(
        rendezvous_fn("env://?rank=3&world_size=6", rank=5, world_size=7, timeout=10))
    store.close()
    assert (rank, world_size) == (5, 7)


@pytest.mark.parametrize("name", sorted(ENV))
def test_env_reports_a_missing_variable_by_name(env, name):
    env.delenv(name)
    with pytest.raises(RendezvousHandlerError, match=name) as info:
        next(rendezvous_fn("env://"))
    assert isinstance(info.value, ValueError)


def test_env_rejects_a_non_integer_port_naming_it(env):
    env.setenv("MASTER_PORT", "http")
    with pytest.raises(RendezvousHandlerError, match="MASTER_PORT"):
        rendezvous_fn("env://")


def test_env_end_to_end_gives_a_working_tcp_store(env):
    env.setenv("MASTER_PORT", str(free_port()))
    store, rank, world_size = next(rendezvous_fn("env://", timeout=10))
    try:
        assert (rank, world_size) == (0, 1)
        store.set("k", b"v")
        assert store.get("k") == b"v"
    finally:
        store.close()


# -- tcp:// ------------------------------------------------------------------------------


def test_tcp_passes_host_port_and_ranks_to_the_store(tcp_master):
    store, rank, world_size = next(rendezvous_fn(
        f"tcp://127.0.0.1:{tcp_master.port}?rank=1&world_size=2", wait_for_workers=False,
        timeout=10))
    with store:
        assert (rank, world_size) == (1, 2)
        assert (store.host, store.port, store.is_master) == ("127.0.0.1", tcp_master.port, False)


@pytest.mark.parametrize(
    "url, rank, world_size, message",
    [
        ("tcp://127.0.0.1:1234?world_size=2", -1, -1, "rank"),
        ("tcp://127.0.0.1:1234?rank=0", -1, -1, "world_size"),
        ("tcp://127.0.0.1:1234?rank=x&world_size=2", -1, -1, "rank"),
        ("tcp://127.0.0.1:1234", 2, 2, "rank"),
        ("tcp://127.0.0.1:1234", 0, 0, "world_size"),
        ("tcp://127.0.0.1?rank=0&world_size=1", -1, -1, "host:port"),
        ("file:///tmp/x?rank=0", -1, -1, "world_size"),
    ],
)
def test_a_bad_rank_or_world_size_is_a_clear_error(url, rank, world_size, message):
    with pytest.raises(RendezvousHandlerError, match=message):
        next(rendezvous_fn(url, rank, world_size))


def test_rank_must_be_an_int():
    with pytest.raises(TypeError, match="rank"):
        rendezvous_fn("tcp://127.0.0.1:1234", rank="0", world_size=1)


def tcp_url(port: int) -> str:
    return f"tcp://127.0.0.1:{port}"


def file_url(tmp_path) -> str:
    return f"file://{tmp_path / 'rdzv'}"


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["tcp", "file"])
def test_three_processes_meet_with_distinct_ranks_in_one_world(scheme, tmp_path):
    if scheme == "tcp":
        url = tcp_url(free_port())
    else:
        url = file_url(tmp_path)
    results = ctx.Queue()
    with spawned(workers.rendezvous_and_meet, [(results, url, r, 3) for r in range(3)]):
        outcomes = collect(results, 3)
    assert sorted(rank for rank, _, _ in outcomes) == [0, 1, 2]
    assert {world for _, world, _ in outcomes} == {3}
    assert len({tuple(pids) for _, _, pids in outcomes}) == 1  # everyone read the same store
    if scheme == "file":
        assert not (tmp_path / "rdzv").exists()  # the last of world_size users removed it


# -- file:// -----------------------------------------------------------------------------


def test_file_gives_a_file_store_on_the_path(tmp_path):
    store, rank, world_size = next(rendezvous_fn(f"{file_url(tmp_path)}?rank=0&world_size=1"))
    try:
        assert isinstance(store, FileStore) and (rank, world_size) == (0, 1)
        assert store.path == str(tmp_path / "rdzv") and store.world_size == 1
    finally:
        store.close()
    assert not (tmp_path / "rdzv").exists()


def test_asking_for_a_second_rendezvous_raises(tmp_path):
    it = rendezvous_fn(file_url(tmp_path), rank=0, world_size=1)
    store, _, _ = next(it)
    try:
        with pytest.raises(StoreError, match="re-rendezvous"):
            next(it)
    finally:
        store.close()


# -- the registry ------------------------------------------------------------------------


def test_registering_a_scheme_twice_raises_value_error_naming_it(registry):
    register_rendezvous_handler("mine", lambda url, **kw: iter(()))
    with pytest.raises(ValueError, match="mine://"):
        register_rendezvous_handler("mine", lambda url, **kw: iter(()))


def test_the_built_in_schemes_cannot_be_registered_again():
    with pytest.raises(ValueError, match="tcp://"):
        register_rendezvous_handler("tcp", lambda url, **kw: iter(()))


def test_an_unknown_scheme_is_an_error_listing_the_known_ones():
    with pytest.raises(RendezvousHandlerError, match="nope://") as info:
        rendezvous_fn("nope://host")
    assert all(s in str(info.value) for s in ("env://", "file://", "tcp://"))


def test_a_custom_handler_gets_the_url_with_rank_and_world_size_and_the_kwargs(registry):
    calls = []

    def handler(url, **kwargs):
        calls.append((url, kwargs))
        yield "a-store", 1, 2

    register_rendezvous_handler("custom", handler)
    assert next(rendezvous_fn("custom://host:5?x=y", rank=1, world_size=2, timeout=3)) == (
        "a-store", 1, 2)
    url, kwargs = calls[0]
    assert url.startswith("custom://host:5?") and "x=y" in url
    assert "rank=1" in url and "world_size=2" in url
    assert kwargs == {"timeout": 3}
