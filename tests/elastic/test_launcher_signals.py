"""An agent stopped by a signal: its workers stop, and the job goes on without its node."""
import signal

import pytest

from tests.elastic.launcher import Watched, launch, script
from tests.net import free_port

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

FAST_CONF = "last_call_timeout=0.3,keep_alive_interval=0.5"

# Alone at first, a worker waits for the agent to take in the second node; with two
# nodes it runs until the test says the other node is gone, then fails as a worker that
# lost its peer would; alone after that restart, it succeeds.
PEER_SCRIPT = """
    import os, sys, time
    world, restart = os.environ["WORLD_SIZE"], os.environ["RESTART_COUNT"]
    print(f"world {world} restart {restart}", flush=True)
    if world == "1":
        time.sleep(60 if restart == "0" else 0)
        sys.exit(0 if restart != "0" else 1)
    deadline = time.monotonic() + 60
    while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(1)
    """


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_node_stopped_by_a_signal_leaves_and_the_survivor_restarts_alone(tmp_path, agents,
                                                                          signum):
    path = script(tmp_path, "peer.py", PEER_SCRIPT)
    gone = tmp_path / "peer-gone"
    common = ["--nnodes", "1:2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
              "--rdzv-id", "preempted", "--rdzv-conf", FAST_CONF, "--max-restarts", "3",
              path, str(gone)]
    survivor = launch(agents, *common)
    survivor.wait_for_line("launch: 1 worker of peer.py")  # it hosts the store
    preempted = launch(agents, *common)
    for agent in (survivor, preempted):
        agent.wait_for_line("world 2 restart")
    preempted.proc.send_signal(signum)
    assert preempted.finish(30) == 128 + signum, preempted.output
    gone.touch()
    assert survivor.finish() == 0, survivor.output
    assert "world 1 restart 1" in survivor.output
    assert "RendezvousClosedError" not in survivor.output, survivor.output


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP,
                                    signal.SIGQUIT])
def test_a_stop_signal_to_the_agent_stops_every_worker_and_leaves_no_orphan(tmp_path, agents,
                                                                             signum):
    path = script(tmp_path, "hang.py", """
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print(f"PIDS {os.getpid()} {child.pid}", flush=True)
        time.sleep(60)
        """)
    agent = launch(agents, "--standalone", "--nproc-per-node", "2", path)
    processes = []
    try:
        for rank in (0, 1):
            line = agent.wait_for_line(f"[rank{rank}]: PIDS")
            processes += [Watched(int(p)) for p in line.split("PIDS ")[1].split()]
        agent.proc.send_signal(signum)
        assert agent.finish(30) == 128 + signum, agent.output
        assert f"launch: stopped by {signal.Signals(signum).name}" in agent.output
        survivors = [p.pid for p in processes if not p.gone(10)]
        assert survivors == [], f"orphans left: {survivors}"
    finally:
        for process in processes:
            process.kill()
