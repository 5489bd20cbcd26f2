"""A fault-tolerant member that waits long at a round says so, for the whole wait."""
import pytest
import structlog

import engine.ft as ft
from engine.ft.quorum import Arrival, plan
from store import TCPStore

pytestmark = pytest.mark.timeout(30)


def test_a_member_waiting_for_another_says_whom_for_the_whole_wait(monkeypatch):
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_AFTER", "0.4")
    monkeypatch.setenv("ACTORGRAD_WAIT_WARN_EVERY", "0.5")
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=10)
    manager = ft.Manager(store=server, replica_id="0", world_size=2, session="waits",
                         timeout=1.5, progress=False)
    last = plan(0, {m: Arrival(0, f"inc-{m}") for m in ("0", "1")}, "0")
    try:
        with structlog.testing.capture_logs() as logs:
            # Replica 1 never votes: the round waits for it, in slices, until its deadline
            # lets the one member there go on.
            votes = manager._arrive("c/0", "ok", last, 1.5, final_min=1)
    finally:
        manager.shutdown()
        server.close()
    assert votes == {"0": b"ok"}
    reports = [e["event"] for e in logs if e["log_level"] == "warning"]
    # due at 0.4 s and 0.9 s (and perhaps 1.4 s): one wait, not one per slice
    assert 2 <= len(reports) <= 3, reports
    assert all(r.startswith("store quorum 'c/0' as '0': waiting for members ['0', '1']")
               for r in reports), reports
