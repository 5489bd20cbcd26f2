"""Blocking store operations that say what they wait for, one loop for every store.

Each store knows how to try an operation for a while (a condition variable, polling a
file, one request to the server, an etcd watch); `block` runs that attempt in slices
bounded by the operation's deadline and by the next report a `SlowWait` owes, so a
`get`, `wait`, `multi_get` or blocking `queue_pop` that lasts logs which keys are still
missing. `wait_keys` does the same for a caller that waits on keys for a purpose of its
own (a barrier, a world that assembles) and describes it in its own words.
The texts are pure functions of what is known (`key_wait_text`).
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, List, Optional, Sequence, Tuple, TypeVar

from actors.runtime.process.waits import SlowWait, first_report_after
from store.base import Store
from store.errors import StoreTimeoutError

T = TypeVar("T")
# An attempt's answer: (True, the result) or (False, the keys still missing).
Attempt = Tuple[bool, Any]
_SHOWN = 8  # keys named in one report; the rest are counted


def _keys_text(keys: Sequence[str]) -> str:
    shown = repr(list(keys[:_SHOWN]))
    return shown if len(keys) <= _SHOWN else f"{shown[:-1]}, ... {len(keys) - _SHOWN} more]"


def key_wait_text(operation: str, keys: Sequence[str], missing: Sequence[str],
                  where: str = "") -> str:
    """What a blocked store operation waits for, e.g.
    ``store wait for keys ['a', 'b'] (missing: ['b'])``."""
    at = f" on {where}" if where else ""
    if operation == "queue_pop":
        return f"store queue_pop{at} waiting for an item in queue {keys[0]!r}"
    if len(keys) == 1:
        return f"store {operation}{at} for key {keys[0]!r}"
    return f"store {operation}{at} for keys {_keys_text(keys)} (missing: {_keys_text(missing)})"


def block(attempt_for: Callable[[float], Attempt], operation: str, keys: Sequence[str],
          timeout: Optional[float], where: str = "") -> Any:
    """Run `attempt_for(seconds)` (try, blocking at most `seconds`) until it answers or
    `timeout` seconds pass (None: no limit); StoreTimeoutError names the keys missing.

    Every attempt is tried at least once, so a timeout of 0 checks once.
    """
    start = time.monotonic()
    deadline = math.inf if timeout is None else start + timeout
    # The first try runs until the first report is due, so a short wait (most of them)
    # never pays for a SlowWait.
    done, answer = attempt_for(max(0.0, min(deadline - start, first_report_after())))
    if done:
        return answer
    missing: List[str] = list(answer)
    with SlowWait(lambda: key_wait_text(operation, keys, missing, where), since=start) as report:
        while True:
            if time.monotonic() >= deadline:
                raise StoreTimeoutError(operation, missing, timeout)
            report.tick()
            done, answer = attempt_for(
                max(0.0, min(deadline - time.monotonic(), report.next_in())))
            if done:
                return answer
            missing[:] = answer


def wait_keys(store: Store, keys: Sequence[str], timeout: float, what: Callable[[], Any],
              enough: Optional[Callable[[], bool]] = None, every: float = math.inf) -> None:
    """`store.wait(keys, timeout)`, reporting `what()` while it lasts: the text of a
    caller that knows what the keys mean ("store barrier 'x': 3 of 4 arrived"), which
    the StoreTimeoutError of a timeout ends with too.
    With `enough`, it also ends once `enough()` is true, asked every `every` seconds.

    `what` and `enough` run between two waits, so they may ask the store.
    """
    deadline = time.monotonic() + timeout
    with SlowWait(what) as report:
        while True:
            try:
                store.wait(keys, max(0.0, min(deadline - time.monotonic(), report.next_in(),
                                              every)))
                return
            except StoreTimeoutError as exc:
                if enough is not None and enough():
                    return
                if time.monotonic() >= deadline:
                    # The caller's words say what was missing; its keys alone do not.
                    raise StoreTimeoutError(exc.operation, exc.keys, timeout,
                                            exc.detail or str(what())) from None
            report.tick()
