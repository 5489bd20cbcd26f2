"""`python -m actors.launch --rdzv-backend etcd`: agents whose rendezvous lives in a real etcd."""
import pytest

from actors.launch.config import parse_args
from tests.elastic.launcher import launch, script

pytestmark = pytest.mark.timeout(120)

FAST_CONF = "last_call_timeout=0.3,keep_alive_interval=0.5"


def test_the_etcd_endpoint_defaults_to_etcds_port_2379():
    config = parse_args(["--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint", "h",
                         __file__])
    assert (config.rdzv_backend, config.rdzv_host, config.rdzv_port) == ("etcd", "h", 2379)
    assert parse_args(["--nnodes", "2", "--rdzv-endpoint", "h", __file__]).rdzv_port == 29400


@pytest.mark.parametrize("args", [["--rdzv-backend", "etcd", "x.py"],
                                  ["--rdzv-backend", "etcd-v2", "--standalone", "x.py"]])
def test_an_etcd_backend_without_an_etcd_endpoint_is_a_clear_error(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(args)
    assert exit_info.value.code == 2
    assert "needs --rdzv-endpoint HOST[:PORT] of an etcd server" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["etcd", "etcd-v2"])
def test_two_agents_form_one_world_through_etcd(tmp_path, agents, etcd_endpoint, backend):
    path = script(tmp_path, "world.py", """
        import os
        print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}", flush=True)
        """)
    common = ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", backend,
              "--rdzv-endpoint", etcd_endpoint, "--rdzv-id", f"two-{tmp_path.name}",
              "--rdzv-conf", FAST_CONF, path]
    first, second = launch(agents, *common), launch(agents, *common)
    assert first.finish() == 0, first.output
    assert second.finish() == 0, second.output
    ranks = sorted(line.split("rank ", 1)[1] for agent in (first, second)
                   for line in agent.lines if "]: rank " in line)
    assert ranks == [f"{rank} of 4" for rank in range(4)]


@pytest.mark.slow
def test_an_unreachable_etcd_fails_the_agent_with_a_clear_message(tmp_path, agents):
    from tests.net import free_port

    path = script(tmp_path, "never.py", "print('never')")
    agent = launch(agents, "--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                   f"127.0.0.1:{free_port()}", "--rdzv-conf", "read_timeout=2", path)
    assert agent.finish(30) != 0
    assert "cannot reach the rendezvous store" in agent.output
    assert "never" not in agent.output
