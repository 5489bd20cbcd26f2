"""Every example exits non-zero when one of its processes fails, and leaves nothing behind.

Each process an example starts is made to exit with 3 after doing its work
(tests/failing_children), so only the example's own check of its children can notice.
"""
import glob
import os
import tempfile

import pytest

from tests.example_runs import run_example, succeeds_cleanly

pytestmark = [pytest.mark.timeout(200), pytest.mark.slow]

EXAMPLES = [
    ("store_demo.py",), ("rpc_basics.py",), ("dist_autograd_simple.py",),
    ("parameter_server.py",), ("pipeline_parallel.py",), ("ddp_train.py",),
    ("zmq_pipeline.py",), ("foreign/demo.py", "--clients", "python"),
    # The four ported tutorials share torch_patterns/_spawn.py, which checks the exit codes.
    ("torch_patterns/parameter_server.py",), ("torch_patterns/batch_update_ps.py",),
]
LAUNCH = ["-m", "actors.launch", "--standalone", "--nproc-per-node", "2"]
SHORT_TRAINING = ["--steps", "40", "--checkpoint-every", "20"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e[0])
def test_an_example_exits_non_zero_when_one_of_its_processes_fails(tmp_path, example):
    out = run_example(*example, cwd=tmp_path, failing_children=True)
    assert out.returncode != 0, out.stdout + out.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_elastic_example_fails_under_the_launcher_when_its_workers_fail(tmp_path):
    out = run_example("elastic_train.py", *SHORT_TRAINING, cwd=tmp_path, launcher=LAUNCH,
                      failing_children=True)
    assert out.returncode == 1, out.stdout + out.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_elastic_example_trains_twice_and_keeps_no_checkpoint(tmp_path):
    pattern = os.path.join(tempfile.gettempdir(), "actorgrad-elastic-train-*")
    before = set(glob.glob(pattern))
    for _ in range(2):  # a finished run leaves no checkpoint that the next would resume from
        out = succeeds_cleanly("elastic_train.py", *SHORT_TRAINING, cwd=tmp_path,
                               launcher=LAUNCH)
        assert "resuming at step 0" in out and "step 40 loss" in out
    assert set(glob.glob(pattern)) == before
