"""Each command explains itself: --help names it as invoked and gives every default;
a usage error is one line after the usage, exit code 2, no traceback; the servers say
where they listen."""
import argparse
import subprocess
import sys

import numpy as np
import pytest

from actors.launch.cli import main as launch_main
from actors.launch.config import build_parser as launch_parser
from actors.worker import build_parser as worker_parser
from store import TCPStore
from store.etcd.local import build_parser as etcd_parser
from store.server import build_parser as server_parser
from tests.subprocesses import ROOT, running
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

PARSERS = {"python -m actors.launch": launch_parser(), "python -m actors.worker": worker_parser(),
           "python -m store.server": server_parser(),
           "python -m store.etcd.local": etcd_parser()}


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_every_option_of_a_command_is_explained_with_its_default(command):
    parser = PARSERS[command]
    assert parser.prog == command
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{command}: {action.dest} has no help"
        if action.option_strings:  # a positional is required or says it is optional
            assert "default" in action.help, f"{command}: {action.dest} names no default"


def test_actorrun_names_itself_in_its_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        launch_main(["--help"], prog="actorrun")
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: actorrun ")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=45)


@pytest.mark.parametrize("args,message", [
    (["-m", "actors.launch"], "no script given"),
    (["-m", "actors.launch", "--standalone", "no_such_script.py"],
     "no such script: no_such_script.py"),
    (["-m", "actors.launch", "-m", "no_such_module_here"], "no module named"),
    (["-m", "actors.launch", "--nnodes", "two", "x.py"], "--nnodes must be N or MIN:MAX"),
    (["-m", "actors.worker", "--rank", "2", "--world-size", "2"], "--rank must be 0 to 1"),
    (["-m", "actors.worker", "--rank", "0", "--world-size", "0"], "--world-size must be"),
    (["-m", "store.server", "--port", "http"], "invalid int value"),
    (["-m", "store.etcd.local"], "the following arguments are required: data_dir"),
])
def test_a_usage_error_is_one_line_after_the_usage_with_exit_code_2(args, message):
    done = _run(*args)
    command = f"python -m {args[1]}"
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"usage: {command} ")
    assert lines[-1].startswith(f"{command}: error: ") and message in lines[-1], lines
    assert [line for line in lines if "error" in line] == [lines[-1]]


def test_the_store_server_prints_where_it_listens_and_serves_there(tmp_path):
    out = tmp_path / "server.out"
    with running(["-m", "store.server", "--port", "0"], out, env=None) as server:
        assert wait_until(lambda: "listening on" in out.read_text() or server.poll() is not None,
                          30), out.read_text()
        line = next(x for x in out.read_text().splitlines() if "listening on" in x)
        assert line.startswith("store.server: listening on 127.0.0.1:")
        port = int(line.split("127.0.0.1:")[1].split(";")[0])
        client = TCPStore("127.0.0.1", port, timeout=10)
        try:
            client.set("k", b"v")
            assert client.get("k") == b"v"
        finally:
            client.close()


def test_a_worker_prints_the_address_an_exposed_client_uses(tmp_path):
    from tests.rpc.named_worker import client, serving

    with serving(tmp_path) as (address, _port):
        printed = [line for path in tmp_path.iterdir() for line in path.read_text().splitlines()
                   if line.startswith("worker: worker0 (rank 0 of 1) serves at ")]
        assert printed and f"actors.ExposedClient('{address}')" in printed[0], printed
        with client(address) as calls:
            assert calls.call("scale", np.array([1.0, 2.0]), 3.0).tolist() == [3.0, 6.0]
