"""`python -m actors.launch`: real agents, real worker processes, real failures."""
import json
import os
import signal

import pytest

from tests.elastic.launcher import held_script, launch, script
from tests.net import free_port

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]  # not in the quick set

FAST_CONF = "last_call_timeout=0.3,keep_alive_interval=0.5"


def test_a_script_that_fails_once_succeeds_after_a_restart(tmp_path, agents):
    path = script(tmp_path, "once.py", """
        import os, sys
        rank, restart = os.environ["RANK"], os.environ["RESTART_COUNT"]
        print(f"rank {rank} restart {restart}")
        if rank == "1" and restart == "0":
            sys.exit(3)
        """)
    agent = launch(agents, "--standalone", "--nproc-per-node", "2", "--max-restarts", "2", path)
    assert agent.finish() == 0, agent.output
    assert "[rank1]: rank 1 restart 0" in agent.output
    assert "[rank0]: rank 0 restart 1" in agent.output and "[rank1]: rank 1 restart 1" in \
        agent.output


def test_workers_get_the_environment_that_init_rpc_reads(tmp_path, agents):
    path = script(tmp_path, "env.py", """
        import json, os
        names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                 "MASTER_ADDR", "MASTER_PORT", "RESTART_COUNT"]
        print("ENV " + json.dumps({n: os.environ[n] for n in names}))
        from actors.runtime.introspection.status import process_status
        print("RDZV " + json.dumps(process_status()["rendezvous"]))
        """)
    agent = launch(agents, "--standalone", "--nproc-per-node", "2", path)
    assert agent.finish() == 0, agent.output
    envs = sorted((line.split("ENV ", 1)[1] for line in agent.lines if "ENV " in line))
    import json
    envs = sorted((json.loads(e) for e in envs), key=lambda e: e["RANK"])
    assert [(e["RANK"], e["LOCAL_RANK"], e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"],
             e["GROUP_RANK"], e["RESTART_COUNT"]) for e in envs] == [
        ("0", "0", "2", "2", "0", "0"), ("1", "1", "2", "2", "0", "0")]
    assert envs[0]["MASTER_ADDR"] == "127.0.0.1" and envs[0]["MASTER_PORT"] == \
        envs[1]["MASTER_PORT"]
    # STATUS shows the rendezvous round the launcher started the worker for
    rendezvous = [json.loads(line.split("RDZV ", 1)[1]) for line in agent.lines if "RDZV " in line]
    assert len(rendezvous) == 2 and rendezvous[0] == rendezvous[1], rendezvous
    assert {k: rendezvous[0][k] for k in ("round", "restart_count", "node_rank", "nodes")} == \
        {"round": 0, "restart_count": 0, "node_rank": 0, "nodes": 1}
    assert len(rendezvous[0]["members"]) == 1 and rendezvous[0]["run_id"]


@pytest.mark.parametrize("how,expected", [
    ("sys.exit(7)", "exit code 7"),
    ("os.kill(os.getpid(), signal.SIGKILL)", "killed by signal SIGKILL"),
])
def test_a_script_that_always_fails_exhausts_restarts_with_a_summary(tmp_path, agents, how,
                                                                      expected):
    path = script(tmp_path, "fail.py", f"""
        import os, signal, sys
        if os.environ["RANK"] == "1":
            print("ValueError: bad batch 42", file=sys.stderr, flush=True)
            {how}
        """)
    agent = launch(agents, "--standalone", "--nproc-per-node", "2", "--max-restarts", "1", path)
    assert agent.finish() == 1
    told = [line for line in agent.lines if line.startswith("launch: rank 1 ")]
    assert len(told) == 2 and "see its stderr above, lines starting [rank1]:" in told[0], told
    assert told[0].endswith("restarting (1 restart left)") and \
        told[1].endswith("no restarts left"), told
    summary = agent.output[agent.output.index("launch: elastic run"):]
    assert "failed after 1 restart(s) (max 1)" in summary
    assert "worker rank 1 (local rank 1" in summary and expected in summary
    assert "ValueError: bad batch 42" in summary


def test_a_worker_that_fails_without_a_word_is_not_said_to_have_written_one(tmp_path,
                                                                             agents):
    path = script(tmp_path, "quiet.py", "print('on stdout only'); raise SystemExit(4)\n")
    agent = launch(agents, "--standalone", path)
    assert agent.finish() == 1
    assert ("launch: rank 0 exited with 4 (it wrote nothing to stderr); no restarts left"
            in agent.lines), agent.output
    assert "see its stderr" not in agent.output
    summary = agent.output[agent.output.index("launch: elastic run"):]
    assert summary.rstrip().endswith("it wrote nothing to stderr"), summary


def test_scale_up_when_a_second_agent_arrives(tmp_path, agents):
    path = script(tmp_path, "grow.py", """
        import os, sys, time
        print(f"world {os.environ['WORLD_SIZE']} group {os.environ['GROUP_RANK']}", flush=True)
        from actors.runtime.introspection.status import process_status
        rendezvous = process_status()["rendezvous"]
        print(f"round {rendezvous['round']} members {len(rendezvous['members'])}", flush=True)
        if os.environ["WORLD_SIZE"] == "2":
            sys.exit(0)
        time.sleep(60)  # a long job: the agent restarts it when the second node arrives
        sys.exit(1)
        """)
    port = free_port()
    common = ["--nnodes", "1:2", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "grow",
              "--rdzv-conf", FAST_CONF]
    first = launch(agents, *common, path)
    # Its worker's last line before it waits: the restart may kill it any time after.
    first.wait_for_line("round 0 members 1")
    second = launch(agents, *common, path)
    assert second.finish() == 0, second.output
    assert first.finish() == 0, first.output
    assert "world 2" in first.output and "world 2" in second.output
    # a later round, with both nodes, in what STATUS shows
    assert "round 0 members 1" in first.output and "round 1 members 2" in second.output
    # the progress lines name that round too, though taking a node in used no restart
    assert "launch: round 0: node 0 of 1 runs" in first.output, first.output
    assert all("launch: round 1: node " in agent.output for agent in (first, second))


def test_with_restart_policy_failed_a_lost_node_is_not_waited_for_at_the_exit(tmp_path,
                                                                              agents):
    """The survivors of an in-place job finish without the node that died; the exit
    barrier opens without it once the rendezvous finds it gone, not after 300 s."""
    go = tmp_path / "go"
    path = held_script(tmp_path, "inplace.py", go,
                       "print(f\"group {os.environ['GROUP_RANK']} ready\", flush=True)",
                       "sys.exit(0 if os.environ['GROUP_RANK'] == '0' else 1)")
    common = ["--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id",
              "lost-node", "--rdzv-conf", FAST_CONF, "--restart-policy", "failed",
              "--max-restarts", "1"]
    first = launch(agents, *common, path)
    first.wait_for_line("launch: 1 worker of")  # it hosts the store
    second = launch(agents, *common, path)
    second.wait_for_line("group 1 ready")
    first.wait_for_line("group 0 ready")
    second.kill()  # the whole node: its agent, and its worker with it
    go.write_text("")
    assert first.finish(timeout=30) == 0, first.output
    assert "did not all finish" not in first.output, first.output


def test_with_restart_policy_failed_a_node_that_arrives_later_restarts_nobody(tmp_path,
                                                                              agents):
    """Nothing re-rendezvous under that policy: a running group is never restarted to
    take in a node (an engine.ft job would start again from step 0)."""
    go = tmp_path / "go"
    path = held_script(tmp_path, "inplace.py", go,
                       "print(f\"started in round {os.environ['ACTORGRAD_RDZV_ROUND']}\", "
                       "flush=True)")
    common = ["--nnodes", "1:2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id",
              "late-node", "--rdzv-conf", FAST_CONF, "--restart-policy", "failed"]
    first = launch(agents, *common, path)
    first.wait_for_line("[rank0]: started in round 0")
    second = launch(agents, *common, path, env={"ACTORGRAD_WAIT_WARN_AFTER": "0.2"})
    second.wait_for_line("launch: waiting for the next round: round 0 runs with 1 node")
    go.write_text("")
    assert first.finish() == 0, first.output
    assert "take in a waiting node" not in first.output, first.output
    assert first.output.count("started in round") == 1, first.output
    # the job ended without it: its join is refused, as torchrun's agent's is
    assert second.finish() == 1, second.output
    assert "RendezvousClosedError" in second.output and "started" not in second.output


@pytest.mark.parametrize("args,message", [
    (["--nnodes", "3:2", "x.py"], "need 1 <= MIN <= MAX"),
    (["--nnodes", "two", "x.py"], "--nnodes must be N or MIN:MAX"),
    (["--nnodes", "2", "x.py"], "--rdzv-endpoint is required"),
    (["--rdzv-conf", "bogus=1", "--standalone", "x.py"], "--rdzv-conf item 'bogus=1'"),
    (["--monitor-interval", "0", "x.py"],
     "argument --monitor-interval/--monitor_interval: must be more than 0, got '0'"),
    (["--monitor-interval", "-1", "x.py"], "must be more than 0, got '-1'"),
    (["--monitor-interval", "nan", "x.py"], "expected a finite number, got 'nan'"),
])
def test_bad_launcher_arguments_fail_with_a_clear_error(agents, args, message):
    agent = launch(agents, *args)
    assert agent.finish() == 2
    assert message in agent.output


def test_the_example_resumes_from_its_checkpoint_after_a_worker_is_killed(tmp_path, agents):
    checkpoint = tmp_path / "ckpt.npz"
    port = free_port()
    common = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-endpoint", f"127.0.0.1:{port}",
              "--rdzv-id", "train", "--max-restarts", "2", "--rdzv-conf", FAST_CONF,
              "examples/elastic_train.py", "--steps", "60", "--checkpoint-every", "10",
              "--step-delay", "0.05", "--checkpoint", str(checkpoint)]
    # Info-level lines show how far each agent and worker got, should a wait fail.
    verbose = {"ACTORGRAD_LOG_LEVEL": "info"}
    pair = [launch(agents, *common, env=verbose), launch(agents, *common, env=verbose)]
    starts = [agent.wait_for_line("restart 0: resuming at step 0") for agent in pair]
    chief, other = pair if starts[0].startswith("[rank0]") else pair[::-1]
    chief.wait_for_line("step 20 loss")  # rank 0 has checkpointed at least twice
    victim = other.wait_for_line("restart 0: resuming").split("(PID ")[1].rstrip(")")
    os.kill(int(victim), signal.SIGKILL)
    first, second = pair
    assert second.finish() == 0, second.output
    assert first.finish() == 0, first.output
    resumed = [line for line in first.lines + second.lines if "restart 1: resuming" in line]
    assert resumed and all("at step 0" not in line for line in resumed), resumed
    assert "step 60 loss" in first.output + second.output


def test_an_agent_that_finds_no_peers_in_time_exits_with_the_rendezvous_timeout(tmp_path, agents):
    path = script(tmp_path, "never.py", "raise SystemExit(5)\n")
    agent = launch(agents, "--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                   "--rdzv-conf", "join_timeout=1", path)
    assert agent.finish() == 1
    assert "rendezvous failed: RendezvousTimeoutError" in agent.output


def test_the_other_ranks_write_their_flight_recorder_files_before_the_group_is_stopped(
        tmp_path, agents):
    # Rank 2 leaves after the first all_reduce; ranks 0 and 1 fail the second one with
    # RankLostError, which writes their recorders, while the agent stops the group.
    path = script(tmp_path, "lost.py", """
        import os
        import numpy as np
        import actors.distributed as dist
        dist.init_process_group()
        x = np.ones(4, np.float32)
        dist.all_reduce(x)
        if dist.get_rank() == 2:
            os._exit(7)
        dist.all_reduce(x)
        """)
    logs = tmp_path / "logs"
    agent = launch(agents, "--standalone", "--nproc-per-node", "3", "--log-dir", str(logs),
                   path)
    assert agent.finish() == 1, agent.output
    files = sorted(p.name for p in logs.rglob("flight-*"))
    assert [name.split("-")[1] for name in files] == ["rank0", "rank1"], (files, agent.output)
    assert not any(name.endswith(".part") for name in files), files
    for dump in logs.rglob("flight-*"):
        assert json.loads(dump.read_text())["reason"] == "rank_lost"
    # They had the time to say so, and to print their errors.
    for rank in (0, 1):
        assert any(line.startswith(f"[rank{rank}]: ") and "flight_recorder_written" in line
                   for line in agent.lines), agent.output
        assert any(line.startswith(f"[rank{rank}]: ") and "RankLostError" in line
                   for line in agent.lines), agent.output
