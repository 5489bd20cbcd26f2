"""Quiet by default, as torch is: library events below WARNING show only on request."""
import os
import re
import subprocess
import sys

import pytest

from tests.subprocesses import ROOT

pytestmark = pytest.mark.timeout(120)

LIBRARY_USE = """
import actors
from actors.runtime.process.log import get_logger
from store import TCPStore
store = TCPStore("127.0.0.1", 0, world_size=1, is_master=True)
store.set("k", b"v")
store.close()
actor = actors.Actor("tcp://127.0.0.1:0", name="a").start()
actor.stop()
get_logger("actors.runtime.actor").warning("something_worth_a_warning")
"""


def _run(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "ACTORGRAD_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**base, **env},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stderr


def _levels(output: str) -> set:
    return set(re.findall(r"level='(\w+)'", output))


def test_library_info_events_are_hidden_by_default_as_torch_shows_only_warnings():
    output = _run(LIBRARY_USE)
    assert _levels(output) == {"warning"}, output
    assert "something_worth_a_warning" in output


def test_ACTORGRAD_LOG_LEVEL_info_shows_the_lifecycle_events():
    output = _run(LIBRARY_USE, ACTORGRAD_LOG_LEVEL="info")
    assert "event='actor_started'" in output and "event='actor_stopped'" in output


@pytest.mark.slow
def test_the_launcher_tells_people_in_plain_lines_and_machines_in_its_log_dir(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text("import actors\nactors.init_rpc()\nactors.shutdown()\nprint('done')\n")
    base = {k: v for k, v in os.environ.items() if k != "ACTORGRAD_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-m", "actors.launch", "--nproc-per-node", "2",
                           "--rdzv-id", "plain", "--log-dir", str(tmp_path / "logs"),
                           str(script)], cwd=ROOT, env={**base, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("launch: 2 workers of worker.py, store 127.0.0.1:"), lines
    assert "launch: round 0: node 0 of 1 runs ranks 0-1 of 2 (pids " in done.stderr
    assert lines[-1] == "launch: 2 workers succeeded", lines
    assert "level=" not in done.stderr and "event=" not in done.stderr
    assert done.stdout.splitlines() == ["[rank0]: done", "[rank1]: done"] or \
        sorted(done.stdout.splitlines()) == ["[rank0]: done", "[rank1]: done"]
    [folder] = (tmp_path / "logs").glob("plain_*")  # this agent's: <run id>_<random>
    events = (folder / "events.log").read_text()
    for event in ("agent_started", "agent_round_started", "agent_workers_succeeded"):
        assert f"event='{event}'" in events, events
