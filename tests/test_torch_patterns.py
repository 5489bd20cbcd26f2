"""examples/torch_patterns: torch's RPC tutorials, ported, behave as they do in torch."""
import re

import pytest

from tests.example_runs import succeeds_cleanly

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]  # not in the quick set


@pytest.fixture
def run_pattern(tmp_path):
    """Run a ported tutorial in an empty folder: exit 0, no traceback, nothing left behind."""
    return lambda name, *args: succeeds_cleanly(f"torch_patterns/{name}", *args, cwd=tmp_path)


def test_the_parameter_server_singleton_is_shared_by_all_trainers_as_in_torch(run_pattern):
    out = run_pattern("parameter_server.py")
    assert out.count("ParameterServer created") == 1  # by value: once per trainer call
    accuracies = [float(a) for a in re.findall(r"accuracy ([\d.]+)%", out)]
    assert len(accuracies) == 2 and min(accuracies) >= 85.0
    assert "all processes finished" in out


def test_the_rref_pipeline_trains_both_shards_and_micro_batching_changes_no_result(run_pattern):
    out = run_pattern("rref_pipeline.py")
    runs = re.findall(r"split size +(\d+): loss ([\d.]+) -> ([\d.]+), accuracy ([\d.]+)%", out)
    assert [int(r[0]) for r in runs] == [64, 16, 8]
    assert len({r[1:] for r in runs}) == 1  # the same training whatever the split
    first, last, accuracy = (float(x) for x in runs[0][1:])
    assert last < first / 2 and accuracy >= 80.0
    assert "pipeline done" in out


def test_the_async_execution_server_answers_all_trainers_once_per_batch_as_in_torch(run_pattern):
    out = run_pattern("batch_update_ps.py")
    assert re.search(r"Finish training: 40 updates of 3 trainers' gradients each", out)
    trainers = re.findall(r"trainer\d loss ([\d.]+) -> ([\d.]+)", out)
    assert len(trainers) == 3 and all(float(b) < float(a) / 2 for a, b in trainers)
    assert float(re.search(r"accuracy ([\d.]+)%", out).group(1)) >= 85.0


def test_the_observers_call_the_agent_back_through_its_rref_and_the_policy_learns(run_pattern):
    # 72 of the tutorial's 100 episodes: its last ones are the longest, and by then
    # the policy has learnt.
    out = run_pattern("rl_observer_agent.py", "--episodes", "72", "--log-interval", "18")
    averages = [float(a) for a in re.findall(r"Average reward: ([\d.]+)", out)]
    assert len(averages) == 4
    # Runs repeat (the agent reseeds per observer call): 9.9 at episode 18, 59.8
    # at episode 72 on this machine; the margins allow for other BLAS builds.
    assert averages[-1] >= 40.0 and averages[-1] >= 2.5 * averages[0]
