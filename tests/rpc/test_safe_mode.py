"""Safe mode: a process that never loads a pickle from the wire, and still serves JSON.

`python -m actors.worker --no-pickle`, `python -m store.server --no-pickle` and
`init_rpc(..., allow_pickle=False)`, each in its own process. Pickled requests get
an error reply naming safe mode, a pickle that would run code never runs, and the
process keeps serving named calls and JSON store requests.
"""
import multiprocessing as mp
import pickle

import numpy as np
import pytest
import zmq

import actors
from actors.runtime import ProtocolError, SafeModeError
from actors.runtime.protocol import envelope
from actors.runtime.protocol import Flag, Kind
from actors.runtime.protocol.remote_errors import exception_from_payload
from store import TCPStore
from store.errors import StoreTimeoutError
from tests.net import free_port
from tests.rpc import exposed, safe_workers
from tests.rpc.named_worker import client, serving
from tests.subprocesses import running
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


class _CreatesFile:
    """Unpickling this opens (creates) `path`: proof of whether a pickle was loaded."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def pickled_request(address, kind, payload, flags=0):
    """Send a pickled request (JSON with `flags` JSON) from a plain DEALER; the exception
    its error reply carries."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(address)
        sock.send_multipart(envelope.encode(kind, 5, payload, flags))
        assert sock.poll(10_000), "no reply"
        frames = sock.recv_multipart()
    finally:
        sock.close()
    header = envelope.read_header(frames)
    return exception_from_payload(envelope.read_payload(header, frames))


@pytest.fixture(scope="module")
def safe_worker(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("safe"), "--no-pickle") as served:
        yield served


def test_a_pickled_call_gets_an_error_naming_safe_mode_and_never_runs(safe_worker, tmp_path):
    address, _ = safe_worker
    marker = tmp_path / "ran"
    error = pickled_request(address, Kind.RPC_CALL,
                            (exposed.plain_python, (_CreatesFile(marker),), {}, 0, {}))
    assert isinstance(error, SafeModeError) and "safe mode" in str(error)
    assert not marker.exists()
    with client(address) as calls:  # still serving
        assert calls.call("scale", np.ones(3, np.float32), 2.0).tolist() == [2.0, 2.0, 2.0]


def test_a_pickled_named_call_is_refused_too(safe_worker):
    address, _ = safe_worker
    error = pickled_request(address, Kind.RPC_CALL_NAMED, {"fn": "count", "args": []})
    assert isinstance(error, SafeModeError)


@pytest.mark.parametrize("kind, payload", [
    (Kind.RPC_CALL, {}), (Kind.RPC_CALL, ["print", ["x"], {}, 0, {}]), (Kind.RPC_REMOTE, []),
    (Kind.RREF_FORK, [7, 1]), (Kind.RREF_DELETE, [7, 1]), (Kind.RREF_REJECTED, [7, 1, "x"])])
def test_a_json_body_of_a_pickled_kind_is_a_protocol_error_naming_named_calls(
        safe_worker, kind, payload):
    address, _ = safe_worker
    error = pickled_request(address, kind, payload, Flag.JSON)
    assert isinstance(error, ProtocolError), error
    assert "takes a pickled body" in str(error) and "RPC_CALL_NAMED" in str(error)
    with client(address) as calls:  # still serving
        assert calls.call("scale", np.ones(2, np.float32), 3.0).tolist() == [3.0, 3.0]


def test_the_safe_workers_store_serves_python_clients_in_json(safe_worker, tmp_path):
    address, port = safe_worker
    marker = tmp_path / "ran"
    error = pickled_request(f"tcp://127.0.0.1:{port}", Kind.STORE_SET,
                            {"key": "k", "value": _CreatesFile(marker)})
    assert isinstance(error, SafeModeError) and not marker.exists()
    store = TCPStore("127.0.0.1", port, timeout=5)  # refused once, then JSON for good
    try:
        store.set("safe/k", b"\x00v")
        assert store.get("safe/k") == b"\x00v"
        assert store.add("safe/n", 3) == 3
        assert store.compare_set("safe/k", b"\x00v", "w") == b"w"
        with pytest.raises(StoreTimeoutError, match="safe/missing"):
            store.wait(["safe/missing"], 0.2)
        seen = []
        store.watch_key("safe/w", lambda old, new: seen.append(new))
        store.set("safe/w", "x")
        assert wait_until(lambda: seen == [b"x"], 10)
    finally:
        store.close()


def test_a_store_server_with_no_pickle_refuses_pickles_and_serves_json(tmp_path):
    port = free_port()
    log = tmp_path / "server.log"
    marker = tmp_path / "ran"
    with running(["-m", "store.server", "--port", str(port), "--no-pickle"], log) as server:
        assert wait_until(lambda: "store_server_serving" in log.read_text()
                          or server.poll() is not None, 60), log.read_text()
        error = pickled_request(f"tcp://127.0.0.1:{port}", Kind.STORE_SET,
                                {"key": "k", "value": _CreatesFile(marker)})
        assert isinstance(error, SafeModeError) and not marker.exists()
        store = TCPStore("127.0.0.1", port, timeout=10)
        try:
            store.set("k", "v")
            assert store.get("k") == b"v" and store.num_keys() >= 1
        finally:
            store.close()
        assert server.poll() is None
    assert "safe_mode=True" in log.read_text()


def test_a_safe_rank_in_a_mixed_world_serves_named_calls_and_refuses_pickles():
    port = free_port()
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    safe = ctx.Process(target=safe_workers.safe_rank, args=(port, results), daemon=True)
    safe.start()
    try:
        actors.init_rpc("driver", 0, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=60)
        try:
            with pytest.raises(SafeModeError, match="safe mode"):
                actors.rpc_sync("safe", exposed.plain_python, args=(1,))
            address = actors.get_worker_info("safe").address
            with actors.ExposedClient(address, timeout=30) as calls:
                assert calls.call("scale", np.arange(3.0), 2.0).tolist() == [0.0, 2.0, 4.0]
            assert "refused: this worker runs in safe mode" in results.get(timeout=60)
        finally:
            actors.shutdown()
        assert results.get(timeout=60) == "left"
        safe.join(30)
        assert safe.exitcode == 0
    finally:
        if safe.is_alive():
            safe.kill()
            safe.join(10)


def test_safe_mode_refuses_every_pickle_before_reading_it_and_can_be_lifted(tmp_path):
    from actors.runtime.protocol import serialization

    marker = tmp_path / "ran"
    body = pickle.dumps(_CreatesFile(marker))
    serialization.allow_pickle(False)
    try:
        with pytest.raises(SafeModeError, match="never loads a pickle"):
            serialization.loads(body)
        refused_reply = {"type": "builtins.ValueError", "message": "m",
                         "exception": pickle.dumps(_CreatesFile(marker))}
        assert not isinstance(exception_from_payload(refused_reply), OSError)
    finally:
        serialization.allow_pickle(True)
    assert not marker.exists()
    assert serialization.loads(pickle.dumps([1])) == [1]
