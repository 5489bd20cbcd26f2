"""``python -m actors.worker`` serves a driver's calls until the world shuts down."""
import os
import pathlib
import subprocess
import sys

import pytest

import actors
from tests.net import free_port
from tests.rpc import workers

pytestmark = pytest.mark.timeout(90)
ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_a_cli_worker_serves_the_driver_and_leaves_with_the_world(tmp_path):
    port = free_port()
    log = open(tmp_path / "worker.log", "w+")
    worker = subprocess.Popen(
        [sys.executable, "-m", "actors.worker", "--rank", "1", "--world-size", "2",
         "--master-addr", "127.0.0.1", "--master-port", str(port), "--name", "helper"],
        cwd=ROOT, stdout=log, stderr=log, env={**os.environ, "ACTORGRAD_LOG_LEVEL": "info"})
    try:
        actors.init_rpc("driver", 0, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=60)
        try:
            assert actors.rpc_sync("helper", workers.whoami) == "helper"
            assert actors.rpc_sync(1, workers.add, args=(20, 22)) == 42
        finally:
            actors.shutdown()
        assert worker.wait(30) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
    log.seek(0)
    text = log.read()
    for event in ("worker_starting", "worker_serving", "worker_done"):
        assert f"event='{event}'" in text


def test_the_worker_takes_its_flags_from_the_environment(tmp_path):
    port = free_port()
    env = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(port), "PATH": "/usr/bin:/bin"}
    worker = subprocess.Popen([sys.executable, "-m", "actors.worker"], cwd=ROOT,
                              env={**env, "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        actors.init_rpc("driver", 0, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=60)
        try:
            assert actors.rpc_sync("worker1", workers.whoami) == "worker1"
        finally:
            actors.shutdown()
        assert worker.wait(30) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)


def test_the_worker_explains_itself_with_help_and_refuses_missing_flags():
    out = subprocess.run([sys.executable, "-m", "actors.worker", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--rank" in out.stdout and "MASTER_ADDR" in out.stdout
    out = subprocess.run([sys.executable, "-m", "actors.worker"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert out.returncode == 2 and "--rank and --world-size are required" in out.stderr
