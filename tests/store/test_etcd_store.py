"""What EtcdStore adds to the store rules that every store passes (test_store_semantics):
leases, the etcd:// init method, prefixes, resources, and an unreachable server."""
import itertools
import multiprocessing as mp
import os
import signal
import threading
import time

import pytest

from store import rendezvous
from store.errors import StoreConnectionError
from store.etcd import EtcdStore
from tests import limits
from tests.limits import within
from tests.net import free_port
from tests.store import etcd_clients
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)
ctx = mp.get_context("spawn")


@pytest.mark.slow
def test_a_killed_clients_ephemeral_key_vanishes_within_its_lease_ttl(etcd_endpoint,
                                                                       etcd_prefix):
    ttl = 2
    ready = ctx.Queue()
    holder = ctx.Process(target=etcd_clients.hold_ephemeral,
                         args=(etcd_endpoint, etcd_prefix, ttl, ready), daemon=True)
    holder.start()
    try:
        assert ready.get(timeout=30) == "set"
        store = EtcdStore(etcd_endpoint, etcd_prefix, timeout=10)
        assert store.get("alive") == b"yes"
        holder.kill()
        holder.join(10)
        killed = time.monotonic()
        assert wait_until(lambda: not store.check(["alive"]), ttl + 5)
        assert time.monotonic() - killed <= ttl + 1.5
        store.close()
    finally:
        if holder.is_alive():
            holder.kill()
            holder.join(10)


@pytest.mark.slow
def test_a_client_stopped_past_its_lease_ttl_sets_ephemeral_keys_again_once_resumed(
        etcd_endpoint, etcd_prefix):
    ttl = 2
    ready = ctx.Queue()
    holder = ctx.Process(target=etcd_clients.renew_ephemeral,
                         args=(etcd_endpoint, etcd_prefix, ttl, ready), daemon=True)
    holder.start()
    store = EtcdStore(etcd_endpoint, etcd_prefix, timeout=10)
    try:
        assert ready.get(timeout=30) == "set"
        os.kill(holder.pid, signal.SIGSTOP)  # unscheduled, as on a starved machine
        assert wait_until(lambda: not store.check(["alive"]), ttl + 5)  # etcd: dead
        os.kill(holder.pid, signal.SIGCONT)
        assert wait_until(lambda: store.check(["alive"]), ttl + 5)  # on a new lease
        deleted = threading.Event()
        store.watch_key("alive", lambda old, new: new is None and deleted.set())
        assert not deleted.wait(2 * ttl), "the new lease was not kept alive"
    finally:
        store.close()
        os.kill(holder.pid, signal.SIGCONT)
        holder.kill()
        holder.join(10)


def _ask_etcd(endpoint: str, path: str, body: dict) -> dict:
    """One request to etcd's own gateway, from outside the store."""
    import etcd3gw

    host, port = endpoint.rsplit(":", 1)
    client = etcd3gw.Etcd3Client(host=host, port=int(port), timeout=5)
    try:
        return client.post(client.get_url(path), json=body)
    finally:
        client.session.close()


def _leases(endpoint: str) -> set:
    return {int(lease["ID"]) for lease in
            _ask_etcd(endpoint, "/lease/leases", {}).get("leases", [])}


def test_the_first_ephemeral_key_after_a_lease_ended_unnoticed_goes_on_a_new_lease(
        etcd_endpoint, etcd_prefix):
    """etcd ends the lease before the keep-alive thread's next tick (as when the client
    went unscheduled past its TTL): the next ephemeral key is set, not refused."""
    before = _leases(etcd_endpoint)
    store = EtcdStore(etcd_endpoint, etcd_prefix, timeout=10, ephemeral_ttl=30)
    observer = EtcdStore(etcd_endpoint, etcd_prefix, timeout=10)
    try:
        store.set_ephemeral("first", "1")
        (lease,) = _leases(etcd_endpoint) - before
        _ask_etcd(etcd_endpoint, "/lease/revoke", {"ID": str(lease)})
        assert not observer.check(["first"])
        store.set_ephemeral("second", "2")
        assert observer.get("second") == b"2"
        assert len(_leases(etcd_endpoint) - before - {lease}) == 1
        store.close()
        assert wait_until(lambda: not observer.check(["second"]), 3)  # the new lease's
    finally:
        store.close()
        observer.close()


def test_a_closed_clients_ephemeral_keys_go_at_once_and_plain_keys_stay(etcd_endpoint,
                                                                         etcd_prefix):
    owner = EtcdStore(etcd_endpoint, etcd_prefix, timeout=10)
    owner.set_ephemeral("session", "1")
    owner.set("plain", "2")
    seen = threading.Event()
    observer = EtcdStore(etcd_endpoint, etcd_prefix, timeout=10)
    observer.watch_key("session", lambda old, new: new is None and seen.set())
    owner.close()
    assert seen.wait(3)  # revoked on close, well before the 15 s TTL
    assert observer.get("plain") == b"2"
    observer.close()


def test_stores_with_different_prefixes_do_not_see_each_other(etcd_endpoint, etcd_prefix):
    first = EtcdStore(etcd_endpoint, etcd_prefix + "/a", timeout=2)
    second = EtcdStore(etcd_endpoint, etcd_prefix + "/ab", timeout=2)
    first.set("k", "1")
    first.queue_push("q", "x")
    assert second.num_keys() == 0 and second.queue_len("q") == 0
    assert not second.check(["k"])
    first.close()
    second.close()


@pytest.mark.parametrize("outer, inner", [
    ("/n", "/n/k"), ("/n", "/n/q"), ("/n", "/n/#k"), ("/n#", "/n"), ("/n%23", "/n#"),
    ("", "/k"),
])
def test_nested_prefixes_share_nothing(etcd_endpoint, etcd_prefix, outer, inner):
    outer = EtcdStore(etcd_endpoint, etcd_prefix + outer, timeout=2)
    inner = EtcdStore(etcd_endpoint, etcd_prefix + inner, timeout=2)
    try:
        changes = []
        outer.watch_key("k/secret", lambda old, new: changes.append(new))
        inner.set("secret", "1")
        inner.set("k/secret", "2")
        inner.queue_push("q", "x")
        assert outer.list_keys() == [] and outer.num_keys() == 0
        assert not outer.check(["secret", "k/secret", "#k/secret"])
        assert outer.queue_len("q") == 0 and outer.queue_len("") == 0
        outer.set("k/secret", "outer")
        outer.queue_push("q", "y")
        assert inner.multi_get(["secret", "k/secret"]) == [b"1", b"2"]
        assert inner.queue_pop("q", block=False) == b"x"
        assert inner.queue_len("q") == 0
        assert wait_until(lambda: changes == [b"outer"], 5), changes
    finally:
        outer.close()
        inner.close()


def test_no_store_or_queue_range_starts_another():
    """The layout's promise, over names made to collide: no store's namespace starts
    another's, and no queue's item range starts another queue's."""
    from store.etcd.layout import Layout

    names = ["", "a", "a/", "a/b", "a/k", "a/#", "a/#k", "a#", "a%", "a%23", "a%2F", "/", "#"]
    layouts = {name.rstrip("/"): Layout(name) for name in names}
    for first, second in itertools.permutations(layouts.values(), 2):
        assert not second.keys.startswith(first.keys)
        assert not second.queue("q").startswith(first.keys)
        assert not second.keys.startswith(first.queue(""))
    for first, second in itertools.permutations(names, 2):
        assert not Layout("/p").queue(second).startswith(Layout("/p").queue(first))


LIMIT = 3 << 19  # etcd's default --max-request-bytes, which the test server keeps


@pytest.mark.parametrize("write", [
    lambda s: s.set("big", b"x" * (2 << 20)),
    lambda s: s.set_ephemeral("big", b"x" * (2 << 20)),
    lambda s: s.queue_push("big", b"x" * (50 << 20)),
    lambda s: s.multi_set(["big", "other"], [b"x" * (1 << 20)] * 2),
    lambda s: (s.set("big", b"x" * (1 << 20)), s.append("big", b"x" * (1 << 20))),
], ids=["set", "set_ephemeral", "queue_push", "multi_set", "append"])
def test_a_write_over_etcds_request_limit_is_a_value_error_naming_the_limit(
        etcd_endpoint, etcd_prefix, write):
    from store.etcd import ValueTooLargeError

    store = EtcdStore(etcd_endpoint, etcd_prefix, timeout=0.5)
    try:
        started = time.monotonic()
        with pytest.raises(ValueTooLargeError, match=f"at most {LIMIT} bytes") as info:
            write(store)
        assert isinstance(info.value, ValueError)
        assert not isinstance(info.value, ConnectionError)  # retrying cannot help
        within(started, limits.AT_ONCE, "before sending")
        store.set("small", "1")
        assert store.get("small") == b"1"
    finally:
        store.close()


@pytest.mark.parametrize("size, named", [
    (LIMIT, ""),  # over the limit once etcd adds its framing
    (2 << 20, f" of {LIMIT} bytes"),  # over what etcd's gRPC server reads at all
])
def test_etcds_own_refusal_of_a_large_write_is_the_same_error(etcd_endpoint, etcd_prefix,
                                                              size, named):
    from store.etcd import ValueTooLargeError

    store = EtcdStore(etcd_endpoint, etcd_prefix, timeout=5, max_request_bytes=64 << 20)
    try:
        with pytest.raises(ValueTooLargeError, match=f"--max-request-bytes{named}\\)"):
            store.set("big", b"x" * size)
    finally:
        store.close()


def test_the_etcd_init_method_gives_a_store_rank_and_world_size(etcd_endpoint, etcd_prefix):
    store, rank, world_size = next(rendezvous(f"etcd://{etcd_endpoint}{etcd_prefix}?rank=1"
                                              f"&world_size=3"))
    try:
        assert (rank, world_size) == (1, 3) and isinstance(store, EtcdStore)
        assert store.prefix == etcd_prefix
        store.set("x", "y")
        assert EtcdStore(etcd_endpoint, etcd_prefix).get("x") == b"y"
    finally:
        store.close()


@pytest.mark.parametrize("rank_main,expected", [
    (etcd_clients.rpc_rank, [10, 11]),
    (etcd_clients.process_group_rank, [3.0, 3.0]),
], ids=["rpc", "process_group"])
@pytest.mark.slow
def test_a_world_forms_through_the_etcd_init_method(etcd_endpoint, etcd_prefix, rank_main,
                                                    expected):
    results = ctx.Queue()
    ranks = [ctx.Process(target=rank_main, args=(etcd_endpoint, etcd_prefix, rank, results),
                         daemon=True)
             for rank in (0, 1)]
    for process in ranks:
        process.start()
    try:
        assert sorted(results.get(timeout=60) for _ in ranks) == expected
        for process in ranks:
            process.join(30)
            assert process.exitcode == 0
    finally:
        for process in ranks:
            if process.is_alive():
                process.kill()
                process.join(10)


@pytest.mark.slow
def test_an_unreachable_etcd_is_a_clear_connection_error():
    started = time.monotonic()
    with pytest.raises(StoreConnectionError, match="unreachable: .*Connection refused"):
        EtcdStore(f"127.0.0.1:{free_port()}", "/x", timeout=2)
    within(started + 2, limits.AFTER_TIMEOUT, "after a timeout")


def test_etcds_answers_are_read_in_its_own_words():
    """etcd3gw keeps etcd's answer (or the connection's error) beside the HTTP reason.
    Only a request that surely was not applied may be sent again: a refused connection,
    or an answer etcd gives before proposing the request."""
    from etcd3gw import exceptions

    from store.etcd.gateway import describe, lease_not_found, not_applied

    refused = exceptions.ConnectionFailedError(
        "HTTPConnectionPool(...): Failed to establish a new connection: [Errno 111] "
        "Connection refused")
    assert "Connection refused" in describe(refused) and not_applied(refused)
    lease_gone = exceptions.Etcd3Exception(
        '{"error":"etcdserver: requested lease not found","code":5}', "Not Found")
    assert describe(lease_gone) == "Not Found etcdserver: requested lease not found"
    assert lease_not_found(lease_gone) and not lease_not_found(refused)
    no_leader = exceptions.ConnectionFailedError(
        '{"error":"etcdserver: no leader","code":14}', "Service Unavailable")
    assert not_applied(no_leader)
    for after_proposing in ('{"error":"etcdserver: server stopped","code":14}',
                            '{"error":"etcdserver: leader changed","code":14}',
                            '{"error":"etcdserver: request timed out","code":14}'):
        assert not not_applied(exceptions.ConnectionFailedError(after_proposing,
                                                                "Service Unavailable"))
    cut = exceptions.ConnectionFailedError(
        "('Connection aborted.', RemoteDisconnected('Remote end closed connection "
        "without response'))")
    assert not not_applied(cut)


def test_dropped_clients_with_watches_and_leases_leave_no_threads(etcd_endpoint, etcd_prefix):
    import gc

    def one_round():
        store = EtcdStore(etcd_endpoint, etcd_prefix, timeout=5, ephemeral_ttl=3)
        store.watch_key("w", lambda old, new: store.num_keys())  # refers back to the store
        store.set_ephemeral("e", "1")
        store.set("w", "1")

    def all_ended() -> bool:
        gc.collect()  # a watch event still in flight holds its callback, and so a store
        return threading.active_count() <= before

    before = threading.active_count()
    for _ in range(20):
        one_round()
    assert wait_until(all_ended, 15), [t.name for t in threading.enumerate()]

