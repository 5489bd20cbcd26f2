"""The state's encoding and repairs, and the settings' checks: plain data, no I/O."""
from datetime import timedelta

import pytest

from store import HashStore
from store.elastic import (DynamicRendezvousHandler, RendezvousStateError, RendezvousTimeout,
                           StoreRendezvousBackend)
from store.elastic.settings import NodeDesc, RendezvousSettings
from store.elastic.state import (RendezvousState, dead_nodes, decode_state, encode_state,
                                 remove_nodes)

pytestmark = pytest.mark.timeout(30)

WALL = 1_763_700_000.0


def settings(**overrides):
    values = dict(run_id="run", min_nodes=2, max_nodes=4, timeout=RendezvousTimeout(),
                  keep_alive_interval=5, keep_alive_max_attempt=3)
    values.update(overrides)
    return RendezvousSettings(**values)


def crowded_state(nodes: int, per_host: int = 8) -> RendezvousState:
    """A worst-case-ish state: long host names, big pids, everyone with a heartbeat."""
    members = [NodeDesc(f"node-{i // per_host:04d}.cluster.example.com", 4_000_000 + i,
                        i % per_host)
               for i in range(nodes)]
    half = nodes // 2
    return RendezvousState(
        round=12345, complete=True, deadline=None, closed=False,
        participants={n: r for r, n in enumerate(members[:half])},
        wait_list=set(members[half:]),
        last_heartbeats={n: WALL + i * 0.001 for i, n in enumerate(members)})


def test_a_state_survives_encoding_and_decoding():
    state = crowded_state(10)
    state.deadline = WALL + 30.5
    assert decode_state(encode_state(state)) == state


def test_the_same_state_always_encodes_to_the_same_bytes():
    assert encode_state(crowded_state(50)) == encode_state(crowded_state(50))


@pytest.mark.parametrize("per_host", [1, 8])
@pytest.mark.parametrize("nodes,limit", [(10, 2_000), (100, 16_000), (1_000, 160_000)])
def test_the_encoded_state_stays_small(nodes, limit, per_host):
    assert len(encode_state(crowded_state(nodes, per_host))) <= limit


@pytest.mark.parametrize("garbage", [b"", b"not json", b"[1, 2]", b'{"v": 99}',
                                     b'{"v": 1, "r": 0}', b"\xff\xfe"])
def test_a_corrupt_state_raises_the_state_error(garbage):
    with pytest.raises(RendezvousStateError, match="corrupt"):
        decode_state(garbage)


def test_a_corrupt_state_in_the_store_raises_the_state_error_from_next_rendezvous():
    store = HashStore(timeout=5)
    backend = StoreRendezvousBackend(store, "run")
    store.set(backend.key, b"{garbage")
    handler = DynamicRendezvousHandler.from_backend("run", store, backend, 1, 1)
    with pytest.raises(RendezvousStateError, match="corrupt"):
        handler.next_rendezvous()


def test_nodes_without_a_recent_heartbeat_are_dead():
    state = crowded_state(4)
    nodes = sorted(state.last_heartbeats)
    state.last_heartbeats[nodes[0]] = WALL - 16
    assert dead_nodes(state, settings(), now=WALL) == [nodes[0]]


def test_nodes_reported_lost_are_dead_even_with_a_fresh_heartbeat():
    state = crowded_state(4)
    nodes = sorted(state.last_heartbeats)
    assert dead_nodes(state, settings(), now=WALL, lost=[nodes[3]]) == [nodes[3]]


def test_a_keep_alive_heard_outside_the_state_keeps_a_node_alive_and_leaves_the_state_alone():
    state = crowded_state(4)
    nodes = sorted(state.last_heartbeats)
    state.last_heartbeats[nodes[0]] = state.last_heartbeats[nodes[1]] = WALL - 16
    heard = {nodes[0]: WALL - 1, nodes[1]: WALL - 17}  # an older one does not count
    assert dead_nodes(state, settings(), now=WALL, heard=heard) == [nodes[1]]
    assert state.last_heartbeats[nodes[0]] == WALL - 16


def test_removing_the_last_participant_of_a_complete_round_starts_the_next_round():
    state = crowded_state(2)
    participant = next(iter(state.participants))
    assert remove_nodes(state, settings(), [participant]) is True
    assert (state.complete, state.round, state.participants) == (False, 12346, {})


def test_removing_one_of_several_participants_keeps_a_complete_round_complete():
    state = crowded_state(6)
    victim = sorted(state.participants)[0]
    remove_nodes(state, settings(), [victim])
    assert state.complete and state.round == 12345 and victim not in state.participants


def test_an_open_round_that_falls_below_min_loses_its_last_call_deadline():
    a, b = NodeDesc("h", 1, 0), NodeDesc("h", 2, 0)
    state = RendezvousState(participants={a: 0, b: 0}, deadline=WALL + 30,
                            last_heartbeats={a: WALL, b: WALL})
    remove_nodes(state, settings(), [b])
    assert state.deadline is None and list(state.participants) == [a]


def test_a_dead_node_is_removed_from_every_list():
    state = crowded_state(4)
    waiting = sorted(state.wait_list)[0]
    assert remove_nodes(state, settings(), [waiting]) is False
    assert waiting not in state.wait_list and waiting not in state.last_heartbeats


@pytest.mark.parametrize("overrides,error,message", [
    ({"min_nodes": 0}, ValueError, "min_nodes must be at least 1"),
    ({"max_nodes": 1}, ValueError, r"max_nodes \(1\) must be at least min_nodes \(2\)"),
    ({"keep_alive_interval": 0}, ValueError, "keep_alive_interval must be positive"),
    ({"keep_alive_interval": "5"}, TypeError, "keep_alive_interval must be seconds"),
    ({"keep_alive_max_attempt": 0}, ValueError, "keep_alive_max_attempt must be at least 1"),
    ({"min_nodes": 1.5}, TypeError, "min_nodes must be int"),
    ({"run_id": ""}, ValueError, "run_id must be a non-empty str"),
])
def test_each_bad_setting_is_refused_with_a_clear_error(overrides, error, message):
    with pytest.raises(error, match=message):
        settings(**overrides)


@pytest.mark.parametrize("field", ["join", "last_call", "close", "heartbeat"])
def test_each_timeout_must_be_positive(field):
    with pytest.raises(ValueError, match=f"{field} timeout must be positive"):
        RendezvousTimeout(**{field: 0})


def test_timeouts_take_seconds_or_timedeltas_and_default_to_torchs():
    timeout = RendezvousTimeout(join=timedelta(minutes=1), last_call=2.5)
    assert (timeout.join, timeout.last_call, timeout.close, timeout.heartbeat) == (60, 2.5, 30, 5)


def test_the_handler_reports_its_run_id_and_checks_its_arguments():
    store = HashStore(timeout=5)
    handler = DynamicRendezvousHandler.from_backend("job-7", store,
                                                    StoreRendezvousBackend(store, "job-7"), 1, 2)
    assert handler.get_run_id() == "job-7"
    with pytest.raises(TypeError, match="backend must be a RendezvousBackend"):
        DynamicRendezvousHandler.from_backend("job-7", store, object(), 1, 2)
    with pytest.raises(ValueError, match="max_nodes"):
        DynamicRendezvousHandler.from_backend("job-7", store,
                                              StoreRendezvousBackend(store, "job-7"), 3, 2)
