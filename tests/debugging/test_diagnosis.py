"""The pure parts of the debugging commands: chains of calls, and who holds up a collective."""
from __future__ import annotations

import pytest

from actors.debug.chains import Chain, call_chains
from actors.debug.diagnosis import DEAD, HUNG, OK, Probe, diagnose, format_bytes

pytestmark = pytest.mark.timeout(10)


def _rpc(name, serving=(), waiting=()):
    return {"rpc": {"name": name, "serving": list(serving), "waiting": list(waiting)}}


def test_a_nested_call_reads_as_one_chain_ending_in_the_running_function():
    statuses = [
        _rpc("w0", waiting=[{"peer": "w1", "function": "m.relay", "thread": 1, "age_s": 3.3}]),
        _rpc("w1", serving=[{"caller": "w0", "function": "m.relay", "thread": 7, "age_s": 3.2}],
             waiting=[{"peer": "w2", "function": "m.stuck", "thread": 7, "age_s": 3.1}]),
        _rpc("w2", serving=[{"caller": "w1", "function": "m.stuck", "thread": 9, "age_s": 3.0}]),
    ]
    assert call_chains(statuses) == [Chain(["w0", "w1", "w2"], "m.stuck", 3.0)]


def test_a_call_not_yet_running_on_its_callee_ends_the_chain_there():
    statuses = [_rpc("w0", waiting=[{"peer": "w1", "function": "m.f", "thread": 1,
                                     "age_s": 2.0}]), _rpc("w1")]
    assert call_chains(statuses) == [Chain(["w0", "w1"], "m.f", 2.0)]


def test_a_served_call_whose_caller_is_out_of_view_is_its_own_chain():
    statuses = [_rpc("w1", serving=[{"caller": "client", "function": "m.g", "thread": 3,
                                     "age_s": 1.0}])]
    assert call_chains(statuses) == [Chain(["client", "w1"], "m.g", 1.0)]


def _group(rank, current=None, last=None, ranks=(0, 1, 2)):
    return {"collectives": [{"group": "0", "ranks": list(ranks), "rank": rank,
                             "current": current, "last": last}]}


def _call(step=57, shape="(1048576,)", age=12.3, op="all_reduce", waiting_for=2):
    return {"op": op, "call": f"{op}(SUM, <f4, {shape})", "describe": [op, shape], "step": step,
            "bytes": 4 << 20, "age_s": age, "waiting_for": waiting_for}


LAST = {"op": "all_reduce", "call": "all_reduce(SUM, <f4, (4,))", "step": 56, "ago_s": 12.4,
        "error": None}


def test_a_rank_that_never_entered_is_named_with_what_it_ran_last():
    probes = [Probe(r, OK, _group(r, _call())) for r in (0, 1)] + \
        [Probe(2, OK, _group(2, None, LAST))]
    assert diagnose(probes) == ["all_reduce #57 (4 MiB): ranks 0, 1 waiting 12.3 s; rank 2 has "
                                "not entered it (last: all_reduce #56, 12.4 s ago)"]


def test_a_rank_in_another_collective_or_shape_is_named():
    other_op = [Probe(r, OK, _group(r, _call())) for r in (0, 1)] + \
        [Probe(2, OK, _group(2, _call(op="broadcast", age=1.0)))]
    assert "rank 2 entered a different collective: broadcast" in diagnose(other_op)[0]
    other_shape = [Probe(r, OK, _group(r, _call())) for r in (0, 1)] + \
        [Probe(2, OK, _group(2, _call(shape="(8,)", age=1.0)))]
    assert "rank 2 entered all_reduce with a different shape: all_reduce(SUM, <f4, (8,))" \
        in diagnose(other_shape)[0]


def test_dead_and_hung_ranks_are_named_in_the_line_and_alone():
    probes = [Probe(0, OK, _group(0, _call())), Probe(1, HUNG, None, "no answer within 2 s"),
              Probe(2, DEAD, None, "connection refused")]
    line = diagnose(probes)[0]
    assert "rank 1 did not answer in time: hung or stopped" in line
    assert "rank 2 is not answering: it died" in line
    quiet = diagnose([Probe(0, OK, _group(0, None, LAST)), Probe(2, DEAD, None, "refused")])
    assert quiet == ["rank 2 is not answering: it died or its address is gone (refused)"]


def test_nothing_in_progress_says_so():
    assert diagnose([Probe(0, OK, _group(0, None, LAST))]) == ["no collective in progress"]


@pytest.mark.parametrize("size, text", [(16, "16 B"), (4 << 20, "4 MiB"), (1536, "1.5 KiB")])
def test_sizes_read_in_binary_units(size, text):
    assert format_bytes(size) == text
