"""Session-bound keys of the TCPStore: deleted, and watchers told, when their client goes."""
import os
import signal
import threading
import time

import pytest

from store import HashStore, TCPStore
from store.elastic import (DynamicRendezvousHandler, RendezvousClosedError, RendezvousError,
                           RendezvousTimeout, StoreRendezvousBackend)
from store.elastic.liveness import NodeLiveness
from store.elastic.settings import NodeDesc
from tests.store.processes import ctx
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def master():
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=10)
    yield store
    store.close()


def client(master):
    return TCPStore("127.0.0.1", master.port, timeout=10)


def deletion_event(store, key):
    gone = threading.Event()
    store.watch_key(key, lambda old, new: gone.set() if new is None else None)
    return gone


def test_an_ephemeral_key_lives_as_long_as_its_client(master):
    owner = client(master)
    owner.set_ephemeral("alive/a", "1")
    assert master.get("alive/a") == b"1"
    gone = deletion_event(master, "alive/a")
    owner.close()
    assert gone.wait(5)
    assert not master.check(["alive/a"])


def _set_and_hang(port, ready):
    store = TCPStore("127.0.0.1", port, timeout=10)
    store.set_ephemeral("alive/killed", b"1")
    ready.set()
    threading.Event().wait(60)


def test_an_ephemeral_key_is_deleted_within_3s_when_its_process_is_killed(master):
    ready = ctx.Event()
    proc = ctx.Process(target=_set_and_hang, args=(master.port, ready), daemon=True)
    proc.start()
    try:
        assert ready.wait(30)
        gone = deletion_event(master, "alive/killed")
        killed = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        assert gone.wait(3.0)
        assert time.monotonic() - killed < 3.0
    finally:
        proc.kill()
        proc.join(5)


def test_a_plain_set_makes_an_ephemeral_key_ordinary(master):
    owner, other = client(master), client(master)
    try:
        owner.set_ephemeral("k", "session")
        other.set("k", "plain")
        owner.close()
        assert master.get("k") == b"plain"
    finally:
        other.close()


def test_setting_an_ephemeral_key_again_moves_it_to_the_new_session(master):
    first, second = client(master), client(master)
    try:
        first.set_ephemeral("k", "one")
        second.set_ephemeral("k", "two")
        first.close()
        assert master.get("k") == b"two"
        gone = deletion_event(master, "k")
        second.close()
        assert gone.wait(5)
    finally:
        second.close()


def test_a_store_without_sessions_still_rendezvous_on_the_keep_alive_window_alone():
    store = HashStore(timeout=5)
    handler = DynamicRendezvousHandler.from_backend("solo", store,
                                                    StoreRendezvousBackend(store, "solo"), 1, 1)
    info = handler.next_rendezvous()
    assert (info.rank, info.world_size) == (0, 1)
    info.store.set("x", "1")
    assert store.get("elastic/rdzv/solo/round/0/x") == b"1"  # a store private to the round
    handler.shutdown()
    assert handler.is_closed()


def test_a_prefix_store_passes_ephemeral_keys_through_when_its_store_has_them():
    from store import HashStore, PrefixStore, TCPStore

    assert getattr(PrefixStore("p", HashStore()), "set_ephemeral", None) is None
    with TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=5) as server:
        prefixed = PrefixStore("job", server)
        prefixed.set_ephemeral("alive", b"1")
        assert server.get("job/alive") == b"1"


def test_liveness_asks_about_each_new_node_once_and_hears_the_live_ones(master):
    me, alive, dead, late = (NodeDesc("h", pid, 0) for pid in (1, 2, 3, 4))
    lost = threading.Event()
    liveness = NodeLiveness(client(master), "run", me, lost.set)
    peer = client(master)
    peer.set_ephemeral(liveness.key(alive), "1")
    # Both wrote their heartbeats into the state 100 s ago; `dead`'s session ended since.
    beats = {me: 900.0, alive: 900.0, dead: 900.0}
    assert liveness.observe(beats, 1000.0, window=15.0) == [dead]
    assert liveness.last_heard() == {alive: 1000.0}
    assert liveness.observe(beats, 1000.1, window=15.0) == [dead]  # asked once: heard stays
    assert liveness.last_heard() == {alive: 1000.0}
    # `late` entered the state just now and has no key: it is asked about with the
    # next batch, a second after the last one, not at every sync.
    beats[late] = 1000.2
    assert liveness.observe(beats, 1000.3, window=15.0) == [dead]
    assert liveness.observe(beats, 1001.0, window=15.0) == [dead, late]
    peer.close()  # `alive`'s session ends: the watch registered by observe hears it
    assert lost.wait(5)
    assert liveness.observe(beats, 1002.0, window=15.0) == [alive, dead, late]
    del beats[late]  # it left the state, and comes back with its key set again
    returned = client(master)
    returned.set_ephemeral(liveness.key(late), "1")
    assert liveness.observe(beats, 1003.0, window=15.0) == [alive, dead]
    beats[late] = 1003.0
    assert liveness.observe(beats, 1003.1, window=15.0) == [alive, dead]  # asked again
    returned.close()


def _late_node(master, run_id):
    """A second node of a 1:2 rendezvous whose round completed without it; its store and
    a list that receives the outcome of its join, run on a thread."""
    store = client(master)
    handler = DynamicRendezvousHandler.from_backend(
        run_id, store, StoreRendezvousBackend(store, run_id), 1, 2,
        timeout=RendezvousTimeout(last_call=0.1))
    outcome = []

    def join() -> None:
        try:
            outcome.append(handler.next_rendezvous())
        except RendezvousError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=join, daemon=True)
    return store, handler, outcome, thread


def _host_with_a_waiting_node(master, run_id):
    host = DynamicRendezvousHandler.from_backend(
        run_id, master, StoreRendezvousBackend(master, run_id), 1, 2,
        timeout=RendezvousTimeout(last_call=0.1))
    assert host.next_rendezvous().world_size == 1
    late = _late_node(master, run_id)
    late[3].start()
    assert wait_until(lambda: host.num_nodes_waiting() == 1, 10), "no node on the wait list"
    return host, late


def test_the_store_host_waits_until_a_waiting_node_read_the_closed_rendezvous(master):
    """The host closes the rendezvous, then keeps its store until the waiting node has
    left: that node fails with RendezvousClosedError, never with a lost store."""
    host, (store, _, outcome, thread) = _host_with_a_waiting_node(master, "leave")
    closing = threading.Event()

    def leave_when_refused() -> None:
        thread.join(10)
        closing.set()
        store.close()

    leaving = threading.Thread(target=leave_when_refused, daemon=True)
    leaving.start()
    host.shutdown()
    assert host.wait_for_nodes_to_leave(10) == []
    assert closing.is_set()  # the wait ended only once the node was closing its store
    leaving.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], RendezvousClosedError), outcome


def test_the_store_host_names_the_nodes_still_connected_when_its_wait_ends(master):
    host, (store, late, outcome, thread) = _host_with_a_waiting_node(master, "stay")
    try:
        host.shutdown()
        thread.join(10)
        assert outcome and isinstance(outcome[0], RendezvousClosedError), outcome
        started = time.monotonic()
        assert host.wait_for_nodes_to_leave(0.3) == [late.node]
        assert time.monotonic() - started >= 0.3
    finally:
        store.close()
