"""``python -m actors.top`` on a real job: one frame, JSON, and the live view in tmux."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest

import actors.debug as debug
from actors.top import COLUMNS, cells, rows
from tests.debugging.jobs import job
from tests.subprocesses import ROOT
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _stuck(spec: str) -> bool:
    return any("ranks 0, 1 waiting" in line for line in debug.collectives(spec))


def test_once_and_json_show_every_worker_and_the_collective_it_waits_in(tmp_path):
    with job("never_enters", tmp_path) as running:
        assert wait_until(lambda: _stuck(running.spec), 60, 0.2)
        data = subprocess.run([sys.executable, "-m", "actors.top", "--store", running.spec,
                               "--json", "--interval", "0.2"], cwd=ROOT, env=ENV,
                              capture_output=True, text=True, timeout=60)
        found = json.loads(data.stdout)
        assert sorted(row["rank"] for row in found) == [0, 1, 2]
        zero = next(row for row in found if row["rank"] == 0)
        assert zero["state"] == "collective" and zero["collective"]["waiting_for"] == 2
        assert zero["msgs_per_s_in"] is not None and zero["rss_bytes"] > 0
        frame = subprocess.run([sys.executable, "-m", "actors.top", "--store", running.spec,
                                "--once", "--interval", "0.2"], cwd=ROOT,
                               env={**ENV, "COLUMNS": "200"}, capture_output=True, text=True,
                               timeout=60)
        assert frame.returncode == 0, frame.stderr
        assert "all_reduce #1" in frame.stdout and "waits for rank 2" in frame.stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_live_view_refreshes_in_a_real_terminal(tmp_path):
    session = f"actorgrad-top-{uuid.uuid4().hex[:8]}"
    with job("never_enters", tmp_path) as running:
        assert wait_until(lambda: _stuck(running.spec), 60, 0.2)
        # the terminal gives its size: nothing inherited from the test run may override it
        command = (f"cd {ROOT} && env -u COLUMNS -u LINES PYTHONPATH={ROOT} {sys.executable} "
                   f"-m actors.top "
                   f"--store {running.spec} --interval 0.3")
        subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "220", "-y", "40",
                        command], check=True, timeout=10)
        try:
            def pane() -> str:
                return subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                                      capture_output=True, text=True, timeout=10).stdout

            assert wait_until(lambda: "waits for rank 2" in pane(), 30, 0.2), pane()
            text = pane()
            assert "actorgrad job at" in text and "all_reduce #1" in text
            assert all(f"{rank} " in text for rank in (0, 1, 2))
            subprocess.run(["tmux", "send-keys", "-t", session, "C-c"], timeout=10)
        finally:
            subprocess.run(["tmux", "kill-session", "-t", session], timeout=10,
                           capture_output=True)


def test_rates_come_from_two_snapshots():
    before = [{"host": "h", "pid": 1, "messages": {"PING": {"msgs_in": 10, "msgs_out": 4}}}]
    now = [{"host": "h", "pid": 1, "messages": {"PING": {"msgs_in": 30, "msgs_out": 4}},
            "rank": 0, "state": "ok"}]
    [row] = rows(before, now, 2.0)
    assert (row["msgs_per_s_in"], row["msgs_per_s_out"], row["state"]) == (10.0, 0.0, "idle")
    # a process that did not answer has no rates, not rates of 0
    [row] = rows(before, [{"host": "h", "pid": 1, "state": "hung", "reason": "no answer"}], 2.0)
    assert (row["msgs_per_s_in"], row["msgs_per_s_out"]) == (None, None)


def test_a_collective_that_failed_shows_with_its_error_until_the_next_one():
    failed = {"host": "h", "pid": 1, "state": "ok", "rank": 0, "collectives": [{
        "group": "0", "current": None,
        "last": {"op": "all_reduce", "step": 1, "ago_s": 2.04,
                 "error": "RankLostError: rank 2 lost: its connection dropped"}}]}
    [row] = rows([], [failed], 1.0)
    assert row["state"] == "idle"
    assert cells(row)[COLUMNS.index("collective")] == \
        "all_reduce #1 failed 2.0 s ago: RankLostError"
    done = {**failed, "collectives": [{"group": "0", "current": None, "last": {
        "op": "all_reduce", "step": 1, "ago_s": 2.0, "error": None}}]}
    assert rows([], [done], 1.0)[0]["collective"] is None


def _frame(width: int) -> str:
    from rich.console import Console

    from actors.top.__main__ import table

    stuck = {"host": "vm", "pid": 1447, "rank": 0, "name": "w0", "state": "ok",
             "rpc": {"waiting": [{"function": "__main__.relay", "age_s": 7.4, "peer": "w1"}]},
             "rss_bytes": 42_000_000, "cpu_s": 0.4}
    waiting = {"host": "vm", "pid": 1448, "rank": 1, "name": "w1", "state": "ok",
               "collectives": [{"group": "0", "current": {
                   "op": "all_reduce", "step": 1, "age_s": 4.3, "waiting_for": 2}}]}
    hung = {"host": "vm", "pid": 1449, "rank": 2, "name": "w2", "state": "hung",
            "reason": "no answer within 2 s"}
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(table(rows([], [stuck, waiting, hung], 1.0), "127.0.0.1:1", width))
    return console.export_text()


def test_a_frame_fits_the_terminal_and_never_splits_a_value():
    narrow = _frame(80)
    assert max(len(line) for line in narrow.splitlines()) <= 80, narrow
    # whole values, the least needed columns left out
    assert all(f"vm:{pid}" in narrow for pid in (1447, 1448, 1449)), narrow
    assert "__main__.relay" in narrow and "all_reduce #1" in narrow, narrow
    assert "contexts" not in narrow and "cpu s" not in narrow
    wide = _frame(200)
    assert all(column in wide for column in COLUMNS), wide


def test_a_worker_waiting_for_its_call_is_waiting_one_serving_is_busy():
    waiting = {"host": "h", "pid": 1, "state": "ok",
               "rpc": {"waiting": [{"function": "f", "age_s": 3.0, "peer": "w1"}]}}
    serving = {"host": "h", "pid": 2, "state": "ok", "rpc": {
        "waiting": [{"function": "g", "age_s": 1.0, "peer": "w2"}],
        "serving": [{"function": "f", "age_s": 2.0, "caller": "w0"}]}}
    assert [row["state"] for row in rows([], [waiting, serving], 1.0)] == ["waiting", "busy"]
