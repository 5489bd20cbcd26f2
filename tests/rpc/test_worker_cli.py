"""``python -m actors.worker`` serves a driver's calls until the world shuts down."""
import subprocess
import sys

import pytest

import actors
from tests.net import free_port
from tests.rpc import workers
from tests.subprocesses import ROOT, logged_events, running

pytestmark = pytest.mark.timeout(90)


def drive(port: int, worker_name: str) -> None:
    """Join the worker's world as the driver, call it, and shut the world down."""
    actors.init_rpc("driver", 0, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=60)
    try:
        assert actors.rpc_sync(worker_name, workers.whoami) == worker_name
        assert actors.rpc_sync(1, workers.add, args=(20, 22)) == 42
    finally:
        actors.shutdown()


def test_a_cli_worker_serves_the_driver_and_leaves_with_the_world(tmp_path):
    port = free_port()
    log = tmp_path / "worker.log"
    with running(["-m", "actors.worker", "--rank", "1", "--world-size", "2",
                  "--master-addr", "127.0.0.1", "--master-port", str(port),
                  "--name", "helper"], log) as worker:
        drive(port, "helper")
        assert worker.wait(30) == 0
    assert {"worker_starting", "worker_serving", "worker_done"} <= logged_events(log)


def test_the_worker_takes_its_flags_from_the_environment():
    port = free_port()
    env = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(port), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    with running(["-m", "actors.worker"], env=env) as worker:
        drive(port, "worker1")
        assert worker.wait(30) == 0


def test_the_worker_explains_itself_with_help_and_refuses_missing_flags():
    out = subprocess.run([sys.executable, "-m", "actors.worker", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--rank" in out.stdout and "MASTER_ADDR" in out.stdout
    out = subprocess.run([sys.executable, "-m", "actors.worker"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert out.returncode == 2 and "--rank and --world-size are required" in out.stderr
