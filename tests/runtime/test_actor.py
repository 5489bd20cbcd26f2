"""Actors talking to actors: replies, errors, timeouts, lost peers, lifecycle."""
import inspect
import pydoc
import threading
import time

import numpy as np
import pytest

from actors.runtime import (Actor, ActorCore, ActorStoppedError, AddressInUseError, Future, Kind,
                            PeerLostError, RequestTimeoutError, UnknownKindError)
from tests import limits
from tests.limits import within
from tests.net import free_port
from tests.runtime import peers
from tests.waiting import run_in_threads

pytestmark = pytest.mark.timeout(60)


def test_a_request_to_an_actor_in_another_process_gets_its_reply(peer_process, client):
    address, _ = peer_process
    payload = {"weights": np.arange(12.0).reshape(3, 4), "name": "w", "step": 3}
    reply = client.request(address, peers.ECHO, payload, timeout=10).wait(10)
    np.testing.assert_array_equal(reply["weights"], payload["weights"])
    assert reply["name"] == "w" and reply["step"] == 3


def test_a_nan_timeout_is_refused_before_anything_is_sent(client):
    with pytest.raises(ValueError, match="got nan"):
        client.request("tcp://127.0.0.1:1", Kind.PING, None, float("nan"))
    assert client.requests_in_flight() == []


def test_help_on_the_actor_handle_shows_the_parameters_of_its_methods():
    """The handle's methods are the core's, reached through properties, whose help
    showed the docstring alone: help(Actor) gave no parameter of request or attach."""
    text = pydoc.render_doc(Actor, renderer=pydoc.plaintext)
    assert "request(peer, kind, payload=None, timeout=None, *, json=False" in text
    assert "attach(socket_or_endpoint, on_message=None, *, socket_type=None, bind=False" in text
    for name, member in vars(Actor).items():
        method = getattr(ActorCore, name, None)
        if isinstance(member, property) and callable(method):
            first = inspect.getdoc(member).split("\n", 1)[0]
            assert first.startswith(f"``{name}(") and all(
                parameter in first for parameter in list(inspect.signature(method).parameters)[1:])


def test_large_arrays_arrive_intact(peer_process, client):
    address, _ = peer_process
    big = np.random.default_rng(0).standard_normal(2_000_000).astype(np.float32)
    reply = client.request(address, peers.ECHO, big, timeout=30).wait(30)
    np.testing.assert_array_equal(reply, big)
    assert reply.flags.writeable


def test_a_remote_exception_is_raised_with_its_type_and_remote_traceback(peer_process, client):
    address, _ = peer_process
    with pytest.raises(KeyError, match="no entry named 'w'") as info:
        client.request(address, peers.FAIL, "w", timeout=10).wait(10)
    assert "_fail" in info.value.remote_traceback


def test_an_unknown_kind_is_answered_with_an_error_naming_it(peer_process, client):
    address, _ = peer_process
    with pytest.raises(UnknownKindError, match="0xf0ff"):
        client.request(address, 0xF0FF, None, timeout=10).wait(10)


def test_a_request_without_reply_times_out_and_the_actor_keeps_working(peer_process, client):
    address, _ = peer_process
    with pytest.raises(RequestTimeoutError, match="no reply within 0.2s"):
        client.request(address, peers.HANG, None, timeout=0.2).wait(10)
    assert client.request(address, peers.ECHO, 1, timeout=10).wait(10) == 1


def test_a_killed_peer_fails_pending_requests_promptly_with_a_connection_error(
        peer_process, client):
    address, process = peer_process
    assert client.request(address, peers.ECHO, 0, timeout=10).wait(10) == 0
    pending = client.request(address, peers.HANG, None, timeout=60)
    process.kill()
    started = time.monotonic()
    with pytest.raises(PeerLostError) as info:
        pending.wait(10)
    within(started, limits.CONNECTION_CLOSED, "connection closed")
    assert isinstance(info.value, ConnectionError) and address in str(info.value)


def test_a_request_to_an_address_nothing_listens_on_fails_at_once_not_at_its_timeout(client):
    from tests.net import free_port

    address = f"tcp://127.0.0.1:{free_port()}"
    lost = []
    client.on_peer_lost(lost.append)
    started = time.monotonic()
    with pytest.raises(PeerLostError, match="nothing accepts connections") as info:
        client.request(address, peers.ECHO, None, timeout=60).wait(10)
    within(started, limits.NOTHING_LISTENS, "nothing listens")
    assert isinstance(info.value, ConnectionError) and address in str(info.value)
    assert lost == [address]  # reported once, however often ZeroMQ retries
    with pytest.raises(PeerLostError, match="connection is down"):
        client.request(address, peers.ECHO, None, timeout=60).wait(10)


def test_a_request_to_a_port_that_does_not_speak_zeromq_says_so_without_curve(client):
    import socket

    listener = socket.create_server(("127.0.0.1", 0))  # say, an HTTP service's port
    answered = threading.Thread(target=lambda: listener.accept()[0].sendall(
        b"HTTP/1.1 400 Bad Request\r\n\r\n"), daemon=True)
    answered.start()
    address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    started = time.monotonic()
    try:
        with pytest.raises(PeerLostError, match="does not speak ZeroMQ") as info:
            client.request(address, peers.ECHO, None, timeout=60).wait(10)
        within(started, limits.NOTHING_LISTENS, "a refused handshake")
        assert "CURVE key" not in str(info.value)  # this process uses no CURVE
    finally:
        listener.close()

def test_after_a_peer_is_killed_new_requests_to_it_fail_at_once(peer_process, client):
    address, process = peer_process
    lost = threading.Event()
    client.on_peer_lost(lambda peer: lost.set())
    assert client.request(address, peers.ECHO, 0, timeout=10).wait(10) == 0
    process.kill()
    assert lost.wait(10)
    started = time.monotonic()
    with pytest.raises(PeerLostError, match="connection is down"):
        client.request(address, peers.ECHO, 0, timeout=60).wait(10)
    within(started, limits.AT_ONCE, "at once")


def test_an_unpicklable_argument_fails_at_the_caller_before_sending(client):
    with pytest.raises(TypeError, match="refuses to be pickled"):
        client.request("tcp://127.0.0.1:1", peers.ECHO, peers.Unpicklable())


def test_an_unpicklable_result_reaches_the_caller_as_an_error():
    with Actor(name="server") as server, Actor(None, name="client") as client:
        server.register(peers.ECHO, lambda msg: peers.Unpicklable())
        with pytest.raises(TypeError, match="refuses to be pickled"):
            client.request(server.address, peers.ECHO, None, timeout=10).wait(10)


def test_requests_from_many_threads_each_get_their_own_reply(peer_process, client):
    address, _ = peer_process
    errors = []

    def caller(worker: int) -> None:
        for i in range(100):
            value = (worker, i)
            if client.request(address, peers.ECHO, value, timeout=20).wait(20) != value:
                errors.append(value)

    assert run_in_threads(caller, 8, 30) and not errors


def test_a_handler_that_returns_a_future_is_answered_when_it_completes():
    with Actor(name="server") as server, Actor(None, name="client") as client:
        later = Future()
        server.register(peers.ECHO, lambda msg: later)
        reply = client.request(server.address, peers.ECHO, None, timeout=10)
        later.set_result("done later")
        assert reply.wait(10) == "done later"


def test_inline_handlers_run_on_the_mailbox_thread_and_others_on_the_pool():
    with Actor(name="server") as server, Actor(None, name="client") as client:
        server.register(peers.ECHO, lambda msg: threading.current_thread().name, inline=True)
        server.register(peers.SUM, lambda msg: threading.current_thread().name)
        assert client.request(server.address, peers.ECHO, None, timeout=10).wait(10) == \
            "server-io"
        assert client.request(server.address, peers.SUM, None, timeout=10).wait(10).startswith(
            "server-worker-")


def test_replies_sent_by_worker_threads_never_strand_a_request_that_arrives_meanwhile():
    # Worker threads send replies on the ROUTER themselves; a request that arrives
    # while they do must still wake the I/O thread. The last requests of each burst
    # have no later traffic to wake it, so a lost wake-up shows as a timeout here.
    with Actor(name="server", num_worker_threads=4) as server:
        server.register(peers.ECHO, lambda msg: msg.payload)
        failures = []

        def burst(tag: int) -> None:
            with Actor(None, name=f"client{tag}") as client:
                for round_ in range(20):
                    futures = [client.request(server.address, peers.ECHO, (tag, round_, i),
                                              timeout=10) for i in range(10)]
                    for i, future in enumerate(futures):
                        if future.wait(10) != (tag, round_, i):
                            failures.append((tag, round_, i))

        assert run_in_threads(burst, 4, 60)
        assert failures == []


def test_a_timer_far_in_the_future_does_not_stop_the_mailbox():
    # A store wait "forever" arms a timer a billion seconds away; ZeroMQ's poll
    # timeout is a C int, so the mailbox must not pass that delay through.
    with Actor(name="server") as server, Actor(None, name="client") as client:
        server.call_soon(server.call_later, 1e9, lambda: None)
        for i in range(3):
            assert client.request(server.address, Kind.PING, i, timeout=10).wait(10) == i


def test_with_workers_receiving_a_request_runs_on_the_worker_that_read_it():
    with Actor(name="server", workers_receive=True) as server, \
            Actor(None, name="client") as client:
        server.register(peers.ECHO, lambda msg: threading.current_thread().name, inline=True)
        server.register(peers.SUM, lambda msg: threading.current_thread().name)
        for kind in (peers.ECHO, peers.SUM):
            assert client.request(server.address, kind, None, timeout=10).wait(10).startswith(
                "server-worker-")


def test_with_workers_receiving_inline_handlers_keep_mailbox_order():
    seen = []
    with Actor(name="server", workers_receive=True, num_worker_threads=4) as server, \
            Actor(None, name="client") as client:
        server.register(peers.ECHO, lambda msg: seen.append(msg.payload), inline=True)
        server.register(peers.HANG, lambda msg: threading.Event().wait(0.2))
        # Pool work in between keeps handing the reading role from thread to thread.
        futures = []
        for i in range(200):
            futures.append(client.request(server.address, peers.ECHO, i, timeout=10))
            if i % 50 == 0:
                futures.append(client.request(server.address, peers.HANG, None, timeout=10))
        for future in futures:
            future.wait(10)
    assert seen == list(range(200))


def test_with_workers_receiving_a_handler_blocked_outside_the_runtime_does_not_hold_the_mailbox():
    # The worker that read the first request runs it while still the mailbox's only
    # reader; it blocks on an event that only the second request sets, so the
    # watchdog must hand the mailbox to another worker.
    opened = threading.Event()
    with Actor(name="server", workers_receive=True, num_worker_threads=2) as server, \
            Actor(None, name="client") as client:
        server.register(peers.HANG, lambda msg: opened.wait(30))
        server.register(peers.ECHO, lambda msg: opened.set())
        waiting = client.request(server.address, peers.HANG, None, timeout=30)
        client.request(server.address, peers.ECHO, None, timeout=30).wait(30)
        assert waiting.wait(30) is True


def test_with_workers_receiving_a_handler_may_wait_on_a_request_to_its_own_actor():
    with Actor(name="server", workers_receive=True, num_worker_threads=2) as server:
        server.register(peers.ECHO, lambda msg: msg.payload)
        server.register(peers.SUM, lambda msg: server.request(
            server.address, peers.ECHO, msg.payload, timeout=10).wait(10) + 1)
        with Actor(None, name="client") as client:
            assert client.request(server.address, peers.SUM, 41, timeout=10).wait(10) == 42


@pytest.mark.parametrize("threads", [1, 2])
def test_with_workers_receiving_submitted_work_runs_when_no_follower_is_idle(threads):
    # One thread is the leader; with two, the other is kept busy. Work submitted to
    # the pool must still run, between two reads of the leader.
    ran, busy, release = threading.Event(), threading.Event(), threading.Event()
    with Actor(name="server", workers_receive=True, num_worker_threads=threads) as server, \
            Actor(None, name="client") as client:
        server.register(peers.HANG, lambda msg: busy.set() or release.wait(30))
        server.register(peers.ECHO, lambda msg: server.pool.submit(ran.set), inline=True)
        hanging = None
        if threads == 2:
            hanging = client.request(server.address, peers.HANG, None, timeout=30)
            assert busy.wait(10)
        client.request(server.address, peers.ECHO, None, timeout=10).wait(10)
        assert ran.wait(10)
        release.set()
        if hanging is not None:
            assert hanging.wait(30) is True


def test_with_workers_receiving_a_pool_of_one_serves_request_after_request():
    with Actor(name="server", workers_receive=True, num_worker_threads=1) as server, \
            Actor(None, name="client") as client:
        server.register(peers.SUM, lambda msg: sum(msg.payload))
        futures = [client.request(server.address, peers.SUM, [i, 1], timeout=10)
                   for i in range(50)]
        assert [f.wait(10) for f in futures] == [i + 1 for i in range(50)]


def test_with_workers_receiving_stop_leaves_no_thread_behind():
    before = set(threading.enumerate())
    server = Actor(name="leaders", workers_receive=True, num_worker_threads=3).start()
    with Actor(None, name="client") as client:
        server.register(peers.SUM, lambda msg: sum(msg.payload))
        assert client.request(server.address, peers.SUM, [1, 2], timeout=10).wait(10) == 3
    server.stop()
    assert [t.name for t in set(threading.enumerate()) - before] == []


def test_port_zero_picks_a_free_port_and_a_taken_port_is_a_clear_error():
    with Actor("tcp://127.0.0.1:0", name="first") as first:
        assert first.port > 0 and first.address == f"tcp://127.0.0.1:{first.port}"
        with pytest.raises(AddressInUseError, match=f"127.0.0.1:{first.port} is already in use"):
            Actor(first.address, name="second")


def test_a_stopped_actor_frees_its_port_at_once():
    port = free_port()
    # ZeroMQ lets go of a listener's port on its own thread, after the socket's close
    # returns; the stop waits for that.
    for _ in range(40):
        Actor(f"tcp://127.0.0.1:{port}", name="again").start().stop()


def test_an_actor_can_listen_on_an_ipc_path(tmp_path):
    address = f"ipc://{tmp_path}/mailbox"
    with Actor(address, name="server") as server, Actor(None, name="client") as client:
        server.register(peers.ECHO, lambda msg: msg.payload)
        assert server.address == address
        assert client.request(address, peers.ECHO, "over ipc", timeout=10).wait(10) == "over ipc"


def test_stop_leaves_no_thread_behind_and_fails_what_is_pending():
    server = Actor(name="stopping-server").start()
    server.register(peers.HANG, lambda msg: Future(), inline=True)  # never answered
    client = Actor(None, name="stopping-client").start()
    pending = client.request(server.address, peers.HANG, None)
    client.stop()
    server.stop()
    server.stop()  # idempotent
    with pytest.raises(ActorStoppedError):
        pending.wait(5)
    with pytest.raises(ActorStoppedError):
        client.request(server.address, peers.ECHO, None)
    left = [t.name for t in threading.enumerate() if t.name.startswith("stopping-")]
    assert left == []


def test_a_request_to_an_address_zeromq_refuses_fails_instead_of_hanging(client):
    for address in ("not-a-transport", "tcp://127.0.0.1:notaport"):
        with pytest.raises(PeerLostError, match="cannot send"):
            client.request(address, peers.ECHO, None).wait(10)


def test_an_actor_is_told_when_a_sender_dies(tmp_path):
    import multiprocessing as mp

    senders, lost = [], Future()
    server = Actor(name="server")
    server.register(peers.ECHO, lambda msg: senders.append(msg.sender) or msg.payload,
                    inline=True)
    server.on_sender_lost(lost.set_result)
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    with server:
        caller = ctx.Process(target=peers.call_then_hang, args=(server.address, ready),
                             daemon=True)
        caller.start()
        try:
            assert ready.get(timeout=30) == "answered"
            caller.kill()
            started = time.monotonic()
            assert lost.wait(10) == senders[0]
            within(started, limits.CONNECTION_CLOSED, "connection closed")
        finally:
            caller.kill()
            caller.join(10)


def test_a_dropped_actor_fails_its_pending_requests_and_its_threads_end():
    import gc

    from tests.waiting import wait_until

    server = Actor(name="server").start()
    server.register(peers.HANG, lambda msg: Future(), inline=True)  # never answered
    client = Actor(None, name="dropped-client").start()
    pending = client.request(server.address, peers.HANG, None)
    del client  # never stopped
    gc.collect()
    try:
        with pytest.raises(ActorStoppedError, match="dropped-client stopped"):
            pending.wait(5)
        assert wait_until(lambda: not [t for t in threading.enumerate()
                                if t.name.startswith("dropped-client")], timeout=5)
    finally:
        server.stop()
