"""``python -m actors.debug trace``: every recorder of a real job merged into one timeline."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from actors.debug.trace import causal_shifts, clock_offset, merge
from tests.debugging.jobs import job
from tests.subprocesses import ROOT
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(180)

BIG_RECORDER = {"ACTORGRAD_FLIGHT_RECORDER_SIZE": "20000"}


def _check_tracks(events: list) -> None:
    """Every thread track's slices nest (the format allows no other overlap), and every
    arrow bound to its enclosing slice has one on its own track."""
    tracks = {}
    for e in sorted((e for e in events if e["ph"] == "X"), key=lambda e: (e["ts"], -e["dur"])):
        stack = tracks.setdefault((e["pid"], e["tid"]), [])
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
            stack.pop()
        assert not stack or e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"], \
            (stack[-1], e)
        stack.append(e)
    slices = [e for e in events if e["ph"] == "X"]
    loose = [f for f in events if f["ph"] == "s" or f["ph"] == "f" and f.get("bp") == "e"
             if not any(s["pid"] == f["pid"] and s["tid"] == f["tid"]
                        and s["ts"] <= f["ts"] <= s["ts"] + s["dur"] for s in slices)]
    assert not loose, loose[:5]


def _check_timeline(trace: dict) -> None:
    events = trace["traceEvents"]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts.keys() == ends.keys()
    late = [(starts[i], ends[i]) for i in starts if starts[i]["ts"] > ends[i]["ts"]]
    assert not late, late[:5]
    _check_tracks(events)
    calls = [e for e in starts.values() if e["name"] == "RPC_CALL"]
    assert len(calls) >= 2000  # 1,000 requests and their 1,000 replies
    assert sum(e["name"] == "PG_DATA" for e in starts.values()) >= 100 * 3 * 2
    slices = [e for e in events if e["ph"] == "X"]
    assert sum(e["name"].startswith("all_reduce #") for e in slices) >= 3 * 100
    assert sum(e["name"] == "__main__.echo" for e in slices) == 1000


@pytest.mark.slow
def test_a_trace_of_many_calls_and_collectives_orders_every_send_before_its_receipt(tmp_path):
    with job("traffic", tmp_path, env=BIG_RECORDER) as running:
        assert wait_until(lambda: all("traffic done" in running.log(r) for r in range(3)), 90,
                          0.2), [running.log(r) for r in range(3)]
        out = subprocess.run([sys.executable, "-m", "actors.debug", "trace", "--store",
                              running.spec, "-o", str(tmp_path / "live.json")], cwd=ROOT,
                             capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith(f"wrote {tmp_path / 'live.json'}:")
        _check_timeline(json.loads((tmp_path / "live.json").read_text()))
        # after the job: from the files SIGUSR1 writes
        for proc in running.procs:
            os.kill(proc.pid, signal.SIGUSR1)
        flight = tmp_path / "flight"
        assert wait_until(lambda: len(list(flight.glob("flight-*.json"))) == 3, 20)
        files = sorted(str(path) for path in flight.glob("flight-*.json"))
        out = subprocess.run([sys.executable, "-m", "actors.debug", "trace", *files, "-o",
                              str(tmp_path / "files.json")], cwd=ROOT, capture_output=True,
                             text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert out.returncode == 0, out.stderr
        _check_timeline(json.loads((tmp_path / "files.json").read_text()))


def _recording(pid, entries, mailbox, identity=None, offset=0, error=0):
    return {"name": f"p{pid}", "rank": pid, "pid": pid, "entries": entries,
            "mailboxes": [mailbox], "identities": [identity] if identity else [],
            "offset_ns": offset, "offset_error_ns": error}


def _entry(t, event, peer, ident, kind="RPC_CALL"):
    return {"t_ns": t, "event": event, "peer": peer, "kind": kind, "id": ident, "size": 10,
            "what": None}


def test_a_request_and_its_reply_become_two_arrows_and_slices_on_both_sides():
    caller = _recording(0, [{**_entry(1000, "send", "tcp://b", 5), "what": "mod.f"},
                            _entry(9000, "recv_reply", "tcp://b", 5),
                            {**_entry(9500, "send", "tcp://b", 6), "what": "mod.g"}], "tcp://a")
    callee = _recording(1, [_entry(3000, "recv", "beef", 5),
                            _entry(6000, "send_reply", "beef", 5),
                            _entry(7000, "op_start", "0", 0, kind="all_reduce"),
                            _entry(8000, "op_end", "0", 0, kind="all_reduce")], "tcp://b")
    events = merge([caller, callee])["traceEvents"]
    arrows = sorted((e["pid"], e["ts"], e["ph"]) for e in events if e["ph"] in "sf")
    assert arrows == [(0, 1.0, "s"), (0, 9.0, "f"), (1, 3.0, "f"), (1, 6.0, "s")]
    slices = sorted((e["pid"], e["name"], e["ts"], e["dur"]) for e in events if e["ph"] == "X")
    assert slices == [(0, "mod.f", 1.0, 8.0), (0, "mod.g (running)", 9.5, 0.0),
                      (1, "all_reduce #0", 7.0, 1.0), (1, "serve RPC_CALL", 3.0, 3.0)]


def test_calls_at_once_go_on_tracks_where_each_nests_and_arrows_follow_them():
    # f is sent, then g; f's reply comes first: the two slices overlap without nesting
    caller = _recording(0, [{**_entry(1000, "send", "tcp://b", 5), "what": "mod.f"},
                            {**_entry(2000, "send", "tcp://b", 6), "what": "mod.g"},
                            _entry(5000, "recv_reply", "tcp://b", 5),
                            _entry(8000, "recv_reply", "tcp://b", 6)], "tcp://a")
    callee = _recording(1, [_entry(1500, "recv", "beef", 5), _entry(2500, "recv", "beef", 6),
                            _entry(4500, "send_reply", "beef", 5),
                            _entry(7500, "send_reply", "beef", 6),
                            _entry(9000, "recv", "beef", 0, kind="PG_DATA"),
                            _entry(9500, "op_start", "0", 0, kind="all_reduce"),
                            _entry(9800, "op_end", "0", 0, kind="all_reduce")], "tcp://b")
    caller["entries"] += [_entry(8400, "op_start", "0", 0, kind="all_reduce"),
                          _entry(8500, "send", "tcp://b", 0, kind="PG_DATA"),
                          _entry(8600, "op_end", "0", 0, kind="all_reduce")]
    events = merge([caller, callee])["traceEvents"]
    _check_tracks(events)
    assert sorted((e["pid"], e["tid"], e["name"]) for e in events if e["ph"] == "X") == [
        (0, 0, "all_reduce #0"), (0, 0, "mod.f"), (0, 1, "mod.g"), (1, 0, "all_reduce #0"),
        (1, 0, "serve RPC_CALL"), (1, 1, "serve RPC_CALL")]
    arrows = sorted((e["pid"], e["ts"], e["ph"], e["tid"]) for e in events if e["ph"] in "sf")
    assert arrows == [(0, 1.0, "s", 0), (0, 2.0, "s", 1), (0, 5.0, "f", 0), (0, 8.0, "f", 1),
                      (0, 8.5, "s", 0), (1, 1.5, "f", 0), (1, 2.5, "f", 1), (1, 4.5, "s", 0),
                      (1, 7.5, "s", 1), (1, 9.0, "f", 0)]
    # the data came before its collective began: it binds to the next slice, not around
    early = next(e for e in events if e["ph"] == "f" and e["ts"] == 9.0)
    assert "bp" not in early
    assert {e["args"]["name"] for e in events if e["name"] == "thread_name"} == {
        "calls", "calls at once 1"}


def test_what_still_runs_lasts_until_the_recording_was_taken():
    caller = {**_recording(0, [{**_entry(1000, "send", "tcp://b", 6), "what": "mod.stuck"}],
                           "tcp://a"), "monotonic_ns": 4_001_000}
    events = merge([caller])["traceEvents"]
    assert [(e["name"], e["ts"], e["dur"]) for e in events if e["ph"] == "X"] == [
        ("mod.stuck (running)", 1.0, 4000.0)]


def test_a_file_that_is_not_a_recorder_is_one_line_and_status_1(tmp_path):
    files = {"trace.json": '{"traceEvents": []}', "cut.json": '{"entries": [', "list.json": "[]"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        out = subprocess.run([sys.executable, "-m", "actors.debug", "trace",
                              str(tmp_path / name), "-o", str(tmp_path / "out.json")],
                             cwd=ROOT, capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert out.returncode == 1, out
        assert out.stderr.count("\n") == 1 and "is not a flight recorder file" in out.stderr


def test_clients_that_number_their_requests_alike_are_told_apart_by_time():
    # two store clients, each numbering from 1: the store knows them only by identities
    # ZeroMQ made up; whichever sent id 1 just before it arrived sent it
    first = _recording(0, [_entry(1000, "send", "tcp://s", 1, "STORE_ADD"),
                           _entry(9000, "send", "tcp://s", 2, "STORE_ADD")], "tcp://a")
    second = _recording(1, [_entry(5000, "send", "tcp://s", 1, "STORE_ADD")], "tcp://b")
    store = _recording(2, [_entry(1100, "recv", "bb", 1, "STORE_ADD"),
                           _entry(5100, "recv", "aa", 1, "STORE_ADD"),
                           _entry(9100, "recv", "bb", 2, "STORE_ADD")], "tcp://s")
    events = merge([first, second, store])["traceEvents"]
    starts = {e["id"]: (e["pid"], e["ts"]) for e in events if e["ph"] == "s"}
    ends = {e["id"]: (e["pid"], e["ts"]) for e in events if e["ph"] == "f"}
    assert sorted((starts[i], ends[i]) for i in starts) == [
        ((0, 1.0), (2, 1.1)), ((0, 9.0), (2, 9.1)), ((1, 5.0), (2, 5.1))]


def test_clocks_are_moved_within_their_uncertainty_so_receipts_follow_sends():
    # p1's clock reads 50 µs early and is known to ±100 µs: its receipt would precede the send
    assert causal_shifts(2, {(0, 1): -50.0, (1, 0): 250.0}, [0.0, 100.0]) == [0.0, -50.0]
    # beyond the uncertainty nothing moves
    assert causal_shifts(2, {(0, 1): -500.0}, [0.0, 100.0]) == [0.0, 0.0]
    assert clock_offset(1000, 5000, 3000) == 3000
