"""How long a test lets a timed behaviour take: the floor measured here, with margin.

A test that says "this fails promptly" checks it with `within(started, LIMIT, kind)`.
A limit is the time its mechanism takes by design (the heartbeats' interval and
timeout; a timeout the test sets is left out by starting the clock after it) plus a
margin of at least five times the slowest rest measured for its kind with a
busy-looping process beside the tests, and at least a second, since a loaded 2-core
machine can stall a process for hundreds of milliseconds. With
``ACTORGRAD_TEST_FLOORS=FILE`` set, every check appends what it measured to FILE (one
JSON line each), and ``python -m tests.limits FILE`` prints the slowest of each kind:
that is how the floors in docs/TESTING.md were taken.
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Dict

# Decided in this process, with nothing to wait for: a peer already known lost, a
# `check` that never blocks.
AT_ONCE = 1.0
# A killed process noticed because its connection closed (the kernel closes it at once).
CONNECTION_CLOSED = 5.0
# An address nothing listens on, noticed from the refused connection attempts.
NOTHING_LISTENS = 5.0
# A hung process noticed by missed heartbeats: up to the 1 s interval and the 3 s
# timeout by design, plus margin.
HEARTBEATS_MISSED = 8.0
# A graceful RPC shutdown that leaves a lost worker behind: three barrier rounds, each
# noticing the loss within its 0.25 s look at the store, and the store host's 5 s grace
# for a worker found lost, plus margin.
LEFT_BEHIND = 12.0
# Beyond a timeout the test itself sets: the time to notice it passed and to clean up.
AFTER_TIMEOUT = 5.0

_FLOORS = "ACTORGRAD_TEST_FLOORS"


def within(started: float, limit: float, kind: str) -> float:
    """Assert that less than `limit` seconds passed since `started` (monotonic); the time."""
    took = time.monotonic() - started
    path = os.environ.get(_FLOORS)
    if path:
        with open(path, "a") as out:
            out.write(json.dumps({"kind": kind, "seconds": round(took, 4)}) + "\n")
    assert took < limit, f"{kind}: took {took:.3f} s, limit {limit:g} s"
    return took


def slowest(path: str) -> Dict[str, float]:
    """The slowest time recorded in `path` for each kind."""
    floors: Dict[str, float] = {}
    with open(path) as records:
        for line in records:
            record = json.loads(line)
            floors[record["kind"]] = max(floors.get(record["kind"], 0.0), record["seconds"])
    return floors


if __name__ == "__main__":
    for kind, seconds in sorted(slowest(sys.argv[1]).items()):
        print(f"{kind:24} {seconds * 1000:9.1f} ms")
