"""How a pass ends: which send functions still wait for a gradient, and the errors.

Every worker's part of a pass reports ``(version, waiting)``: how many times it
changed and the message ids of its send functions still waiting. Reports ride in
the replies to backward steps, nested replies are folded into their parent's, and
the initiator keeps the newest report of each worker (a worker may be reached by
several steps, answered in any order). Once every step is answered, a send still
waiting never gets its gradient: FAST mode met a send the roots do not reach, and
the nodes behind it were left without gradients. The pass then fails instead of
returning them. Pure logic: no messages, no locks.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, Tuple

from .errors import DistBackwardError

# (worker rank, version, message ids of its sends still waiting); tuples, not dicts
# keyed by rank, travel on the standard pickler's fast path
Report = Tuple[int, int, Tuple[int, ...]]
Reports = Dict[int, Report]  # by worker rank

FAST, SMART = "fast", "smart"
MODES = (FAST, SMART)


def merge(into: Reports, reports: Iterable[Report]) -> None:
    """Fold `reports` into `into`, keeping each worker's newest report."""
    for report in reports:
        held = into.get(report[0])
        if held is None or report[1] > held[1]:
            into[report[0]] = report


def waiting(reports: Reports) -> Dict[int, Tuple[int, ...]]:
    """The workers whose send functions still wait, with those sends' message ids."""
    return {rank: ids for rank, (_, _, ids) in sorted(reports.items()) if ids}


def unfinished_error(stuck: Dict[int, Tuple[int, ...]], mode: str,
                     name_of: Callable[[int], str]) -> DistBackwardError:
    """The error of a pass that ended with sends in `stuck` (non-empty) still waiting."""
    where = "; ".join(f"{name_of(rank)}: " + ", ".join(f"message 0x{i:x}" for i in ids)
                      for rank, ids in stuck.items())
    if mode == FAST:
        message = (f"send functions never received a gradient ({where}). FAST mode "
                   "assumes that every send function of the context receives one, which "
                   "fails when an RPC output is not used by the roots; the nodes behind "
                   "those sends got no gradient. backward(..., mode='smart') handles "
                   "such graphs")
    else:
        message = f"live send functions never received a gradient ({where})"
    return DistBackwardError(name_of(next(iter(stuck))), message)


def lost_error(worker: str, exc: BaseException) -> DistBackwardError:
    """SMART mode's error for a worker lost while the pass needed it (a live send)."""
    return DistBackwardError(worker, f"the worker was lost while the pass needed it (it "
                                     f"holds live send functions): {exc}")
