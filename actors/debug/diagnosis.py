"""Which rank holds up a collective: the pure diagnosis behind ``actors.debug collectives``.

Takes one `Probe` per process (its rank, whether it answered, and its STATUS) and
says, per group, which collective is in progress (the highest sequence number any
member runs), which members wait in it and for how long, and for each other member
why it is not there: it has not entered it (and what it ran last), it entered a
different collective or the same one with a different shape, it is still in an
earlier one, it died (its connection is refused), or it hangs (no answer in time).
"""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence

OK = "ok"
"""A `Probe` state: the process answered."""
DEAD = "dead"
"""A `Probe` state: nothing answers at its address (the process is gone)."""
HUNG = "hung"
"""A `Probe` state: its connection stands but no answer came within the timeout."""


class Probe(NamedTuple):
    """One process as the commands saw it: `state` OK, DEAD or HUNG, `reason` the error."""

    rank: Optional[int]
    state: str
    status: Optional[Dict[str, Any]]
    reason: str = ""


def diagnose(probes: Sequence[Probe]) -> List[str]:
    """One line per group with a collective in progress, then one per process that did
    not answer and no group line names; ["no collective in progress"] when all is quiet."""
    groups: Dict[str, Dict[int, dict]] = {}  # group id -> global rank -> its group status
    members: Dict[str, List[int]] = {}
    for probe in probes:
        for group in (probe.status or {}).get("collectives") or []:
            groups.setdefault(group["group"], {})[group["rank"]] = group
            members.setdefault(group["group"], group["ranks"])
    silent = {probe.rank: probe for probe in probes if probe.state != OK}
    lines, named = [], set()
    for group_id in sorted(groups):
        line, mentioned = _group_line(group_id, members[group_id], groups[group_id], silent)
        if line:
            lines.append(line)
            named |= mentioned
    for rank, probe in sorted(silent.items(), key=lambda item: (item[0] is None, item[0] or 0)):
        if rank not in named:
            lines.append(silent_line(probe))
    return lines or ["no collective in progress"]


def silent_line(probe: Probe) -> str:
    """The line that says a process did not answer, and why it may be: ``rank 2 did not
    answer in time: hung or stopped (no answer within 2 s)``."""
    return f"rank {probe.rank} {_silence(probe)}"


def _group_line(group_id: str, ranks: List[int], seen: Dict[int, dict],
                silent: Dict[Optional[int], Probe]) -> tuple:
    running = {rank: g["current"] for rank, g in seen.items() if g.get("current")}
    if not running:
        return _failed_line(group_id, seen), set()
    step = max(call["step"] for call in running.values())
    target = _most_common([c for c in running.values() if c["step"] == step])
    waiting = sorted(r for r, c in running.items() if c["step"] == step
                     and c["describe"] == target["describe"])
    age = max(running[r]["age_s"] for r in waiting)
    head = f"{target['op']} #{step}"
    if target.get("bytes") is not None:
        head += f" ({format_bytes(target['bytes'])})"
    if group_id != "0":
        head += f" in group {group_id}"
    parts = [f"{_ranks(waiting)} waiting {age:.1f} s"]
    blamed = set()
    for rank in ranks:
        if rank in waiting:
            continue
        blamed.add(rank)
        parts.append(f"rank {rank} {_absence(rank, seen.get(rank), target, step, silent)}")
    waits_for = sorted({running[r]["waiting_for"] for r in waiting
                        if running[r].get("waiting_for") is not None})
    if waits_for and not blamed:
        parts.append(f"waiting for {_ranks(waits_for)}")
    return f"{head}: " + "; ".join(parts), blamed


def _failed_line(group_id: str, seen: Dict[int, dict]) -> str:
    """The last collective, if it failed on some rank: its step and each distinct error."""
    failed = {rank: g["last"] for rank, g in seen.items()
              if g.get("last") and g["last"].get("error")}
    if not failed:
        return ""
    step = max(last["step"] for last in failed.values())
    errors = sorted({last["error"] for last in failed.values() if last["step"] == step})
    ranks = sorted(r for r, last in failed.items() if last["step"] == step)
    op = next(last["op"] for last in failed.values() if last["step"] == step)
    where = "" if group_id == "0" else f" in group {group_id}"
    return f"{op} #{step}{where} failed on {_ranks(ranks)}: " + " | ".join(errors)


def _absence(rank: int, group: Optional[dict], target: dict, step: int,
             silent: Dict[Optional[int], Probe]) -> str:
    """Why `rank` is not waiting in the collective `target` at `step`."""
    if rank in silent:
        return _silence(silent[rank])
    if group is None:
        return "is not in view (it published no introspection address)"
    current, last = group.get("current"), group.get("last")
    if current is not None and current["step"] == step:
        return _other_call(current, target)
    if last is not None and last["step"] == step and last["call"] != target["call"]:
        failed = f"; it failed there: {last['error']}" if last.get("error") else ""
        return _other_call(last, target) + failed
    if current is not None:
        waits = current.get("waiting_for")
        return (f"is still in {current['op']} #{current['step']}, for {current['age_s']:.1f} s"
                + ("" if waits is None else f" (waiting for rank {waits})"))
    previous = "none" if last is None else \
        f"{last['op']} #{last['step']}, {last['ago_s']:.1f} s ago"
    return f"has not entered it (last: {previous})"


def _other_call(theirs: dict, target: dict) -> str:
    if theirs["op"] != target["op"]:
        return f"entered a different collective: {theirs['call']} (the others: {target['call']})"
    return (f"entered {theirs['op']} with a different shape: {theirs['call']} "
            f"(the others: {target['call']})")


def _silence(probe: Probe) -> str:
    if probe.state == DEAD:
        return f"is not answering: it died or its address is gone ({probe.reason})"
    return f"did not answer in time: hung or stopped ({probe.reason})"


def _most_common(calls: List[dict]) -> dict:
    counts: Dict[str, int] = {}
    for call in calls:
        counts[call["call"]] = counts.get(call["call"], 0) + 1
    best = max(counts, key=lambda name: counts[name])
    return next(call for call in calls if call["call"] == best)


def _ranks(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def format_bytes(size: int) -> str:
    """``4 MiB``, ``512 B``: binary units, one decimal where it matters."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"
