"""The debugging commands against a real job of three processes that is stuck on purpose."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import actors.debug as debug
from actors.debug.chains import format_chain
from tests.debugging.jobs import job
from tests.leftovers import resources
from tests.net import free_port
from tests.subprocesses import ROOT
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

SLOW_WAIT = {"ACTORGRAD_WAIT_WARN_AFTER": "0.3", "ACTORGRAD_WAIT_WARN_EVERY": "30"}


def command(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "actors.debug", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def _published(spec: str, count: int) -> bool:
    return len(debug.snapshot(spec, timeout=1.0)) >= count


# async_chain: w1's function returned its call's future, and no thread of w1 waits on it;
# then_chain: its call to w2 is made later, in a callback of another call's future
@pytest.mark.parametrize("scenario", ["chain", "async_chain", "then_chain"])
def test_calls_names_the_chain_the_stuck_function_and_its_age(scenario, tmp_path):
    with job(scenario, tmp_path) as running:
        assert wait_until(lambda: any(c.function == "__main__.stuck_here"
                                      for c in debug.calls(running.spec)),
                          60, 0.2), [r.read_text() for r in running.logs]
        asked = time.monotonic()
        chains = debug.calls(running.spec)
        assert time.monotonic() - asked < 2.0
        assert [(c.workers, c.function) for c in chains] == \
            [(["w0", "w1", "w2"], "__main__.stuck_here")]
        out = command("calls", "--store", running.spec)
        assert out.returncode == 0, out.stderr
        line = next(line for line in out.stdout.splitlines() if line.startswith("w0"))
        assert re.fullmatch(r"w0 → w1 → w2  __main__\.stuck_here  \d+\.\d s", line), line
        # every worker thread of w2 is blocked, and w2 still answers
        w2 = next(s for s in debug.snapshot(running.spec) if s.get("name") == "w2")
        assert w2["state"] == "ok" and w2["rpc"]["serving"][0]["function"].endswith("stuck_here")
        assert w2["messages"]["RPC_CALL"]["msgs_in"] >= 1


def test_calls_names_a_process_that_does_not_answer(tmp_path):
    with job("chain", tmp_path) as running:
        assert wait_until(lambda: any(len(c.workers) == 3 for c in debug.calls(running.spec)),
                          60, 0.2), [r.read_text() for r in running.logs]
        os.kill(running.procs[2].pid, signal.SIGSTOP)
        try:
            out = command("calls", "--store", running.spec, "--timeout", "1")
        finally:
            os.kill(running.procs[2].pid, signal.SIGCONT)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert re.fullmatch(r"w0 → w1 → w2  __main__\.stuck_here  \d+\.\d s", lines[0]), lines
        assert lines[1:] == ["rank 2 did not answer in time: hung or stopped "
                             "(no answer within 1 s)"], lines


def test_calls_says_which_processes_keep_no_table_of_calls(tmp_path):
    with job("chain", tmp_path, env={"ACTORGRAD_INTROSPECTION": "0"}) as running:
        def stuck() -> bool:
            return any("stuck_here" in line for answer in debug.stacks(running.spec, 2)
                       for thread in answer["threads"] for line in thread["stack"])

        assert wait_until(stuck, 60, 0.2), [r.read_text() for r in running.logs]
        out = command("calls", "--store", running.spec)
        assert out.returncode == 0, out.stderr
        # not a part of the chain (w1's call to w2 alone) that reads as the whole
        assert out.stdout.splitlines() == [
            "no calls in flight", "ranks 0-2: introspection is off (ACTORGRAD_INTROSPECTION=0), "
            "their calls are not in view"], out.stdout


@pytest.mark.parametrize("args", [["actors.debug", "status"], ["actors.top", "--json"]])
def test_a_reader_that_stops_reading_ends_the_command_without_a_traceback(tmp_path, args):
    with job("never_enters", tmp_path) as running:
        assert wait_until(lambda: _published(running.spec, 3), 60, 0.2)
        # `... | head -0`: the pipe's reader is gone before anything is written
        proc = subprocess.Popen([sys.executable, "-m", *args, "--store", running.spec],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        proc.stdout.close()
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 1 and b"Traceback" not in err, err.decode()


JOINS_ALONE = {
    "init_rpc": "import actors; actors.init_rpc('w0', 0, 2)",
    "init_process_group": "import actors.distributed as dist; dist.init_process_group()",
}


@pytest.mark.parametrize("joining", sorted(JOINS_ALONE))
def test_sigusr1_dumps_a_process_still_waiting_for_the_others_to_join(tmp_path, joining):
    log = tmp_path / "rank0.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", JOINS_ALONE[joining]], cwd=ROOT, stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **SLOW_WAIT, "PYTHONPATH": str(ROOT), "MASTER_ADDR": "127.0.0.1",
                 "MASTER_PORT": str(free_port()), "RANK": "0", "WORLD_SIZE": "2",
                 "ACTORGRAD_LOG_DIR": str(tmp_path / "flight")})
    try:
        assert wait_until(lambda: "waiting for rank 1 of 2 to join" in log.read_text(), 60, 0.1)
        os.kill(proc.pid, signal.SIGUSR1)
        assert wait_until(lambda: any((tmp_path / "flight").glob("flight-*.json")), 10), \
            (proc.poll(), log.read_text())
        recorded = json.loads(next((tmp_path / "flight").glob("flight-*.json")).read_text())
        assert any(t["name"] == "MainThread" and any(joining in line for line in t["stack"])
                   for t in recorded["threads"])
        assert proc.poll() is None  # it goes on waiting
    finally:
        proc.kill()
        proc.wait(10)


def test_a_job_that_joined_through_etcd_is_found_there(tmp_path, etcd_endpoint, etcd_prefix):
    url = f"etcd://{etcd_endpoint}{etcd_prefix}"
    with job("chain", tmp_path, env={"JOB_INIT_METHOD": url}) as running:
        assert wait_until(lambda: any(len(c.workers) == 3 for c in debug.calls(url)), 60, 0.2), \
            [r.read_text() for r in running.logs]
        out = command("calls", "--store", url)
        assert out.returncode == 0, out.stderr
        assert re.search(r"^w0 → w1 → w2  __main__\.stuck_here  \d+\.\d s$", out.stdout, re.M), \
            out.stdout


def test_stacks_show_where_the_stuck_function_waits(tmp_path):
    with job("chain", tmp_path) as running:
        assert wait_until(lambda: any(len(c.workers) == 3 for c in debug.calls(running.spec)),
                          60, 0.2)
        out = command("stacks", "--store", running.spec, "--rank", "2")
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("== rank 2 w2")
        assert "in stuck_here" in out.stdout and "in wait_released" in out.stdout
        assert "== rank 0" not in out.stdout


def _waiting_line(spec: str, needle: str) -> bool:
    return any(needle in line for line in debug.collectives(spec))


def test_collectives_names_a_rank_that_never_entered(tmp_path):
    with job("never_enters", tmp_path, env=SLOW_WAIT) as running:
        assert wait_until(lambda: _waiting_line(running.spec, "ranks 0, 1 waiting"), 60, 0.2), \
            debug.collectives(running.spec)
        out = command("collectives", "--store", running.spec)
        assert out.returncode == 0, out.stderr
        assert re.search(r"all_reduce #1 \(16 B\): ranks 0, 1 waiting \d+\.\d s; rank 2 has "
                         r"not entered it \(last: all_reduce #0, \d+\.\d s ago\)",
                         out.stdout), out.stdout
        # the waiting ranks said so in their own logs, after the (shortened) threshold
        assert wait_until(lambda: "all_reduce #1 waiting for rank 2 for" in running.log(0), 10)


def test_collectives_names_a_rank_that_entered_with_another_shape(tmp_path):
    with job("different_shape", tmp_path) as running:
        assert wait_until(lambda: all("collective failed" in running.log(r) for r in range(3)),
                          60, 0.2), [running.log(r) for r in range(3)]
        reasons = [json.loads(path.read_text())["reason"]
                   for path in (tmp_path / "flight").glob("flight-*.json")]
        assert "collective_mismatch" in reasons, reasons
        lines = debug.collectives(running.spec)
        assert any(re.search(r"all_reduce #1 failed on ranks 0, 1, 2: .*rank 2 called "
                             r"all_reduce\(SUM, <f4, \(8,\)\)", line) for line in lines), lines


def test_collectives_names_a_rank_that_entered_another_collective(tmp_path):
    """Rank 2 finds the mismatch and tells the others, which wait for its part: every rank
    fails at once, and the command names both calls."""
    with job("different_op", tmp_path) as running:
        assert wait_until(lambda: all("collective failed: CollectiveMismatchError"
                                      in running.log(r) for r in range(3)), 60, 0.2), \
            [running.log(r) for r in range(3)]
        lines = debug.collectives(running.spec)
        assert any(re.search(r"all_reduce #1 failed on ranks 0, 1, 2: .*rank 2 called "
                             r"broadcast\(0, <f4, \(4,\)\) but rank 0 called all_reduce",
                             line) for line in lines), lines


def test_collectives_names_a_rank_that_died(tmp_path):
    with job("victim", tmp_path) as running:
        assert wait_until(lambda: _waiting_line(running.spec, "ranks 0, 1 waiting"), 60, 0.2)
        running.procs[2].kill()
        running.procs[2].wait(10)
        assert wait_until(lambda: any("rank 2 is not answering" in line
                                      for line in debug.collectives(running.spec)), 20, 0.2)
        # the survivors wrote their flight recorders when they lost rank 2
        assert wait_until(lambda: any((tmp_path / "flight").glob("flight-*.json")), 10)
        recorded = json.loads(next((tmp_path / "flight").glob("flight-*.json")).read_text())
        assert recorded["reason"] == "rank_lost"
        assert any(e["event"] == "op_start" and e["kind"] == "all_reduce"
                   for e in recorded["entries"])


def test_trace_names_the_processes_it_left_out(tmp_path):
    with job("victim", tmp_path) as running:
        assert wait_until(lambda: _waiting_line(running.spec, "ranks 0, 1 waiting"), 60, 0.2)
        running.procs[2].kill()
        running.procs[2].wait(10)
        out = command("trace", "--store", running.spec, "-o", str(tmp_path / "trace.json"))
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0].startswith(f"wrote {tmp_path / 'trace.json'}: ")
        assert lines[1:] == ["left out: rank 2 is not answering: it died or its address is "
                             "gone (nothing accepts connections at this address)"], lines
        trace = json.loads((tmp_path / "trace.json").read_text())
        assert [(p["rank"], p["state"]) for p in trace["otherData"]["left_out"]] == [(2, "dead")]
        assert {e["args"]["name"].split(" (")[0] for e in trace["traceEvents"]
                if e["name"] == "process_name"} == {"rank 0", "rank 1"}


def test_collectives_names_a_rank_that_hangs(tmp_path):
    with job("victim", tmp_path) as running:
        assert wait_until(lambda: _waiting_line(running.spec, "ranks 0, 1 waiting"), 60, 0.2)
        os.kill(running.procs[2].pid, signal.SIGSTOP)
        try:
            lines = debug.collectives(running.spec, timeout=1.0)
            assert any("rank 2 did not answer in time: hung or stopped" in line
                       for line in lines), lines
        finally:
            os.kill(running.procs[2].pid, signal.SIGCONT)


def test_status_lists_every_process_as_json(tmp_path):
    with job("never_enters", tmp_path) as running:
        assert wait_until(lambda: _waiting_line(running.spec, "ranks 0, 1 waiting"), 60, 0.2)
        out = command("status", "--store", running.spec)
        statuses = [json.loads(line) for line in out.stdout.splitlines()]
        assert sorted(s["rank"] for s in statuses) == [0, 1, 2]
        assert all(s["state"] == "ok" and s["pid"] and s["rss_bytes"] > 0 for s in statuses)
        current = statuses[0]["collectives"][0]["current"]
        assert current["op"] == "all_reduce" and current["step"] == 1
        assert current["waiting_for"] == 2 and current["bytes"] == 16


def test_asking_a_job_leaves_no_thread_or_socket_behind(tmp_path):
    with job("never_enters", tmp_path) as running:
        assert wait_until(lambda: _waiting_line(running.spec, "ranks 0, 1 waiting"), 60, 0.2)
        before = resources()  # after a first look: what the process keeps for good is in
        for _ in range(3):
            assert len(debug.snapshot(running.spec)) == 3
            debug.collectives(running.spec)
        assert wait_until(lambda: not resources() - before, 5), resources() - before


def test_format_chain_reads_like_a_call_path():
    chain = debug.Chain(["w0", "w1"], "m.f", 3.21)
    assert format_chain(chain) == "w0 → w1  m.f  3.2 s"


def test_sigusr1_writes_the_recorder_and_the_stacks_and_the_rank_goes_on(tmp_path):
    with job("never_enters", tmp_path) as running:
        assert wait_until(lambda: _waiting_line(running.spec, "ranks 0, 1 waiting"), 60, 0.2)
        os.kill(running.procs[1].pid, signal.SIGUSR1)
        assert wait_until(lambda: any((tmp_path / "flight").glob("flight-*.json")), 10)
        recorded = json.loads(next((tmp_path / "flight").glob("flight-*.json")).read_text())
        assert recorded["reason"] == "SIGUSR1" and recorded["rank"] == 1
        assert any(t["name"] == "MainThread" and any("all_reduce" in line for line in t["stack"])
                   for t in recorded["threads"])
        assert any(e["event"] == "send" and e["kind"] == "PG_DATA" for e in recorded["entries"])
        # The log line follows the file.
        assert wait_until(lambda: "flight_recorder_written" in running.log(1), 10)
        running.release.touch()
        assert all(proc.wait(30) == 0 for proc in running.procs)
