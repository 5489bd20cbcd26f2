"""Introspection of a worker in safe mode and of one under CURVE: answered, in JSON."""
from __future__ import annotations

import os
import shutil

import pytest

import actors.debug as debug
from actors.keys import generate
from actors.runtime.io.security import Security, set_security
from tests.net import free_port
from tests.subprocesses import running
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(90)


def _worker(port: int, *flags: str) -> list:
    return ["-m", "actors.worker", "--rank", "0", "--world-size", "1", "--master-port",
            str(port), "--serve-forever", *flags]


def _answers(spec: str) -> bool:
    try:
        return any(s["state"] == "ok" for s in debug.snapshot(spec, timeout=1.0))
    except Exception:  # noqa: BLE001 - the store is not up yet
        return False


def test_a_worker_in_safe_mode_answers_status(tmp_path):
    port = free_port()
    with running(_worker(port, "--no-pickle"), tmp_path / "worker.log") as worker:
        assert wait_until(lambda: _answers(f"127.0.0.1:{port}"), 30, 0.2), \
            (tmp_path / "worker.log").read_text()
        [status] = debug.snapshot(f"127.0.0.1:{port}")
        assert status["name"] == "worker0" and status["pid"] == worker.pid
        assert [s["name"] for s in debug.stacks(f"127.0.0.1:{port}")] == ["worker0"]


@pytest.fixture
def keys(tmp_path):
    job, outsider = tmp_path / "job", tmp_path / "outsider"
    generate(job)
    generate(outsider)
    shutil.copyfile(job / "self.key", outsider / "server.key")
    yield job, outsider
    set_security(None)


def test_a_worker_under_curve_answers_the_job_and_refuses_an_outsider(tmp_path, keys):
    job, outsider = keys
    port = free_port()
    env = {**os.environ, "ACTORGRAD_CURVE_DIR": str(job)}
    with running(_worker(port), tmp_path / "worker.log", env=env):
        set_security(Security.from_dir(job))
        assert wait_until(lambda: _answers(f"127.0.0.1:{port}"), 30, 0.2), \
            (tmp_path / "worker.log").read_text()
        store = debug.probe.open_store(f"127.0.0.1:{port}")
        try:
            entries = debug.directory.entries(store)
        finally:
            store.close()
        set_security(Security.from_dir(outsider))
        [probe] = debug.probe.ask(entries, timeout=2.0)
        assert probe.state == debug.DEAD and "refused" in probe.reason
