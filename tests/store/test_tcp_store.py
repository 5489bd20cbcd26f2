"""TCPStore specifics: ports, joining workers, lost servers and clients, the standalone server,
and a client that speaks the wire protocol with JSON only."""
import contextlib
import json
import multiprocessing as mp
import signal
import struct
import subprocess
import sys
import time

import pytest
import zmq

from actors.runtime import AddressInUseError
from store import TCPStore
from store.errors import StoreConnectionError, StoreTimeoutError
from tests import limits
from tests.limits import within
from tests.net import free_port
from tests.store import tcp_workers
from tests.subprocesses import logged_events, running
from tests.waiting import raised_by

pytestmark = pytest.mark.timeout(60)
ctx = mp.get_context("spawn")


@pytest.fixture
def server_process():
    ready = ctx.Queue()
    process = ctx.Process(target=tcp_workers.serve, args=(ready,), daemon=True)
    process.start()
    try:
        yield ready.get(timeout=30), process
    finally:
        process.kill()
        process.join(10)


def test_port_zero_picks_a_free_port_that_clients_reach():
    with TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=5) as master:
        assert master.port > 0
        with TCPStore("127.0.0.1", master.port, timeout=5) as client:
            client.set("k", "v")
            assert master.get("k") == b"v"


def test_a_port_already_in_use_is_a_clear_error():
    with TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=5) as master:
        with pytest.raises(AddressInUseError, match=f":{master.port} is already in use"):
            TCPStore("127.0.0.1", master.port, is_master=True, timeout=5)


def test_a_closed_master_frees_its_port_at_once_for_the_next_one():
    # ZeroMQ lets go of a listener's port on its own thread, after the socket's close
    # returns; closing the store waits for that.
    port = free_port()
    for attempt in range(40):
        master = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=5)
        master.set("attempt", str(attempt))
        master.close()


def test_the_master_waits_for_world_size_workers_to_join():
    port = free_port()
    done = ctx.Queue()
    workers = [ctx.Process(target=tcp_workers.join_world, args=(port, 3, done), daemon=True)
               for _ in range(2)]
    for w in workers:
        w.start()
    try:
        with TCPStore("127.0.0.1", port, world_size=3, is_master=True, timeout=30) as master:
            assert sorted(done.get(timeout=30) for _ in workers) == sorted(w.pid for w in workers)
            assert master.num_keys() == 0  # the join bookkeeping is not a user key
    finally:
        for w in workers:
            w.join(10)
            if w.is_alive():
                w.kill()


def test_wait_for_workers_times_out_saying_how_many_joined_of_how_many():
    started = time.monotonic()
    with pytest.raises(StoreTimeoutError, match="1 of 3 workers joined"):
        TCPStore("127.0.0.1", 0, world_size=3, is_master=True, timeout=0.5)
    within(started + 0.5, limits.AFTER_TIMEOUT, "after a timeout")


def test_an_unreachable_server_is_a_connection_error_and_torchs_dist_network_error():
    from store import DistNetworkError

    started = time.monotonic()
    with pytest.raises(StoreConnectionError, match="unreachable") as info:
        TCPStore("127.0.0.1", free_port(), timeout=0.5)
    within(started + 0.5, limits.AFTER_TIMEOUT, "after a timeout")  # a client waits it out
    assert isinstance(info.value, (ConnectionError)) and isinstance(info.value, DistNetworkError)


def test_a_killed_server_makes_clients_fail_fast_with_a_connection_error(server_process):
    port, process = server_process
    with TCPStore("127.0.0.1", port, timeout=30) as client:
        client.set("k", b"v")
        process.kill()
        process.join(10)
        started = time.monotonic()
        with pytest.raises(StoreConnectionError):
            client.get("k")
        with pytest.raises(StoreConnectionError, match="lost"):
            client.add("n", 1)
        within(started, limits.CONNECTION_CLOSED, "connection closed")


def test_a_blocked_get_fails_fast_when_the_server_dies(server_process):
    port, process = server_process
    import threading

    errors = []
    with TCPStore("127.0.0.1", port, timeout=30) as client:
        client.check(["warm-up"])
        blocked = threading.Thread(target=lambda: errors.append(raised_by(client.get, "never")))
        blocked.start()
        # Make sure the get is parked on the server before killing it.
        with TCPStore("127.0.0.1", port, timeout=30) as probe:
            probe.set("probe", b"1")
        process.kill()
        started = time.monotonic()
        blocked.join(10)
        assert not blocked.is_alive()
        within(started, limits.CONNECTION_CLOSED, "connection closed")
    assert isinstance(errors[0], StoreConnectionError)



def test_a_killed_client_does_not_disturb_the_server_or_other_clients(server_process):
    port, _ = server_process
    ready = ctx.Queue()
    doomed = ctx.Process(target=tcp_workers.block_on_missing_key, args=(port, ready), daemon=True)
    doomed.start()
    try:
        assert ready.get(timeout=30) == "parked"
        doomed.kill()
        doomed.join(10)
        with TCPStore("127.0.0.1", port, timeout=10) as other:
            assert other.get("client-was-here") == b"1"
            other.set("watched", b"changed")  # its watcher is gone: the push goes nowhere
            other.set("never-set", b"now")  # its parked get is gone: the reply goes nowhere
            assert other.add("counter", 5) == 5
            assert other.get("never-set") == b"now"
    finally:
        if doomed.is_alive():
            doomed.kill()


def test_the_standalone_server_serves_clients_and_stops_on_sigterm(tmp_path):
    port = free_port()
    log = tmp_path / "server.log"
    with running(["-m", "store.server", "--host", "127.0.0.1", "--port", str(port)],
                 log) as server:
        with TCPStore("127.0.0.1", port, timeout=20) as client:
            client.set("survives", b"trainers")
            assert client.get("survives") == b"trainers"
        server.send_signal(signal.SIGTERM)
        assert server.wait(20) == 0
    assert {"store_server_started", "store_server_serving",
            "store_server_stopped"} <= logged_events(log)


def test_the_standalone_server_explains_itself_with_help():
    out = subprocess.run([sys.executable, "-m", "store.server", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "--host" in out.stdout and "--port" in out.stdout


def _json_request(sock, kind: int, req_id: int, body: dict, buffers=()):
    header = struct.pack("<2sBBHHQ", b"AG", 1, 0x08, kind, len(buffers), req_id)
    sock.send_multipart([header, json.dumps(body).encode(), *buffers])
    frames = sock.recv_multipart()
    _, _, flags, _, nbufs, echoed = struct.unpack("<2sBBHHQ", frames[0])
    assert echoed == req_id and len(frames) == 2 + nbufs
    return flags, json.loads(frames[1]), frames[2:]


@contextlib.contextmanager
def _json_client(port: int):
    """A plain DEALER to the store at `port`, on a context of its own, as a program in
    another language would have."""
    zctx = zmq.Context()
    sock = zctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.RCVTIMEO, 10_000)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(f"tcp://127.0.0.1:{port}")
    try:
        yield sock
    finally:
        sock.close(0)
        zctx.term()


def test_a_client_without_pickle_talks_to_the_store_in_json(server_process):
    """Only struct, json and zmq: what a program in another language would do (docs/PROTOCOL.md)."""
    port, _ = server_process
    with _json_client(port) as sock:
        flags, body, _ = _json_request(sock, 0x0100, 1, {"key": "lang", "value": {"$buf": 0}},
                                       [b"\x00binary\xff"])
        assert flags == 0x09 and body is None  # RESPONSE | JSON, null result
        flags, body, bufs = _json_request(sock, 0x0101, 2, {"key": "lang", "timeout": 5})
        assert body == {"$buf": 0} and bufs == [b"\x00binary\xff"]
        flags, body, _ = _json_request(sock, 0x0102, 3, {"key": "n", "amount": 41})
        assert body == 41
        flags, body, _ = _json_request(sock, 0x0101, 4, {"key": "absent", "timeout": 0.1})
        assert flags & 0x02 and body["type"] == "store.errors.StoreTimeoutError"


def test_a_json_wait_with_a_nan_timeout_gets_an_error_and_the_server_serves_on(server_process):
    port, _ = server_process
    with _json_client(port) as sock:
        # json.dumps writes NaN as the bare token, as other languages' encoders may
        flags, body, _ = _json_request(sock, 0x0101, 1, {"key": "absent",
                                                         "timeout": float("nan")})
        assert flags & 0x02 and body["type"] == "builtins.ValueError", body
        assert "nan" in body["message"]
        flags, body, _ = _json_request(sock, 0x0100, 2, {"key": "after", "value": "v"})
        assert flags == 0x09 and body is None
        store = TCPStore("127.0.0.1", port, timeout=10)
        try:
            assert store.get("after") == b"v"
        finally:
            store.close()


def test_torchs_use_libuv_is_accepted_and_a_listen_fd_refused():
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, use_libuv=False)
    try:
        assert TCPStore("127.0.0.1", server.port, use_libuv=True).check([]) is True
    finally:
        server.close()
    with pytest.raises(ValueError, match="master_listen_fd"):
        TCPStore("127.0.0.1", 0, is_master=True, master_listen_fd=3)
