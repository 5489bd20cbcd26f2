"""Functions and classes of the running script resolve by name where it runs, as in torch."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cloudpickle
import pytest

from actors.runtime.protocol.script_refs import reduce_script_definition, resolve_script_definition

pytestmark = pytest.mark.timeout(120)

SCRIPT = Path(__file__).parent / "scripts" / "script_state.py"
ROOT = Path(__file__).resolve().parents[2]


def run_script(*args: str, script: Path = SCRIPT) -> dict:
    out = subprocess.run([sys.executable, str(script), *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=100)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_callee_running_the_same_script_shares_its_module_state_like_torch():
    result = run_script("same")
    assert result["bumps"] == [1, 2, 3]          # torch: [1, 2, 3]; by value: [1, 1, 1]
    assert result["tallies"] == [1, 2]           # the callee's own class, its own class state
    assert result["callbacks"] == [1, 2]         # a spawned child's script functions, back
    assert result["locked"] == [4, 5, 6]         # a module-level lock travels by name
    assert result["guarded"] == [0, 2]           # defined under the main guard: by value


@pytest.mark.slow
def test_a_callee_running_another_program_gets_the_functions_by_value():
    result = run_script("other")
    assert result["bumps"] == [1, 1, 1] and result["tallies"] == [1, 1]
    assert result["guarded"] == [0, 2]
    assert "bump of script" in result["locked"] and "cannot travel by value" in result["locked"]
    assert "cannot pickle '_thread.lock'" in result["locked"]


@pytest.mark.slow
def test_an_exception_class_of_the_script_is_caught_by_the_callers_own_class():
    result = run_script(script=SCRIPT.with_name("script_errors.py"))
    assert result["raised"] == ["ScriptError"] * 3  # rpc_sync, rpc_async, remote


def double(x):
    return 2 * x


def test_only_definitions_of_the_script_go_by_reference():
    assert reduce_script_definition(double) is None  # a test module is importable by name
    assert reduce_script_definition(lambda: 1) is None
    assert reduce_script_definition(3) is None


def test_a_definition_of_another_script_is_rebuilt_from_its_value():
    rebuilt = resolve_script_definition("double", "/elsewhere/script.py",
                                        cloudpickle.dumps(lambda x: 3 * x))
    assert rebuilt(2) == 6


def test_a_definition_without_a_value_names_why_it_cannot_be_rebuilt():
    with pytest.raises(LookupError, match="bump of script /elsewhere/s.py .*cannot pickle"):
        resolve_script_definition("bump", "/elsewhere/s.py", "TypeError: cannot pickle 'lock'")


SCRIPT_WITH_A_GUARD = """
def triple_for_test(x):
    return 3 * x

if __name__ == "__main__":
    def guarded_for_test(x):
        return 4 * x
"""


@pytest.fixture
def script_with_a_guard(tmp_path, monkeypatch):
    """`SCRIPT_WITH_A_GUARD` as this process's script; yields a function that makes a
    local function one of its definitions."""
    from actors.runtime.protocol import script_refs

    import __main__

    script = tmp_path / "script.py"
    script.write_text(SCRIPT_WITH_A_GUARD)
    monkeypatch.setattr(script_refs, "script_path", lambda: str(script))

    def as_script_definition(fn):
        fn.__module__, fn.__qualname__ = "__main__", fn.__name__
        monkeypatch.setattr(__main__, fn.__name__, fn, raising=False)
        return fn

    yield str(script), as_script_definition


def _reduced_for_the_same_script(fn):
    """(qualname, path, value) of `fn` as sent to a worker known to run this script."""
    from actors.runtime.protocol import script_refs

    with script_refs.same_script_receiver(True):
        return reduce_script_definition(fn)[1]


@pytest.fixture
def triple(script_with_a_guard):
    """The script's top-level `triple_for_test`, as this process defines it."""

    def triple_for_test(x):
        return 3 * x

    return script_with_a_guard[1](triple_for_test)


def test_a_receiver_known_to_run_the_same_script_gets_a_top_level_definition_by_name_alone(
        script_with_a_guard, triple):
    script, _ = script_with_a_guard
    qualname, path, value = _reduced_for_the_same_script(triple)
    assert (qualname, path, value) == ("triple_for_test", script, None)
    _, (_, _, value) = reduce_script_definition(triple)  # a receiver that may not have it
    assert cloudpickle.loads(value)(2) == 6
    assert resolve_script_definition("triple_for_test", script, None) is triple
    with pytest.raises(LookupError, match="its value was not sent"):
        resolve_script_definition("triple_for_test", "/elsewhere/s.py", None)


def test_a_definition_made_under_a_condition_keeps_its_value_even_for_the_same_script(
        script_with_a_guard):

    def guarded_for_test(x):
        return 4 * x

    _, as_script_definition = script_with_a_guard
    guarded = as_script_definition(guarded_for_test)
    _, _, value = _reduced_for_the_same_script(guarded)
    assert cloudpickle.loads(value)(2) == 8  # a spawned child skips the guarded block


def test_a_call_with_a_definition_by_name_round_trips_through_the_codec_with_its_arguments(
        triple):
    import numpy as np

    from actors.runtime.protocol import script_refs, serialization

    big = np.arange(1024, dtype=np.float64)  # travels out of band
    calls = [(triple, (np.ones(3), big), {"k": [1, "a"]}, 0, {}),
             (triple, (lambda x: x + 1,), {}, 0, {})]  # a lambda: by value
    with script_refs.same_script_receiver(True):
        encoded = [serialization.dumps(call) for call in calls]
    (fn, (small, large), kwargs, _, _), (_, (inc,), _, _, _) = [
        serialization.loads(body, buffers) for body, buffers in encoded]
    assert fn is triple and kwargs == {"k": [1, "a"]}
    assert np.array_equal(small, np.ones(3)) and np.array_equal(large, big)
    assert len(encoded[0][1]) == 1 and inc(1) == 2
    assert b"triple_for_test" in encoded[0][0] and b"cloudpickle" not in encoded[0][0]
    assert b"cloudpickle" in encoded[1][0]


def test_a_definition_known_to_go_by_name_still_travels_with_its_value_to_another_receiver(
        triple):
    from actors.runtime.protocol import script_refs, serialization

    call = (triple, (2,), {}, 0, {})
    for _ in range(2):  # the second time from what the first one learned
        with script_refs.same_script_receiver(True):
            by_name, _ = serialization.dumps(call)
        elsewhere, _ = serialization.dumps(call)
        assert b"cloudpickle" not in by_name and b"cloudpickle" in elsewhere
        assert serialization.loads(elsewhere)[0](2) == 6
