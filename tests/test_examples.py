"""The examples run as documented and say what they should."""
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(180)
ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_example(name: str) -> str:
    out = subprocess.run([sys.executable, str(ROOT / "examples" / name)], cwd=ROOT,
                         capture_output=True, text=True, timeout=150)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_the_store_demo_elects_one_leader_that_all_three_agree_on():
    assert "one winner, all 3 agree" in run_example("store_demo.py")


def test_the_rpc_basics_example_shows_each_feature():
    out = run_example("rpc_basics.py")
    for line in ("sync : 6.0", "async: [3.0, 6.0]", "21.0 * 2 = 42.0", "remote object on worker2",
                 "remote error re-raised here: ValueError", "unknown worker", "left together"):
        assert line in out
