"""An agent that waits for other nodes tells people so, at a threshold and then periodically."""
import sys

import pytest

from actors.launch.config import EXIT_BARRIER_TIMEOUT, parse_args
from actors.launch.progress import waiting_text
from store.elastic.waiting import JoinWait
from tests.elastic.launcher import Agent, launch, script
from tests.net import free_port

pytestmark = pytest.mark.timeout(120)

QUICK_REPORTS = {"ACTORGRAD_WAIT_WARN_AFTER": "0.2", "ACTORGRAD_WAIT_WARN_EVERY": "0.3"}


def join(joined, min_nodes, max_nodes, last_call_ends=None, complete=False, on_wait_list=False):
    return JoinWait("job", 0, joined, min_nodes, max_nodes, complete, int(on_wait_list),
                    on_wait_list, last_call_ends, None if last_call_ends is None else 20.0,
                    580.0)


def test_the_lines_say_what_the_agent_waits_for():
    assert waiting_text(join(1, 2, 2), 10) == "waiting for nodes: 1 of 2 joined (min 2) for 10 s"
    assert waiting_text(join(1, 1, 2, last_call_ends=1_700_000_020.0), 10) == (
        "waiting for more nodes until 22:13:40 UTC, then starting with 1 of 2 (min 1) for 10 s")
    assert waiting_text(join(2, 1, 3, complete=True, on_wait_list=True), 40) == (
        "waiting for the next round: round 0 runs with 2 nodes for 40 s")
    assert waiting_text(join(2, 2, 2, complete=True), 10) == (
        "waiting for a place: round 0 is full (2 of 2 nodes) for 10 s")
    assert waiting_text("a barrier: 1 of 2 nodes arrived", 10.4) == \
        "a barrier: 1 of 2 nodes arrived for 10 s"


@pytest.mark.slow
def test_a_lone_agent_says_it_waits_for_a_second_node_until_it_comes(tmp_path, agents):
    path = script(tmp_path, "hello.py", "print('hello', flush=True)\n")
    args = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-endpoint",
            f"127.0.0.1:{free_port()}", "--rdzv-id", "lonely", path]
    first = launch(agents, *args, env=QUICK_REPORTS)
    first.wait_for_line("launch: waiting for nodes: 1 of 2 joined (min 2) for ", timeout=60)
    second = launch(agents, *args, env=QUICK_REPORTS)
    assert first.finish() == 0 and second.finish() == 0, first.output + second.output
    reports = [line for line in first.lines if "waiting for nodes" in line]
    assert reports and all(line.startswith("launch: ") for line in reports)
    assert "[rank0]: hello" in first.output + second.output


@pytest.mark.slow
def test_a_last_call_says_until_when_it_waits_then_starts(tmp_path, agents):
    path = script(tmp_path, "hello.py", "print('hello', flush=True)\n")
    agent = launch(agents, "--nnodes", "1:2", "--nproc-per-node", "1", "--rdzv-endpoint",
                   f"127.0.0.1:{free_port()}", "--rdzv-id", "last-call",
                   "--rdzv-conf", "last_call_timeout=1.5", path, env=QUICK_REPORTS)
    line = agent.wait_for_line("launch: waiting for more nodes until ", timeout=60)
    assert ", then starting with 1 of 2 (min 1) for " in line
    assert agent.finish() == 0, agent.output
    assert agent.output.index("waiting for more nodes") < agent.output.index("[rank0]: hello")


@pytest.mark.slow
def test_a_quick_start_says_nothing_of_waiting(tmp_path, agents):
    path = script(tmp_path, "hello.py", "print('hello', flush=True)\n")
    agent = launch(agents, "--standalone", "--nproc-per-node", "1", path)
    assert agent.finish() == 0, agent.output
    assert "waiting" not in agent.output


@pytest.mark.slow
def test_a_node_started_before_its_store_host_says_where_it_connects(tmp_path, agents):
    path = script(tmp_path, "hello.py", "print('hello', flush=True)\n")
    port = free_port()
    static = ["--nnodes", "2", "--nproc-per-node", "1", "--master-addr", "127.0.0.1",
              "--master-port", str(port), "--rdzv-id", "early"]
    second = launch(agents, *static, "--node-rank", "1", path, env=QUICK_REPORTS)
    second.wait_for_line(f"launch: connecting to tcp://127.0.0.1:{port}: nothing answers",
                         timeout=60)
    first = launch(agents, *static, "--node-rank", "0", path, env=QUICK_REPORTS)
    assert first.finish() == 0 and second.finish() == 0, first.output + second.output
    assert "[rank1]: hello" in second.output


# The launcher with its exit barrier cut to 1 s (it is torchrun's 300 s otherwise).
SHORT_EXIT_BARRIER = [sys.executable, "-c", """
import sys
from actors.launch import cli
parse = cli.parse_args

def short_exit_barrier(*args):
    config = parse(*args)
    config.exit_barrier_timeout = 1.0
    return config

cli.parse_args = short_exit_barrier
sys.exit(cli.main(sys.argv[1:]))
"""]


def test_the_exit_barrier_waits_as_long_as_torchruns():
    assert parse_args([__file__]).exit_barrier_timeout == EXIT_BARRIER_TIMEOUT == 300


@pytest.mark.slow
def test_a_node_that_gives_up_at_the_exit_barrier_says_so(tmp_path, agents):
    path = script(tmp_path, "slow.py", """
        import os, sys, time
        deadline = time.monotonic() + 60
        while os.environ["GROUP_RANK"] == "1" and not os.path.exists(sys.argv[1]) \\
                and time.monotonic() < deadline:
            time.sleep(0.05)
        """)
    done = tmp_path / "done"
    args = ["--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", path, str(done)]
    first = Agent(args, env=QUICK_REPORTS, command=SHORT_EXIT_BARRIER)
    agents.append(first)
    first.wait_for_line("launch: 1 worker of slow.py")  # it hosts the store
    second = launch(agents, *args)
    try:
        assert first.finish() == 0, first.output
    finally:
        done.touch()
    assert "launch: waiting for the other nodes' workers to finish" in first.output
    assert ("launch: the other nodes' workers did not all finish within 1 s; leaving "
            "without them") in first.output, first.output
    second.finish()
