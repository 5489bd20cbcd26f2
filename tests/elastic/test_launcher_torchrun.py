"""torchrun's options on `python -m actors.launch` / `actorrun`: real agents and workers."""
import json
import os
import shutil
import stat

import pytest

from actors.launch.config import parse_args
from actors.runtime.process.tuning import core_share
from tests.elastic.launcher import Agent, launch, script
from tests.net import free_port

pytestmark = pytest.mark.timeout(120)

ENV_SCRIPT = """
    import json, os, sys
    names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "ROLE_NAME", "ROLE_RANK",
             "ROLE_WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
             "TORCHELASTIC_RUN_ID", "OMP_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT"]
    print("ENV " + json.dumps(dict({n: os.environ.get(n) for n in names},
                                   argv=sys.argv[1:], name=__name__)))
    print("on stderr", file=sys.stderr)
    """


def envs_of(*agents_):
    lines = [line for agent in agents_ for line in agent.lines if "ENV " in line]
    return sorted((json.loads(line.split("ENV ", 1)[1]) for line in lines),
                  key=lambda env: int(env["RANK"]))


@pytest.mark.slow
def test_static_mode_runs_node_ranks_against_node_zeros_store_like_torchrun(tmp_path, agents):
    path = script(tmp_path, "env.py", ENV_SCRIPT)
    port = free_port()
    common = ["--nnodes", "2", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
              "--master-port", str(port), "--rdzv-id", "static-run"]
    second = launch(agents, *common, "--node-rank", "1", path, "x")
    first = launch(agents, *common, "--node-rank", "0", path, "x")
    assert first.finish() == 0, first.output
    assert second.finish() == 0, second.output
    envs = envs_of(first, second)
    assert [(e["RANK"], e["GROUP_RANK"], e["WORLD_SIZE"]) for e in envs] == [
        ("0", "0", "4"), ("1", "0", "4"), ("2", "1", "4"), ("3", "1", "4")]
    assert len({(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs}) == 1
    assert all(e["TORCHELASTIC_RUN_ID"] == "static-run" for e in envs)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_nodes_given_no_run_id_meet_under_torchruns_default_none(tmp_path, agents, mode):
    path = script(tmp_path, "env.py", ENV_SCRIPT)
    port = str(free_port())
    nodes = ([["--master-addr", "127.0.0.1", "--master-port", port, "--node-rank", rank]
              for rank in ("0", "1")] if mode == "static" else
             [["--rdzv-endpoint", f"127.0.0.1:{port}"]] * 2)
    pair = [launch(agents, "--nnodes", "2", *args, path) for args in nodes]
    for agent in pair:
        assert agent.finish() == 0, agent.output
    envs = envs_of(*pair)
    assert [e["RANK"] for e in envs] == ["0", "1"]
    assert {e["TORCHELASTIC_RUN_ID"] for e in envs} == {"none"}


def test_the_run_id_is_torchruns_none_unless_the_store_is_the_nodes_own():
    assert parse_args(["--nnodes", "2", "--rdzv-endpoint", "h:1", __file__]).run_id == "none"
    assert parse_args(["--nnodes", "2", "--node-rank", "1", __file__]).run_id == "none"
    own = [parse_args([*args, __file__]).run_id for args in [["--standalone"]] * 2 + [[]]]
    assert len(set(own)) == 3 and "none" not in own, own
    assert parse_args(["--standalone", "--rdzv-id", "mine", __file__]).run_id == "mine"


def test_workers_get_torchruns_role_and_torchelastic_variables(tmp_path, agents):
    path = script(tmp_path, "env.py", ENV_SCRIPT)
    agent = launch(agents, "--standalone", "--nproc-per-node", "2", "--role", "trainer",
                   "--max-restarts", "2", "--rdzv-id", "roles", path)
    assert agent.finish() == 0, agent.output
    envs = envs_of(agent)
    assert [(e["ROLE_NAME"], e["ROLE_RANK"], e["ROLE_WORLD_SIZE"]) for e in envs] == [
        ("trainer", "0", "2"), ("trainer", "1", "2")]
    assert {(e["TORCHELASTIC_RESTART_COUNT"], e["TORCHELASTIC_MAX_RESTARTS"],
             e["TORCHELASTIC_RUN_ID"]) for e in envs} == {("0", "2", "roles")}


@pytest.mark.slow
def test_omp_num_threads_is_one_per_worker_with_a_notice_only_when_that_changes_it(
        tmp_path, agents):
    path = script(tmp_path, "env.py", ENV_SCRIPT)
    agent = Agent(["--standalone", "--nproc-per-node", "2", path],
                  env={"OMP_NUM_THREADS": None})
    agents.append(agent)
    assert agent.finish() == 0, agent.output
    assert {e["OMP_NUM_THREADS"] for e in envs_of(agent)} == {"1"}
    # Without it each worker would take its share of the cores: a notice if that is > 1.
    notices = agent.output.count("launch: OMP_NUM_THREADS=1 for each worker")
    assert notices == (1 if core_share(2) > 1 else 0), agent.output
    kept = Agent(["--standalone", "--nproc-per-node", "2", path], env={"OMP_NUM_THREADS": "3"})
    agents.append(kept)
    assert kept.finish() == 0, kept.output
    assert {e["OMP_NUM_THREADS"] for e in envs_of(kept)} == {"3"}
    assert "launch: OMP_NUM_THREADS" not in kept.output


def test_redirects_and_tee_write_per_rank_files_under_the_log_dir_like_torchrun(tmp_path,
                                                                                agents):
    path = script(tmp_path, "env.py", ENV_SCRIPT)
    logs = tmp_path / "logs"
    agent = launch(agents, "--standalone", "--nproc-per-node", "2", "--rdzv-id", "files",
                   "--log-dir", str(logs), "--redirects", "0:3", "--tee", "1:1", path)
    assert agent.finish() == 0, agent.output
    [folder] = logs.glob("files_*")  # the agent's own, as torchrun's <run id>_<random>
    assert f"files in {folder}" in agent.output
    attempt = folder / "attempt_0"
    assert "ENV " in (attempt / "0" / "stdout.log").read_text()
    assert "on stderr" in (attempt / "0" / "stderr.log").read_text()
    assert "ENV " in (attempt / "1" / "stdout.log").read_text()
    assert not (attempt / "1" / "stderr.log").exists()
    assert not any(line.startswith("[rank0]:") for line in agent.lines)  # redirected
    assert any(line.startswith("[rank1]: ENV ") for line in agent.lines)  # teed
    assert "[rank1]: on stderr" in agent.output  # not teed, not redirected


@pytest.mark.slow
def test_two_agents_sharing_a_log_dir_each_write_their_own_folder(tmp_path, agents):
    path = script(tmp_path, "env.py", ENV_SCRIPT)
    logs = tmp_path / "logs"
    common = ["--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
              "--log-dir", str(logs), "--redirects", "3", path]
    pair = [launch(agents, *common), launch(agents, *common)]
    for agent in pair:
        assert agent.finish() == 0, agent.output
    folders = sorted(logs.glob("none_*"))
    assert len(folders) == 2, folders
    ranks = sorted(json.loads((folder / "attempt_0" / "0" / "stdout.log").read_text()
                              .split("ENV ", 1)[1])["RANK"] for folder in folders)
    assert ranks == ["0", "1"]
    assert all((folder / "events.log").is_file() for folder in folders)


def test_no_python_runs_the_script_as_an_executable_like_torchrun(tmp_path, agents):
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/sh\necho \"shell rank $RANK args $*\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    agent = launch(agents, "--standalone", "--nproc-per-node", "2", "--no-python", str(path),
                   "a", "b")
    assert agent.finish() == 0, agent.output
    assert "[rank1]: shell rank 1 args a b" in agent.output


def test_run_path_runs_the_script_as_main_with_its_arguments_like_torchrun(tmp_path, agents):
    path = script(tmp_path, "env.py", ENV_SCRIPT)
    agent = launch(agents, "--standalone", "--run-path", "--start-method", "spawn", path, "y")
    assert agent.finish() == 0, agent.output
    assert [(e["name"], e["argv"]) for e in envs_of(agent)] == [("__main__", ["y"])]


def test_actorrun_is_the_same_command():
    exe = shutil.which("actorrun")
    if exe is None and not os.environ.get("CI"):
        pytest.skip("the package is not installed here (pip install -e . makes actorrun)")
    assert exe is not None, "pip install -e . should have made the actorrun command"
    agent = Agent(["--help"], command=[exe])
    try:
        assert agent.finish() == 0
        assert "--nproc-per-node" in agent.output and "--node-rank" in agent.output
    finally:
        agent.kill()


def test_pet_variables_set_the_defaults_of_torchruns_options(tmp_path, agents):
    path = script(tmp_path, "env.py", ENV_SCRIPT)
    pet = {"PET_NPROC_PER_NODE": "2", "PET_STANDALONE": "1", "PET_ROLE": "trainer"}
    agent = launch(agents, path, env=pet)
    assert agent.finish() == 0, agent.output
    assert [(e["RANK"], e["ROLE_NAME"]) for e in envs_of(agent)] == [("0", "trainer"),
                                                                    ("1", "trainer")]
    overridden = launch(agents, "--nproc-per-node", "1", path, env=pet)  # the command wins
    assert overridden.finish() == 0, overridden.output
    assert [e["RANK"] for e in envs_of(overridden)] == ["0"]
    wrong = launch(agents, path, env={"PET_NNODES": "two"})
    assert wrong.finish() == 2
    assert "PET_NNODES='two': --nnodes must be N or MIN:MAX" in wrong.output


def test_every_shared_option_reads_its_pet_variable_and_ours_do_not(monkeypatch):
    for name, value in {"PET_NNODES": "1:3", "PET_RDZV_ENDPOINT": "h:5", "PET_RDZV_ID": "job",
                        "PET_MAX_RESTARTS": "4", "PET_MONITOR_INTERVAL": "0.5",
                        "PET_LOCAL_ADDR": "10.0.0.2", "PET_RUN_PATH": "1",
                        "PET_RESTART_POLICY": "failed"}.items():
        monkeypatch.setenv(name, value)
    config = parse_args([__file__])
    assert (config.min_nodes, config.max_nodes, config.rdzv_host, config.rdzv_port,
            config.run_id, config.max_restarts, config.monitor_interval,
            config.local_addr) == (1, 3, "h", 5, "job", 4, 0.5, "10.0.0.2")
    assert "runpy" in " ".join(config.command)
    assert config.restart_policy == "all"  # not torchrun's option: no PET_ variable
    monkeypatch.setenv("PET_NPROC_PER_NODE", "")  # empty: unset
    assert parse_args([__file__]).nproc_per_node == 1


@pytest.mark.parametrize("text,expected", [("cpu", os.cpu_count()), ("auto", os.cpu_count()),
                                           ("3", 3)])
def test_nproc_per_node_takes_auto_and_cpu_like_torchrun(text, expected):
    assert parse_args(["--nproc-per-node", text, __file__]).nproc_per_node == expected


@pytest.mark.parametrize("args,message", [
    (["--nproc-per-node", "gpu", "x.py"], "CPUs only"),
    (["--nnodes", "1:2", "--node-rank", "0", "x.py"], "static mode needs a fixed --nnodes"),
    (["--nnodes", "2", "--node-rank", "2", "x.py"], "must be below --nnodes 2"),
    (["--no-python", "-m", "x"], "--no-python and --module exclude each other"),
    (["--redirects", "5", "x.py"], "expected 0 (none)"),
])
def test_bad_torchrun_options_fail_with_a_clear_error(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_static_mode_is_chosen_by_torchruns_options():
    config = parse_args(["--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1",
                         "--master-port", "1234", __file__])
    assert (config.static, config.node_rank, config.rdzv_host, config.rdzv_port) == (
        True, 1, "10.0.0.1", 1234)
    assert not parse_args(["--nnodes", "2", "--rdzv-endpoint", "h:1", __file__]).static
    assert parse_args(["--rdzv-backend", "static", __file__]).static


FAIL_ONCE_SCRIPT = """
    import os, sys, time
    rank = os.environ["RANK"]
    again = os.environ.get("ACTORGRAD_WORKER_RESTART_COUNT", "0")
    print(f"START rank={rank} pid={os.getpid()} again={again} "
          f"restarts={os.environ['TORCHELASTIC_RESTART_COUNT']} "
          f"store={os.environ.get('ACTORGRAD_JOB_STORE')}", flush=True)
    if rank == "1" and (again == "0" or "always" in sys.argv):
        sys.exit(3)
    # the others outlive rank 1's first life: they end when its second life has started
    import store
    host, port = os.environ["ACTORGRAD_JOB_STORE"].rsplit(":", 1)
    s = store.TCPStore(host, int(port), timeout=30)
    s.add("started", 1)
    s.wait(["rank1-again"]) if rank != "1" else s.set("rank1-again", "1")
    """


@pytest.mark.slow
def test_restart_policy_failed_restarts_only_the_failed_worker(tmp_path, agents):
    path = script(tmp_path, "fail_once.py", FAIL_ONCE_SCRIPT)
    agent = launch(agents, "--standalone", "--nproc-per-node", "3", "--restart-policy",
                   "failed", "--max-restarts", "1", path)
    assert agent.finish() == 0, agent.output
    starts = [line.split("START ", 1)[1] for line in agent.lines if "START " in line]
    by_rank = {}
    for start in starts:
        fields = dict(item.split("=") for item in start.split())
        by_rank.setdefault(fields["rank"], []).append(fields)
    assert [len(by_rank[r]) for r in "012"] == [1, 2, 1]  # only rank 1 started twice
    assert [f["again"] for f in by_rank["1"]] == ["0", "1"]
    assert all(f["restarts"] == "0" for fs in by_rank.values() for f in fs)  # one session
    assert by_rank["0"][0]["store"].startswith("127.0.0.1:")


def test_restart_policy_failed_gives_up_when_restarts_run_out(tmp_path, agents):
    path = script(tmp_path, "fail_always.py", FAIL_ONCE_SCRIPT)
    agent = launch(agents, "--standalone", "--nproc-per-node", "2", "--restart-policy",
                   "failed", "--max-restarts", "1", path, "always")
    assert agent.finish() == 1
    assert "worker rank 1" in agent.output and "exit code 3" in agent.output


def test_the_help_documents_the_restart_policies():
    from actors.launch.config import build_parser

    text = build_parser().format_help()
    assert "--restart-policy {all,failed}" in text and "torchrun's behaviour" in text
    assert parse_args(["--restart-policy", "failed", __file__]).restart_policy == "failed"
    assert parse_args([__file__]).restart_policy == "all"
