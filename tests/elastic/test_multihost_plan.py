"""The pure parts of benchmarks/multihost: the network plan, the plumbing's order of
making and unmaking (with a stand-in for `ip`), and the reading of the agents' lines.
The benchmark itself needs root and is not run here."""
from __future__ import annotations

import signal

import pytest

from benchmarks.multihost.netns import (IFNAMSIZ, NetworkError, SimulatedNetwork,
                                        plan_network)
from benchmarks.multihost.run import Progress, Resumed, agent_command, agent_event, parse_line


def test_a_plan_names_everything_after_its_suffix_within_the_interface_name_limit():
    plan = plan_network(["etcd", "host2", "host3"], suffix="0a1b2c", octet=7)
    assert plan.subnet == "10.231.7.0/24"
    assert [h.address for h in plan.hosts] == ["10.231.7.1", "10.231.7.2", "10.231.7.3"]
    assert plan.host("host2").namespace == "agmh-0a1b2c-host2"
    assert all("0a1b2c" in name and len(name) <= IFNAMSIZ for name in plan.links)
    assert len(set(plan.links)) == len(plan.links) == 4


def test_two_runs_share_no_name():
    first, second = plan_network(["etcd", "host2"]), plan_network(["etcd", "host2"])
    assert first.suffix != second.suffix
    assert not set(first.links + first.namespaces) & set(second.links + second.namespaces)


@pytest.mark.parametrize("roles, suffix, octet", [
    (["a", "a"], "ab", 1), ([], "ab", 1), (["Host"], "ab", 1), (["host"], "xyz", 1),
    (["host"], "ab", 256), (["averyveryverylongrole"], "ab", 1)])
def test_a_plan_refuses_what_would_not_make_a_network(roles, suffix, octet):
    with pytest.raises(ValueError):
        plan_network(roles, suffix=suffix, octet=octet)


class FakeIp:
    """Records `ip` commands; fails the one that starts with `fail_on`."""

    def __init__(self, fail_on=None):
        self.calls, self.fail_on = [], fail_on

    def __call__(self, *args):
        self.calls.append(args)
        if self.fail_on is not None and args[:len(self.fail_on)] == self.fail_on:
            raise NetworkError(" ".join(args))
        return ""


def test_a_failure_while_building_removes_what_was_made_newest_first():
    plan = plan_network(["one", "two"], suffix="abc", octet=9)
    ip = FakeIp(fail_on=("-n", plan.host("two").namespace, "addr"))
    handler = signal.getsignal(signal.SIGTERM)
    with pytest.raises(NetworkError):
        with SimulatedNetwork(plan, ip=ip, log=lambda _text: None):
            pytest.fail("the block must not run")
    removals = [call for call in ip.calls if call[1] == "del"]
    assert removals == [("link", "del", plan.host("two").veth),
                        ("netns", "del", plan.host("two").namespace),
                        ("link", "del", plan.host("one").veth),
                        ("netns", "del", plan.host("one").namespace),
                        ("link", "del", plan.bridge)]
    assert signal.getsignal(signal.SIGTERM) == handler


def test_a_host_is_partitioned_by_taking_its_veth_down_and_entered_with_netns_exec():
    plan = plan_network(["host2"], suffix="abc", octet=9)
    ip = FakeIp()
    with SimulatedNetwork(plan, ip=ip) as net:
        net.partition("host2")
        assert net.exec_argv("host2", ["true"]) == ["ip", "netns", "exec",
                                                    "agmh-abc-host2", "true"]
    assert ("link", "set", "agmhabcv0", "down") in ip.calls


def test_the_agents_lines_tell_progress_resumption_and_agent_events():
    assert parse_line("[rank0]: step 300 loss 0.5812 held-out accuracy 90.9% (2.9s, "
                      "checkpoint saved)") == Progress(300, 0.5812, pytest.approx(0.909))
    assert parse_line("[rank1]: rank 1/2 restart 1: resuming at step 300 (PID 24307)") == \
        Resumed(1, 2, 1, 300)
    assert parse_line("[rank2]: step 300 loss 0.5 held-out accuracy 90.9%") is None
    event = agent_event("timestamp='2025-01-01T00:00:00Z' level='info' "
                        "event='agent_round_started' logger='actors.launch.agent' "
                        "run_id='x' group_rank=0 nodes=1 restart_count=1")
    assert event == ("agent_round_started",
                     {"group_rank": "0", "nodes": "1", "restart_count": "1"})
    assert agent_event("[rank0]: event=x") is None


def test_each_host_runs_the_launcher_with_its_own_address():
    argv = agent_command("etcd", "10.231.7.1:2379", "job", "10.231.7.2", "", ["--steps", "5"])
    assert argv[1:3] == ["-m", "actors.launch"]
    assert argv[argv.index("--local-addr") + 1] == "10.231.7.2"
    assert argv[argv.index("--rdzv-backend") + 1] == "etcd"
    assert argv[-2:] == ["--steps", "5"] and argv[-3].endswith("elastic_train.py")
