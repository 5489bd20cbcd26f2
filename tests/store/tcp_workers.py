"""Processes for the TCPStore tests: a server to kill, clients that join or hang."""
import os
import time

from store.server import StoreServer
from store.tcp_store import TCPStore


def serve(ready) -> None:
    server = StoreServer("127.0.0.1", 0).start()
    ready.put(server.port)
    while True:
        time.sleep(3600)


def join_world(port: int, world_size: int, done) -> None:
    store = TCPStore("127.0.0.1", port, world_size=world_size, timeout=30)
    done.put(os.getpid())
    store.close()


def block_on_missing_key(port: int, ready) -> None:
    """Park a get and a watch on the server, then hang until killed."""
    store = TCPStore("127.0.0.1", port, timeout=60)
    store.watch_key("watched", lambda old, new: None)
    store.set("client-was-here", b"1")
    ready.put("parked")
    store.get("never-set")


def close_under_blocked_get(who: str, results) -> None:
    """Close a master or a client while another thread is blocked in its `get`; report
    what the get raised and whether close returned (an abort would end the process)."""
    import threading

    from tests.waiting import raised_by, wait_until

    master = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=30)
    store = master if who == "master" else TCPStore("127.0.0.1", master.port, timeout=30)
    raised = []
    blocked = threading.Thread(target=lambda: raised.append(raised_by(store.get, "never")))
    blocked.start()
    parked = wait_until(lambda: "never" in master._server.service._waiting)
    store.close()
    blocked.join(10)
    results.put((parked, blocked.is_alive(), type(raised[0]).__name__ if raised else None,
                 str(raised[0]) if raised else None))
    master.close()


def churn_threads(port: int, threads: int, max_fds: int, results) -> None:
    """Make one call on each of `threads` short-lived threads, one after the other, under
    a limit of `max_fds` open descriptors; report the first error, or None."""
    import resource
    import threading

    resource.setrlimit(resource.RLIMIT_NOFILE, (max_fds, max_fds))
    store = TCPStore("127.0.0.1", port, timeout=30)
    store.set("k", "v")
    errors = []

    def one() -> None:
        try:
            store.get("k")
        except Exception as exc:  # noqa: BLE001 - reported to the test
            errors.append(f"{type(exc).__name__}: {exc}")

    for _ in range(threads):
        thread = threading.Thread(target=one)
        thread.start()
        thread.join(30)
        if errors:
            break
    store.close()
    results.put(errors[0] if errors else None)


class Interrupted(Exception):
    """What the popper's SIGUSR1 handler raises, as Ctrl-C raises KeyboardInterrupt."""


def pop_interrupted(port: int, events, go) -> None:
    """Block in queue_pop until SIGUSR1 interrupts it, then pop again once told to."""
    import signal

    def interrupt(*_) -> None:
        raise Interrupted()

    signal.signal(signal.SIGUSR1, interrupt)
    store = TCPStore("127.0.0.1", port, timeout=30)
    events.put("popping")
    try:
        store.queue_pop("jobs")
    except Interrupted:
        events.put("interrupted")
    go.get(timeout=30)
    events.put(store.queue_pop("jobs", True, 10))
    store.close()


def pop_until_killed(port: int, events) -> None:
    store = TCPStore("127.0.0.1", port, timeout=60)
    events.put("popping")
    store.queue_pop("jobs")
