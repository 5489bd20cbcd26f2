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

from actors.runtime import (Actor, Kind, ProtocolError, RequestTimeoutError,
                            UnknownKindError)
from actors.runtime.introspection import recorder
from actors.runtime.introspection.dumps import WRITER
from actors.runtime.introspection.recorder import (ANSWERED, CALLED, OP, OP_START, RECEIVED,
                                                   SENT, SERVED, Traffic, recording)
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
    size = sum(map(len, frames))
    sent, received = (0, size) if event in (RECEIVED, ANSWERED) else (size, 0)
    traffic.record((time.monotonic_ns(), event, peer, kind, ident, sent, received, None, None))


def test_the_recorder_keeps_the_last_entries_and_counts_every_message():
    traffic = Traffic(3)
    for ident in range(5):
        _message(traffic, SENT, 0x0200, [b"h" * 16, b"body"], "tcp://peer:1", ident)
    _message(traffic, RECEIVED, 0x0200, [b"h" * 16], b"\x01", 9)
    traffic.fold()  # what an I/O thread does every FOLD_INTERVAL
    # a request served: 30 bytes in, 12 out; a call made: 7 bytes out, 3 in
    traffic.record((time.monotonic_ns(), SERVED, b"\x01", 0x0200, 10, 12, 30, None, 1.0))
    traffic.record((time.monotonic_ns(), CALLED, "tcp://peer:1", 0x0200, 6, 7, 3, print, 2.0))
    traffic.record((time.monotonic_ns(), OP, "0", "all_reduce", 1, 0, 0, None, 3.0))
    assert [e[4] for e in traffic.entries()] == [10, 6, 1]
    assert traffic.by_kind() == {0x0200: {"msgs_in": 3, "bytes_in": 49, "msgs_out": 7,
                                          "bytes_out": 119}}
    assert traffic.complete
    no_recorder = Traffic(0)
    _message(no_recorder, SENT, 1, [b"x"], "p", 1)
    assert no_recorder.entries() == [] and no_recorder.by_kind()[1]["msgs_out"] == 1
    assert no_recorder.dump("test", {"name": "x"}) is None
    off = Traffic(8, counting=False)
    _message(off, SENT, 1, [b"x"], "p", 1)
    assert off.entries() == [] and off.by_kind() == {}


def test_counts_of_batches_of_one_kind_and_of_mixed_kinds_agree_with_a_plain_tally():
    served = [(i, SERVED, b"\x01", 0x0200, i, 10 + i, 20 + i, None, 1.0) for i in range(50)]
    mixed = [(i, event, "p", kind, i, i % 3 * 7, i % 2 * 5, None, None)
             for i, (event, kind) in enumerate([(SENT, 1), (RECEIVED, 1), (OP, "barrier")] * 20)]
    counts = recorder.Counts()
    for batch in (served, [], mixed, served[:1]):
        counts.add(batch)
    tally: dict = {}
    for _, event, _, kind, _, sent, received, _, _ in served + mixed + served[:1]:
        row = tally.setdefault((event, kind), [0, 0, 0])
        row[0], row[1], row[2] = row[0] + 1, row[1] + sent, row[2] + received
    assert {key: list(row) for key, row in counts.items()} == tally


def test_an_exchange_is_written_as_its_messages_in_time_order_with_what_is_still_open():
    traffic = Traffic(8)
    start = time.monotonic()
    ns = round(start * 1e9)
    traffic.record((ns + 5000, CALLED, "tcp://b:1", 0x0200, 4, 70, 20, print, start))
    traffic.record((ns + 4000, SERVED, b"\xaa", 0x0200, 9, 30, 60, None, start + 1e-6))
    traffic.record((ns + 6000, OP, "0", "all_reduce", 3, 0, 0, "DistError: x", start + 2e-6))

    class Running:
        def open_entries(self):
            return [(ns + 500, OP_START, "0", "barrier", 4, 0, 0, None, None)]

    running = Running()
    traffic.watch(running)
    written = recording("asked", {"name": "w"}, traffic.entries())["entries"]
    assert [(e["t_ns"] - ns, e["event"], e["id"], e["size"], e["what"]) for e in written] == [
        (0, "send", 4, 70, "builtins.print"), (500, "op_start", 4, 0, None),
        (1000, "recv", 9, 60, None), (2000, "op_start", 3, 0, None),
        (4000, "send_reply", 9, 30, None), (5000, "recv_reply", 4, 20, None),
        (6000, "op_end", 3, 0, "DistError: x")]
    assert written[2]["peer"] == "aa" and written[0]["kind"] == "RPC_CALL"
    del running  # a source is read only while it lives
    assert len(traffic.entries()) == 3


def test_a_request_is_in_the_recorder_while_open_and_once_with_its_reply_when_answered():
    from actors.runtime.introspection.recorder import TRAFFIC

    release = threading.Event()
    caller, server = Actor(None, name="caller").start(), Actor(name="server").start()
    try:
        server.register(Kind.PING, lambda msg: release.wait(30) and "pong")
        reply = caller.request(server.address, Kind.PING, "x" * 12345, 30)
        size = len(b"".join(envelope.encode(Kind.PING, 1, "x" * 12345, 0)))

        def ours():  # this request's messages, in order (no other request has its size)
            entries = [e for e in recording("asked", {}, TRAFFIC.entries())["entries"]
                       if e["kind"] == "PING"]
            received = [e for e in entries if e["event"] == "recv" and e["size"] == size]
            peers = {server.address} | {e["peer"] for e in received}
            return [e["event"] for e in entries if e["peer"] in peers and received
                    and e["id"] == received[0]["id"]]

        # open on both sides: sent, received, and counted
        assert wait_until(lambda: ours() == ["send", "recv"], 5), ours()
        assert TRAFFIC.by_kind()[Kind.PING]["msgs_in"] >= 1
        release.set()
        assert reply.wait(10) == "pong"
        assert wait_until(lambda: ours() == ["send", "recv", "send_reply", "recv_reply"], 5), \
            ours()
    finally:
        release.set()
        caller.stop()
        server.stop()


def test_a_blocking_call_is_one_entry_once_answered_and_its_send_alone_when_it_times_out():
    from actors.runtime.introspection.recorder import TRAFFIC

    release = threading.Event()
    server = Actor(name="server").start()
    channel = Channel(server.address)
    try:
        server.register(Kind.PING, lambda msg: release.wait(30) and "pong")
        payload = "y" * 23456
        size = len(b"".join(envelope.encode(Kind.PING, 1, payload, 0)))

        def ours():  # (event, size) of this channel's PING calls of that size
            return [(e[1], e[5]) for e in TRAFFIC.entries()
                    if e[2] == channel.address and e[3] == Kind.PING and e[5] == size]

        caller = threading.Thread(target=lambda: channel.call(Kind.PING, payload, 30))
        caller.start()
        # open while it waits: its send, read from the channel, and a call waited on
        assert wait_until(lambda: ours() == [(SENT, size)], 5), ours()
        [(address, what, thread, started, timeout)] = channel.calls_waiting()
        assert (address, what, thread, timeout) == (server.address, None, caller.ident, 30)
        assert 0 <= time.monotonic() - started < 10
        release.set()
        caller.join(10)
        # answered: one entry for the call, written as its send and its reply
        assert ours() == [(CALLED, size)]
        [entry] = [e for e in TRAFFIC.entries() if e[1] == CALLED and e[5] == size]
        written = recording("asked", {}, [entry])["entries"]
        assert [(e["event"], e["size"]) for e in written] == [("send", size),
                                                              ("recv_reply", entry[6])]
        assert written[0]["t_ns"] <= written[1]["t_ns"]
        # a call that times out is its send alone
        release.clear()
        with pytest.raises(RequestTimeoutError):
            channel.call(Kind.PING, payload, 0.2)
        assert ours() == [(CALLED, size), (SENT, size)]
    finally:
        release.set()
        channel.close()
        server.stop()


def test_the_recorder_is_read_while_other_threads_add_and_drop_sources():
    traffic = Traffic(8)

    class Source:
        def open_entries(self):
            return [(1, SENT, "p", 1, 1, 1, 0, None, None)]

    kept, stop, failures = [], threading.Event(), []

    def churn():
        while not stop.is_set():
            source = Source()
            traffic.watch(source)
            kept.append(source)
            if len(kept) > 64:
                del kept[:32]  # dropped sources leave the set while it is read

    adder = threading.Thread(target=churn)
    adder.start()
    try:
        for _ in range(2000):
            try:
                traffic.entries()
                traffic.by_kind()
            except RuntimeError as exc:  # "Set changed size during iteration"
                failures.append(exc)
                break
    finally:
        stop.set()
        adder.join(10)
    assert not failures


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
from actors.runtime.io.channel import Channel
from actors.rpc.inflight import calls_status
assert not RECORDING  # no place a message passes records it
with Actor(None, name="a") as a, Actor(name="b") as b:
    b.register(Kind.PING, lambda msg: b.reply(msg, "pong"))
    assert a.request(b.address, Kind.PING, None, 5).wait(5) == "pong"
    b.register(Kind.PING, lambda msg: b.requests_being_served())
    assert a.request(b.address, Kind.PING, None, 5).wait(5) == []
    channel = Channel(b.address)
    b.register(Kind.PING, lambda msg: channel.calls_waiting())  # asked while it waits
    assert channel.call(Kind.PING, None, 5) == []
    channel.close()
    # a request kept for its reply is no call waited on either, while it waits
    b.register(Kind.PING, lambda msg: b.reply(msg, calls_status(a.requests_in_flight())))
    assert a.request(b.address, Kind.PING, None, 5, what=len).wait(5)["waiting"] == []
assert (TRAFFIC.by_kind(), TRAFFIC.entries(), calls_status()) == \\
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
    assert WRITER.flush(time.monotonic() + 10)
    assert sorted(tmp_path.glob("flight-*.json")) != [] and not list(tmp_path.glob("*.part"))


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


WORKER_LOST_CHILD = """
import glob
import multiprocessing as mp
import os
import actors
from actors.rpc import WorkerLostError
from tests.net import free_port
from tests.rpc import workers
from tests.waiting import wait_until

if __name__ == "__main__":
    port = free_port()
    peer = mp.get_context("spawn").Process(target=workers.serve,
                                           args=(1, 2, port, 2, False), daemon=True)
    peer.start()
    try:
        actors.init_rpc("worker0", 0, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=30)
        peer.kill()
        try:
            actors.rpc_sync("worker1", workers.hang, timeout=30)
        except WorkerLostError:
            print("lost", flush=True)
        # The loss reaches the RPC layer from the I/O thread, moments after the error.
        folder = os.environ["ACTORGRAD_LOG_DIR"]
        assert wait_until(lambda: glob.glob(os.path.join(folder, "flight-*.json")), 20)
        actors.shutdown(graceful=False)
    finally:
        peer.kill()
        peer.join(10)
"""


def test_a_lost_rpc_worker_writes_the_flight_recorder(tmp_path):
    script = tmp_path / "lose_a_worker.py"
    script.write_text(WORKER_LOST_CHILD)
    flight = tmp_path / "flight"
    out = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                         text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT),
                              "ACTORGRAD_LOG_DIR": str(flight)})
    assert "lost" in out.stdout, out.stderr
    reasons = [json.loads(path.read_text())["reason"] for path in flight.glob("flight-*.json")]
    assert "worker_lost" in reasons, out.stderr

