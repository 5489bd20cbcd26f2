"""CURVE: every socket of a process follows one setting; an unauthorised peer is refused.

Servers are real processes started with ``ACTORGRAD_CURVE_DIR`` (the worker command,
the launcher and its workers); the test process plays each kind of client with
`actors.set_security`, restored to plain sockets after each test.
"""
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import zmq
import zmq.auth

import actors
from actors.keys import generate
from actors.runtime import Actor, PeerLostError
from actors.runtime.io.security import Security, set_security
from actors.runtime.io.sockets import refusal
from actors.runtime.protocol import Flag, Kind, envelope
from store import TCPStore
from store.errors import StoreConnectionError
from tests.elastic.conftest import agents  # noqa: F401 - the launcher fixture
from tests.elastic.launcher import Agent, script
from tests.net import free_port
from tests.subprocesses import ROOT, running
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)
REFUSAL_LIMIT = 5.0  # seconds an unauthorised call may take to fail (its timeout is 30)

@pytest.fixture
def keys(tmp_path):
    """The job's directory (its pair, authorised) and an outsider's, which knows the
    servers' public key but whose own key the job never authorised."""
    job, outsider = tmp_path / "job", tmp_path / "outsider"
    generate(job)
    generate(outsider)
    shutil.copyfile(job / "self.key", outsider / "server.key")
    return job, outsider

@pytest.fixture(autouse=True)
def plain_afterwards():
    yield
    set_security(None)

def _serve_curve(tmp_path, job):
    """A CURVE worker command serving tests.rpc.exposed; (process, store port, log)."""
    port = free_port()
    log = tmp_path / "worker.log"
    env = {**os.environ, "ACTORGRAD_CURVE_DIR": str(job), "ACTORGRAD_LOG_LEVEL": "info"}
    args = ["-m", "actors.worker", "--rank", "0", "--world-size", "1", "--master-port",
            str(port), "--serve-forever", "--import", "tests.rpc.exposed"]
    return args, env, port, log

def _address(port):
    store = TCPStore("127.0.0.1", port, timeout=30)
    try:
        return store.get("rpc/addresses/0").decode()
    finally:
        store.close()

def _refused_quickly(call):
    started = time.monotonic()
    with pytest.raises(PeerLostError) as raised:
        call()
    assert raised.value.reason == refusal()  # what the client's own setting leaves
    assert time.monotonic() - started < REFUSAL_LIMIT
    return raised.value

def test_an_unauthorised_peer_never_reaches_a_handler_and_the_worker_serves_on(tmp_path, keys):
    job, outsider = keys
    args, env, port, log = _serve_curve(tmp_path, job)
    with running(args, log, env=env) as worker:
        assert wait_until(lambda: "worker_serving" in log.read_text(), 60), log.read_text()
        set_security(Security.from_dir(job))
        address = _address(port)
        with actors.ExposedClient(address, timeout=30) as calls:
            before = calls.call("count")

        set_security(Security.from_dir(outsider))  # a CURVE key the job never authorised
        with actors.ExposedClient(address, timeout=30) as calls:
            _refused_quickly(lambda: calls.call("count"))
        set_security(None)  # no CURVE at all
        with actors.ExposedClient(address, timeout=30) as calls:
            _refused_quickly(lambda: calls.call("count"))
        with pytest.raises(StoreConnectionError, match="refused the handshake"):
            TCPStore("127.0.0.1", port, timeout=30)

        set_security(Security.from_dir(job))
        with actors.ExposedClient(address, timeout=30) as calls:
            assert calls.call("count") == before + 1  # neither refused call ran
            values = np.arange(4, dtype=np.float32)
            assert calls.call("scale", values, 2.0).tolist() == [0.0, 2.0, 4.0, 6.0]
        assert worker.poll() is None
    assert "curve_client_refused" in log.read_text()

def test_rpc_between_a_driver_and_a_launched_style_worker_under_curve(tmp_path, keys):
    job, _ = keys
    port = free_port()
    env = {**os.environ, "ACTORGRAD_CURVE_DIR": str(job), "ACTORGRAD_LOG_LEVEL": "info"}
    set_security(Security.from_dir(job))
    with running(["-m", "actors.worker", "--rank", "1", "--world-size", "2", "--master-port",
                  str(port), "--name", "helper"], tmp_path / "worker.log", env=env) as worker:
        from tests.rpc import workers

        actors.init_rpc("driver", 0, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=60)
        try:
            assert actors.rpc_sync("helper", workers.add, args=(20, 22)) == 42
            big = np.ones(1 << 18, dtype=np.float32)
            assert actors.rpc_sync("helper", np.sum, args=(big,)) == big.size
        finally:
            actors.shutdown()
        assert worker.wait(30) == 0

def test_a_curve_client_is_refused_by_a_plain_server(tmp_path, keys):
    job, _ = keys
    args, env, port, log = _serve_curve(tmp_path, job)
    del env["ACTORGRAD_CURVE_DIR"]
    with running(args, log, env=env):
        assert wait_until(lambda: "worker_serving" in log.read_text(), 60), log.read_text()
        address = _address(port)  # plain, as the server
        set_security(Security.from_dir(job))
        with actors.ExposedClient(address, timeout=30) as calls:
            _refused_quickly(lambda: calls.call("count"))
        # The I/O-thread path (rpc_async, store sessions) fails fast the same way.
        client = Actor(None, name="curve-client").start()
        try:
            future = client.request(address, 0x0001, "ping", timeout=30)
            started = time.monotonic()
            with pytest.raises(PeerLostError, match="refused the handshake"):
                future.wait(30)
            assert time.monotonic() - started < REFUSAL_LIMIT
        finally:
            client.stop()

@pytest.mark.slow
def test_a_launched_process_group_all_reduces_under_curve_dir(tmp_path, keys, agents):  # noqa: F811
    job, _ = keys
    path = script(tmp_path, "allreduce.py", """
        import numpy as np
        import actors.distributed as dist
        from actors.runtime.io.security import current_security

        assert current_security() is not None
        dist.init_process_group()
        value = np.full(4, float(dist.get_rank() + 1))
        dist.all_reduce(value)
        print(f"rank {dist.get_rank()}: all_reduce {value.tolist()}", flush=True)
        dist.destroy_process_group()
    """)
    agent = Agent(["--standalone", "--nproc-per-node", "2", path],
                  env={"ACTORGRAD_CURVE_DIR": str(job)})
    agents.append(agent)
    assert agent.finish() == 0, agent.output
    for rank in (0, 1):
        assert f"rank {rank}: all_reduce [3.0, 3.0, 3.0, 3.0]" in agent.output

def _threads():
    return {t.ident for t in threading.enumerate()}

def test_the_zap_handler_starts_with_the_first_server_and_stops_with_the_setting(keys):
    job, _ = keys
    before = _threads()
    set_security(Security.from_dir(job))
    server = Actor("tcp://127.0.0.1:0", name="curve-server").start()
    try:
        assert len(_threads() - before) >= 2  # the actor's threads and the ZAP handler's
    finally:
        server.stop()
    set_security(None)
    assert wait_until(lambda: _threads() <= before, 10), _threads() - before

def _pinged(address, client_dir, server_key):
    """Whether a raw DEALER with `client_dir`'s pair gets a PING answered (1.5 s at most)."""
    public, secret = zmq.auth.load_certificate(client_dir / "self.key_secret")
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = \
        server_key, public, secret
    try:
        sock.connect(address)
        sock.send_multipart(envelope.encode(Kind.PING, 1, "hi", Flag.JSON))
        return bool(sock.poll(1500))
    finally:
        sock.close()


def test_servers_keep_their_clients_when_the_setting_changes_and_refuse_all_once_cleared(keys):
    job, outsider = keys
    job_setting = Security.from_dir(job)
    set_security(job_setting)
    server = Actor("tcp://127.0.0.1:0", name="curve-kept").start()
    try:
        assert _pinged(server.address, job, job_setting.public_key)
        # Another setting, whose own clients include the outsider, for sockets made now
        set_security(Security.from_dir(outsider))
        Actor("tcp://127.0.0.1:0", name="curve-other").start().stop()
        assert not _pinged(server.address, outsider, job_setting.public_key)
        assert _pinged(server.address, job, job_setting.public_key)
        set_security(None)  # no ZAP handler any more: refuse everyone rather than admit
        assert not _pinged(server.address, outsider, job_setting.public_key)
        assert not _pinged(server.address, job, job_setting.public_key)
    finally:
        server.stop()


def test_a_client_that_expects_another_server_key_is_told_so(keys):
    job, outsider = keys
    job_setting = Security.from_dir(job)
    set_security(job_setting)
    server = Actor("tcp://127.0.0.1:0", name="curve-server").start()
    try:
        # The job's own pair, authorised, but a server.key that is not the server's
        outsider_key = Security.from_dir(outsider).public_key
        set_security(Security(job_setting.public_key, job_setting.secret_key,
                              server_key=outsider_key))
        with actors.ExposedClient(server.address, timeout=30) as calls:
            refused = _refused_quickly(lambda: calls.call("count"))
        assert "server key (server.key)" in str(refused)
    finally:
        server.stop()


@pytest.mark.slow
def test_the_keys_command_writes_an_authorised_pair_and_never_overwrites_it(tmp_path):
    directory = tmp_path / "keys"
    command = [sys.executable, "-m", "actors.keys", "generate", str(directory)]
    made = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert (directory / "self.key_secret").stat().st_mode & 0o777 == 0o600
    assert (directory / "authorized" / "self.key").read_bytes() == \
        (directory / "self.key").read_bytes()
    security = Security.from_dir(directory)
    assert security.server_key == security.public_key
    assert security.authorized == {security.public_key}
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "exists" in again.stderr
    client = subprocess.run([*command, "--name", "client"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert client.returncode == 0
    assert len(Security.from_dir(directory).authorized) == 2

def test_a_key_directory_without_keys_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m actors.keys generate"):
        Security.from_dir(tmp_path)
    with pytest.raises(ValueError, match="40 characters"):
        Security(b"short", b"x" * 40)
    with pytest.raises(TypeError, match="actors.Security"):
        set_security("keys/")

def test_a_bad_curve_dir_in_the_environment_fails_the_first_socket_clearly(tmp_path):
    env = {**os.environ, "ACTORGRAD_CURVE_DIR": str(tmp_path / "none")}
    out = subprocess.run([sys.executable, "-c", "from actors.runtime import Actor; Actor()"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "self.key_secret is missing" in out.stderr



def test_attached_sockets_follow_the_setting_too(keys):
    import zmq

    job, _ = keys
    set_security(Security.from_dir(job))
    receiver = Actor(None, name="curve-pull").start()
    sender = Actor(None, name="curve-push").start()
    got = []
    try:
        inbound = receiver.attach("tcp://127.0.0.1:0", lambda frames: got.append(frames[0].bytes),
                                  socket_type=zmq.PULL, bind=True)
        sender.attach(inbound.endpoint, socket_type=zmq.PUSH).send([b"sealed"])
        assert wait_until(lambda: got == [b"sealed"], 10)
        set_security(None)  # a plain pusher: its handshake is refused, nothing arrives
        plain = zmq.Context.instance().socket(zmq.PUSH)
        plain.setsockopt(zmq.LINGER, 0)
        monitor = plain.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                                           | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                                           | zmq.EVENT_DISCONNECTED)
        try:
            plain.connect(inbound.endpoint)
            plain.send(b"plain")
            assert monitor.poll(10_000)  # the server turned it away
        finally:
            plain.disable_monitor()
            monitor.close(0)
            plain.close(0)
        assert got == [b"sealed"]
    finally:
        sender.stop()
        receiver.stop()
