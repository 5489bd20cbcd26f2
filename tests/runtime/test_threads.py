"""The thread registry lists each thread the project starts, with its owner and purpose,
for as long as it runs."""
import gc
import threading
import time
import weakref

import pytest

from actors.keys import generate
from actors.runtime import Actor
from actors.runtime.io.security import Security, set_security
from actors.runtime.concurrency.threads import (new_thread, register_foreign, running_threads,
                                                start_thread)
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

OWNER = "tests.runtime.test_threads"


def records_of(thread: threading.Thread) -> list:
    return [record for record in running_threads() if record.ident == thread.ident]


def test_a_started_thread_is_listed_with_its_owner_and_purpose_until_it_ends():
    go_on = threading.Event()
    before = time.time()
    thread = start_thread(go_on.wait, args=(10.0,), name="registry-probe", owner=OWNER,
                          purpose="waits to be let go")
    try:
        [record] = records_of(thread)
        assert (record.name, record.owner, record.purpose) == (
            "registry-probe", OWNER, "waits to be let go")
        assert before <= record.started <= time.time()
    finally:
        go_on.set()
        thread.join(10)
    assert records_of(thread) == []
    assert "registry-probe" not in [record.name for record in running_threads()]


def test_a_thread_made_with_new_thread_is_listed_only_once_started():
    go_on = threading.Event()
    thread = new_thread(go_on.wait, args=(10.0,), name="registry-later", owner=OWNER,
                        purpose="starts later")
    assert "registry-later" not in [record.name for record in running_threads()]
    thread.start()
    try:
        assert [record.name for record in records_of(thread)] == ["registry-later"]
    finally:
        go_on.set()
        thread.join(10)


def test_a_foreign_thread_is_listed_once_registered_and_forgotten_when_it_ends():
    go_on = threading.Event()
    thread = threading.Thread(target=go_on.wait, args=(10.0,), daemon=True)
    thread.start()
    try:
        assert records_of(thread) == []
        register_foreign(thread, OWNER, "started by someone else")
        [record] = records_of(thread)
        assert (record.owner, record.purpose) == (OWNER, "started by someone else")
    finally:
        go_on.set()
        thread.join(10)
    assert records_of(thread) == []


def test_the_registry_keeps_no_ended_thread_alive():
    thread = start_thread(lambda: None, name="registry-short", owner=OWNER, purpose="ends")
    thread.join(10)
    gone = weakref.ref(thread)
    del thread
    gc.collect()
    assert gone() is None


def test_an_actors_io_thread_and_workers_are_listed_while_it_runs():
    actor = Actor("tcp://127.0.0.1:0", name="listed", num_worker_threads=2).start()
    try:
        owners = {record.name: record.owner for record in running_threads()
                  if record.name.startswith("listed-")}
        assert owners == {"listed-io": "actors.runtime.io.mailbox.Mailbox",
                          "listed-worker-0": "actors.runtime.concurrency.scheduler.WorkerPool",
                          "listed-worker-1": "actors.runtime.concurrency.scheduler.WorkerPool"}
    finally:
        actor.stop()
    assert wait_until(lambda: not [record for record in running_threads()
                                   if record.name.startswith("listed-")], 10)


def test_the_zap_handlers_thread_is_listed_while_curve_is_set(tmp_path):
    generate(tmp_path / "keys")
    set_security(Security.from_dir(tmp_path / "keys"))
    try:
        server = Actor("tcp://127.0.0.1:0", name="curve-listed").start()
        server.stop()
        zap = [record for record in running_threads()
               if record.owner == "actors.runtime.io.security"]
        assert len(zap) == 1 and "ZAP" in zap[0].purpose
    finally:
        set_security(None)
    assert wait_until(lambda: not [record for record in running_threads()
                                   if record.owner == "actors.runtime.io.security"], 10)
