"""STATUS, STACKS and RECORDER, answered by an actor's I/O thread over real sockets."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
import zmq

from actors.runtime import Actor, Kind, ProtocolError, UnknownKindError
from actors.runtime.introspection import recorder
from actors.runtime.introspection.recorder import OP_START, RECEIVED, REPLIED, SENT, Traffic
from actors.runtime.introspection.status import add_section, remove_section
from actors.runtime.io.channel import Channel
from actors.runtime.io.context import process_context
from actors.runtime.protocol import envelope
from tests.leftovers import resources
from tests.subprocesses import ROOT
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(60)


def test_status_is_answered_while_every_worker_thread_is_blocked():
    release = threading.Event()
    blocked = threading.Barrier(3)

    def block(msg):
        blocked.wait(10)
        release.wait(30)

    actor = Actor(name="busy", num_worker_threads=2, workers_receive=True).start()
    client = Channel(actor.address)
    status_channel = None
    try:
        actor.register(Kind.PING, block)
        callers = [threading.Thread(target=lambda: Channel(actor.address).call(Kind.PING, None, 30))
                   for _ in range(2)]
        for caller in callers:
            caller.start()
        blocked.wait(10)  # both worker threads are inside `block`
        status_channel = Channel(actor.serve_introspection())
        started = time.monotonic()
        status = status_channel.call(Kind.STATUS, None, 5, json=True)
        assert time.monotonic() - started < 1.0
        assert status["pid"] == os.getpid() and status["messages"]["PING"]["msgs_in"] >= 2
        stacks = status_channel.call(Kind.STACKS, None, 5, json=True)
        assert sum("in block" in " ".join(t["stack"]) for t in stacks["threads"]) == 2
    finally:
        release.set()
        for caller in callers:
            caller.join(10)
        client.close()
        if status_channel is not None:
            status_channel.close()
        actor.stop()


def test_bad_introspection_input_gets_an_error_and_the_actor_keeps_answering():
    actor = Actor(name="target").start()
    channel = Channel(actor.serve_introspection())
    raw = process_context().socket(zmq.DEALER)
    raw.setsockopt(zmq.LINGER, 0)
    try:
        raw.connect(actor.serve_introspection())
        for frames in ([b"garbage"], [b"AG"], envelope.encode(Kind.STATUS, 7, None)):
            raw.send_multipart(frames)
            assert raw.poll(5000), frames
            reply = raw.recv_multipart()
            header = envelope.read_header(reply)
            assert header.flags & 0x02  # ERROR
        with pytest.raises(UnknownKindError):
            channel.call(Kind.RPC_CALL, None, 5, json=True)
        with pytest.raises(ProtocolError, match="JSON only"):
            channel.call(Kind.STATUS, None, 5)  # a pickle is never loaded here
        assert channel.call(Kind.STATUS, None, 5, json=True)["pid"] == os.getpid()
    finally:
        raw.close(0)
        channel.close()
        actor.stop()


def test_a_broken_section_is_reported_and_the_others_still_answer():
    def broken():
        raise RuntimeError("no")

    add_section("broken_for_test", broken)
    actor = Actor(name="sections").start()
    channel = Channel(actor.serve_introspection())
    try:
        status = channel.call(Kind.STATUS, None, 5, json=True)
        assert status["broken_for_test"] == {"error": "RuntimeError: no"}
        assert "messages" in status
    finally:
        remove_section("broken_for_test", broken)
        channel.close()
        actor.stop()


def test_the_introspection_socket_adds_no_thread_and_closes_with_its_actor():
    # A first actor: what the process keeps for good (its one context) is then in.
    warm = Actor(name="warm-up").start()
    Channel(warm.serve_introspection()).close()
    warm.stop()
    before = resources()
    actor = Actor(name="counted").start()
    with_actor = threading.active_count()
    channel = Channel(actor.serve_introspection())
    assert channel.call(Kind.STATUS, None, 5, json=True)
    assert threading.active_count() == with_actor  # answered by the I/O thread
    channel.close()
    actor.stop()
    assert wait_until(lambda: not resources() - before, 5), resources() - before


def _message(traffic, event, kind, frames, peer, ident):
    traffic.record((time.monotonic_ns(), event, peer, kind, ident, sum(map(len, frames)), None))


def test_the_recorder_keeps_the_last_entries_and_counts_every_message():
    traffic = Traffic(3)
    for ident in range(5):
        _message(traffic, SENT, 0x0200, [b"h" * 16, b"body"], "tcp://peer:1", ident)
    _message(traffic, RECEIVED, 0x0200, [b"h" * 16], b"\x01", 9)
    traffic.fold()  # what an I/O thread does every FOLD_INTERVAL
    _message(traffic, REPLIED, 0x0200, [b"h" * 16], b"\x01", 9)
    traffic.record((time.monotonic_ns(), OP_START, "0", "all_reduce", 1, 0, None))
    assert [e[4] for e in traffic.entries()] == [9, 9, 1]
    assert traffic.by_kind() == {0x0200: {"msgs_in": 1, "bytes_in": 16, "msgs_out": 6,
                                          "bytes_out": 116}}
    assert traffic.complete
    no_recorder = Traffic(0)
    _message(no_recorder, SENT, 1, [b"x"], "p", 1)
    assert no_recorder.entries() == [] and no_recorder.by_kind()[1]["msgs_out"] == 1
    assert no_recorder.dump("test", {"name": "x"}) is None
    off = Traffic(8, counting=False)
    _message(off, SENT, 1, [b"x"], "p", 1)
    assert off.entries() == [] and off.by_kind() == {}


def test_counts_say_when_the_recorder_queue_overflowed_between_folds(monkeypatch):
    monkeypatch.setattr(recorder, "QUEUE_LIMIT", 4)
    traffic = Traffic(8)
    for ident in range(6):
        _message(traffic, SENT, 1, [b"x"], "p", ident)
    assert traffic.by_kind()[1]["msgs_out"] == 4 and not traffic.complete


def test_introspection_off_keeps_no_counts_no_recorder_and_no_call_tables():
    script = """
from actors.runtime import Actor, Kind
from actors.runtime.introspection.recorder import RECORDING, TRAFFIC
from actors.rpc.inflight import CallTable
assert not RECORDING  # no place a message passes records it
with Actor(None, name="a") as a, Actor(name="b") as b:
    b.register(Kind.PING, lambda msg: b.reply(msg, "pong"))
    assert a.request(b.address, Kind.PING, None, 5).wait(5) == "pong"
calls = CallTable()
assert calls.serve_started("w0", print) == 0 and calls.wait_started("w1", print, 1.0) == 0
assert (TRAFFIC.by_kind(), TRAFFIC.entries(), calls.status()) == \\
    ({}, [], {"serving": [], "waiting": []})
print("off")
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, "ACTORGRAD_INTROSPECTION": "0",
                               "PYTHONPATH": str(ROOT)})
    assert done.stdout.strip() == "off", done.stderr


def test_a_dump_goes_to_the_log_dir_and_is_written_once_per_reason_in_a_while(tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("ACTORGRAD_LOG_DIR", str(tmp_path))
    traffic = Traffic(8)
    _message(traffic, SENT, 0x0200, [b"x" * 20], "tcp://a:1", 1)
    first = traffic.dump("request_timeout", {"name": "w0", "rank": 0})
    assert first is not None and first.startswith(str(tmp_path))
    assert traffic.dump("request_timeout", {"name": "w0"}) is None
    assert traffic.dump("rank_lost", {"name": "w0"}) is not None


def test_sigusr1_is_taken_only_when_nobody_handles_it_and_no_other_signal_is_touched():
    import signal

    from actors.runtime.introspection import signals

    def own(signum, frame):
        pass

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    previous = signal.signal(signal.SIGUSR1, own)
    try:
        signals.install()
        assert signal.getsignal(signal.SIGUSR1) is own
        assert {sig: signal.getsignal(sig) for sig in before} == before
        errors = []
        worker = threading.Thread(target=lambda: errors.append(signals.install()))
        worker.start()
        worker.join(5)
        assert signal.getsignal(signal.SIGUSR1) is own
    finally:
        signal.signal(signal.SIGUSR1, previous)


TIMEOUT_CHILD = """
import threading
from actors.runtime import Actor, Kind, RequestTimeoutError
release = threading.Event()
server = Actor(name="silent").start()
server.register(Kind.PING, lambda msg: release.wait(10))
client = Actor(None, name="asker").start()
try:
    client.request(server.address, Kind.PING, None, 0.2).wait(5)
except RequestTimeoutError:
    print("timed out", flush=True)
release.set()
client.stop()
server.stop()
"""


def test_a_request_timeout_writes_the_flight_recorder_to_the_log_dir(tmp_path):
    out = subprocess.run([sys.executable, "-c", TIMEOUT_CHILD], cwd=ROOT, capture_output=True,
                         text=True, timeout=30,
                         env={**os.environ, "PYTHONPATH": str(ROOT),
                              "ACTORGRAD_LOG_DIR": str(tmp_path)})
    assert "timed out" in out.stdout, out.stderr
    [path] = tmp_path.glob("flight-*.json")
    assert f"path='{path}'" in out.stderr and "flight_recorder_written" in out.stderr
    recorded = json.loads(path.read_text())
    assert recorded["reason"] == "request_timeout"
    assert any(e["event"] == "send" and e["kind"] == "PING" for e in recorded["entries"])
