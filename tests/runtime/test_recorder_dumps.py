"""Flight-recorder files: written off the failing thread, whole, and before the process ends."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from actors.runtime.concurrency.threads import running_threads
from actors.runtime.introspection.dumps import WRITER, DumpWriter
from actors.runtime.introspection.recorder import KEPT_IN_TEMP, SENT, Traffic
from tests.subprocesses import ROOT
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(60)


def _traffic_with_one_send() -> Traffic:
    traffic = Traffic(8)
    traffic.record((time.monotonic_ns(), SENT, "tcp://127.0.0.1:1", 0x0200, 7, 20, 0, None,
                    None))
    return traffic


def _writers() -> list:
    return [t for t in running_threads() if t.name == "actorgrad-recorder-dump"]


def test_a_dump_returns_before_its_file_is_written_and_the_file_is_whole_once_flushed(
        tmp_path, monkeypatch):
    monkeypatch.setenv("ACTORGRAD_LOG_DIR", str(tmp_path))
    busy, release = threading.Event(), threading.Event()
    # the writer is held by an earlier dump: the next one must not wait for it
    WRITER.submit(str(tmp_path / "earlier"), "earlier",
                  lambda path: (busy.set(), release.wait(30)))
    assert busy.wait(10)
    path = _traffic_with_one_send().dump("rank_lost", {"name": "w0", "rank": 0})
    assert path is not None and path.startswith(str(tmp_path))
    assert not os.path.exists(path)
    release.set()
    assert WRITER.flush(time.monotonic() + 10)
    recorded = json.loads(open(path).read())
    assert recorded["reason"] == "rank_lost" and recorded["name"] == "w0"
    assert [(e["event"], e["id"], e["size"]) for e in recorded["entries"]] == [("send", 7, 20)]
    assert not list(tmp_path.glob("*.part"))
    assert wait_until(lambda: not _writers(), 10)  # the writer ends with nothing left


def test_the_entries_are_those_of_the_moment_of_the_dump_not_of_its_writing(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv("ACTORGRAD_LOG_DIR", str(tmp_path))
    busy, release = threading.Event(), threading.Event()
    WRITER.submit(str(tmp_path / "earlier"), "earlier",
                  lambda path: (busy.set(), release.wait(30)))
    assert busy.wait(10)
    traffic = _traffic_with_one_send()
    path = traffic.dump("request_timeout", {"name": "w0"})
    traffic.record((time.monotonic_ns(), SENT, "tcp://127.0.0.1:1", 0x0200, 8, 20, 0, None,
                    None))
    release.set()
    assert WRITER.flush(time.monotonic() + 10)
    assert [e["id"] for e in json.loads(open(path).read())["entries"]] == [7]


def test_a_write_that_fails_is_logged_and_the_next_dump_is_still_written(tmp_path):
    writer = DumpWriter()

    def fail(path: str) -> None:
        raise OSError("disk full")

    writer.submit(str(tmp_path / "first.json"), "first", fail)
    writer.submit(str(tmp_path / "second.json"), "second",
                  lambda path: open(path, "w").write("{}"))
    assert writer.flush(time.monotonic() + 10)
    assert json.loads((tmp_path / "second.json").read_text()) == {}


def test_flush_says_false_when_a_dump_is_still_being_written_at_its_deadline(tmp_path):
    writer = DumpWriter()
    release = threading.Event()
    writer.submit(str(tmp_path / "slow.json"), "slow", lambda path: release.wait(30))
    try:
        assert writer.flush(time.monotonic() + 0.05) is False
    finally:
        release.set()
    assert writer.flush(time.monotonic() + 10)


EXITS_AT_ONCE = """
import sys, time
from actors.runtime.introspection.recorder import KEPT_IN_TEMP, SENT, Traffic
traffic = Traffic(4096)
for i in range(4096):
    traffic.record((time.monotonic_ns(), SENT, "tcp://127.0.0.1:1", 0x0200, i, 20, 0, None,
                    None))
print(traffic.dump("rank_lost", {"name": "w0"}), flush=True)
"""


@pytest.mark.parametrize("ending", ["returns", "spawn", "fork"])
def test_a_process_that_ends_right_after_a_dump_still_writes_it_whole(tmp_path, ending):
    # a forked child imports nothing: it inherits the recorder and the exit registry
    script = EXITS_AT_ONCE if ending == "returns" else (
        "import multiprocessing, os, sys\n"
        "import actors.runtime.introspection.recorder\n"
        f"def child():\n    exec({EXITS_AT_ONCE!r}, {{}})\n"
        "if __name__ == '__main__':\n"
        f"    process = multiprocessing.get_context({ending!r}).Process(target=child)\n"
        "    process.start(); process.join(30); sys.exit(process.exitcode)\n")
    (tmp_path / "main.py").write_text(script)
    done = subprocess.run([sys.executable, str(tmp_path / "main.py")], cwd=ROOT,
                          capture_output=True, text=True, timeout=50,
                          env={**os.environ, "PYTHONPATH": str(ROOT),
                               "ACTORGRAD_LOG_DIR": str(tmp_path / "flight")})
    assert done.returncode == 0, done.stderr
    path = done.stdout.strip()
    assert f"path='{path}'" in done.stderr and "flight_recorder_written" in done.stderr
    assert len(json.loads(open(path).read())["entries"]) == 4096


DUMPS_DURING_EXIT = """
import time
from actors.runtime.introspection.recorder import KEPT_IN_TEMP, SENT, Traffic
from actors.runtime.process import at_exit
traffic = Traffic(8)
traffic.record((time.monotonic_ns(), SENT, "tcp://127.0.0.1:1", 0x0200, 7, 20, 0, None, None))
print(traffic.dump("first", {"name": "w0"}), flush=True)  # the writer's exit flush is due

def dump(reason):
    print(traffic.dump(reason, {"name": "w0"}), flush=True)

# an exit step before the deliveries (a group leaving) and one after every other
at_exit.on_exit(lambda deadline: dump("rank_lost"))
at_exit.after_deliveries(lambda deadline: dump("request_timeout"))
"""


def test_dumps_asked_for_during_the_exit_are_written_too(tmp_path):
    done = subprocess.run([sys.executable, "-c", DUMPS_DURING_EXIT], cwd=ROOT,
                          capture_output=True, text=True, timeout=50,
                          env={**os.environ, "PYTHONPATH": str(ROOT),
                               "ACTORGRAD_LOG_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    paths = done.stdout.split()
    assert len(paths) == 3
    reasons = [json.loads(open(path).read())["reason"] for path in paths]
    assert reasons == ["first", "rank_lost", "request_timeout"]


def test_the_shared_temporary_folder_keeps_only_the_newest_files(tmp_path, monkeypatch):
    monkeypatch.delenv("ACTORGRAD_LOG_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = tmp_path / "actorgrad-flight"
    folder.mkdir()
    for i in range(KEPT_IN_TEMP + 50):  # older files, the oldest first
        old = folder / f"flight-w{i}-old.json"
        old.write_text("{}")
        os.utime(old, (1_000_000 + i, 1_000_000 + i))
    other = folder / "notes.txt"  # not a recorder file: left alone
    other.write_text("mine")
    path = _traffic_with_one_send().dump("rank_lost", {"name": "w0"}, here=True)
    kept = sorted(p.name for p in folder.glob("flight-*.json"))
    assert len(kept) == KEPT_IN_TEMP and os.path.basename(path) in kept
    assert f"flight-w{KEPT_IN_TEMP + 49}-old.json" in kept and "flight-w0-old.json" not in kept
    assert other.exists()


def test_a_folder_of_ones_own_keeps_every_file(tmp_path, monkeypatch):
    monkeypatch.setenv("ACTORGRAD_LOG_DIR", str(tmp_path))
    for i in range(KEPT_IN_TEMP + 5):
        (tmp_path / f"flight-w{i}.json").write_text("{}")
    _traffic_with_one_send().dump("rank_lost", {"name": "w0"}, here=True)
    assert len(list(tmp_path.glob("flight-*.json"))) == KEPT_IN_TEMP + 6
