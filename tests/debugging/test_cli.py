"""The debugging commands' usage: errors in one line with the usage, help that explains."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.net import free_port
from tests.subprocesses import ROOT

pytestmark = pytest.mark.timeout(60)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=30, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("args, says", [
    (("actors.debug",), "the following arguments are required: COMMAND"),
    (("actors.debug", "calls"), "the following arguments are required: --store"),
    (("actors.debug", "calls", "--store", "nohost"), "--store takes HOST:PORT"),
    (("actors.debug", "stacks", "--store", "h:1", "--rank", "x"), "invalid int value"),
    (("actors.debug", "collectives", "--store", "h:1", "--timeout", "0"), "seconds > 0"),
    (("actors.debug", "bogus", "--store", "h:1"), "invalid choice"),
    (("actors.top",), "the following arguments are required: --store"),
])
def test_a_usage_error_is_one_line_after_the_usage_and_exit_2(args, says):
    out = run(*args)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert lines[0].startswith(f"usage: python -m {args[0]}") and says in lines[-1]
    assert "Traceback" not in out.stderr


def test_help_names_the_command_as_invoked_and_every_argument_with_its_default():
    top = run("actors.debug", "--help")
    assert top.returncode == 0 and top.stdout.startswith("usage: python -m actors.debug")
    assert all(name in top.stdout for name in ("status", "calls", "stacks", "collectives"))
    stacks = run("actors.debug", "stacks", "--help")
    assert stacks.stdout.startswith("usage: python -m actors.debug stacks")
    for text in ("--store HOST:PORT", "MASTER_ADDR:MASTER_PORT", "--timeout SECONDS",
                 "(default 2)", "--rank N", "(default: every process)"):
        assert text in stacks.stdout, text
    view = run("actors.top", "--help")
    assert view.stdout.startswith("usage: python -m actors.top")
    for text in ("--once", "--json", "--interval SECONDS", "(default 1)", "(default 2)"):
        assert text in view.stdout, text


def test_a_store_no_process_joined_says_so_rather_than_that_all_is_quiet():
    from store import TCPStore

    port = free_port()
    store = TCPStore("127.0.0.1", port, is_master=True, timeout=10)
    try:
        for command in ("calls", "collectives", "status", "stacks"):
            out = run("actors.debug", command, "--store", f"127.0.0.1:{port}")
            assert out.returncode == 0, out.stderr
            assert out.stdout.startswith(f"nothing in view at 127.0.0.1:{port}: no process "
                                         "has joined a job through this store yet"), out.stdout
        frame = subprocess.run([sys.executable, "-m", "actors.top", "--store",
                                f"127.0.0.1:{port}", "--once", "--interval", "0.1"], cwd=ROOT,
                               capture_output=True, text=True, timeout=30,
                               env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400"})
        assert "nothing in view at" in frame.stdout, frame.stdout
    finally:
        store.close()


@pytest.mark.slow
def test_a_store_nobody_serves_is_one_line_and_exit_1():
    out = run("actors.debug", "calls", "--store", f"127.0.0.1:{free_port()}", "--timeout", "0.5")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith("python -m actors.debug: cannot reach the job's store at")
    assert len(out.stderr.strip().splitlines()) == 1
