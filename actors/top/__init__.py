"""``python -m actors.top``: a live view of a running job, one row per worker.

`rows` (pure) turns two snapshots (`actors.debug.snapshot`) taken `seconds` apart
into the rows; `__main__` draws them with rich, refreshing, or prints one frame
(``--once``) or the rows as JSON (``--json``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from actors.debug.diagnosis import format_bytes

COLUMNS = ["rank", "host:pid", "state", "msgs/s in", "msgs/s out", "oldest call",
           "contexts", "collective", "rss", "cpu s"]
WRAPPED = ("state", "oldest call", "collective")
"""The columns whose text wraps at its spaces; the others' values are never split."""
# Left out first when the terminal is too narrow for every column (an 80-column one).
SPARED = ("contexts", "cpu s", "rss", "msgs/s out", "host:pid", "msgs/s in")
_WRAPPED_WIDTH = 12  # the narrowest a wrapped column becomes
_CELL_EDGES = 3  # a cell's padding and its border


def shown_columns(rows_cells: Sequence[List[str]], width: int) -> List[str]:
    """The `COLUMNS` that fit in `width` characters with these cells (each row's
    `cells`): all of them when they fit, else without the first of `SPARED`."""
    def needs(column: str) -> int:
        index = COLUMNS.index(column)
        widest = max([len(column)] + [len(cells[index]) for cells in rows_cells])
        return _CELL_EDGES + (min(widest, _WRAPPED_WIDTH) if column in WRAPPED else widest)

    shown = list(COLUMNS)
    for column in SPARED:
        if 1 + sum(needs(c) for c in shown) <= width:
            break
        shown.remove(column)
    return shown


def _process(status: Dict[str, Any]) -> tuple:
    return status.get("host"), status.get("pid")


def _messages(status: Dict[str, Any], direction: str) -> int:
    return sum(c.get(f"msgs_{direction}", 0) for c in (status.get("messages") or {}).values())


def _oldest_call(status: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    rpc = status.get("rpc") or {}
    calls = [{"function": c.get("function"), "age_s": c.get("age_s", 0.0),
              "peer": c.get("caller"), "role": "serving"} for c in rpc.get("serving", [])]
    calls += [{"function": c.get("function"), "age_s": c.get("age_s", 0.0),
               "peer": c.get("peer"), "role": "waiting"} for c in rpc.get("waiting", [])]
    return max(calls, key=lambda c: c["age_s"]) if calls else None


def _collective(status: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The collective in progress, else the last one if it failed (the group is then
    broken, though nothing runs in it: the row must not read as all well)."""
    groups = status.get("collectives") or []
    for group in groups:
        current = group.get("current")
        if current:
            return {"op": current["op"], "step": current["step"], "age_s": current["age_s"],
                    "waiting_for": current.get("waiting_for")}
    for group in groups:
        last = group.get("last")
        if last and last.get("error"):
            return {"op": last["op"], "step": last["step"], "ago_s": last["ago_s"],
                    "error": last["error"]}
    return None


def _state(status: Dict[str, Any]) -> str:
    if status.get("state", "ok") != "ok":
        return status["state"]
    collective = _collective(status)
    if collective and "error" not in collective:
        return "collective"
    rpc = status.get("rpc") or {}
    if rpc.get("serving"):
        return "busy"
    return "waiting" if rpc.get("waiting") else "idle"


def rows(before: Sequence[Dict[str, Any]], now: Sequence[Dict[str, Any]],
         seconds: float) -> List[Dict[str, Any]]:
    """One row per process of `now`, with rates over the `seconds` since `before`."""
    earlier = {_process(s): s for s in before}
    found = []
    for status in now:
        previous = earlier.get(_process(status))
        rates = {}
        for direction in ("in", "out"):
            delta = _messages(status, direction) - (_messages(previous, direction)
                                                    if previous else 0)
            measured = previous and seconds > 0 and status.get("state", "ok") == "ok"
            rates[direction] = round(delta / seconds, 1) if measured else None
        found.append({
            "rank": status.get("rank"), "name": status.get("name"),
            "host": status.get("host"), "pid": status.get("pid"), "state": _state(status),
            "msgs_per_s_in": rates["in"], "msgs_per_s_out": rates["out"],
            "oldest_call": _oldest_call(status),
            "contexts": (status.get("autograd_contexts") or {}).get("open"),
            "collective": _collective(status), "rss_bytes": status.get("rss_bytes"),
            "cpu_s": status.get("cpu_s"), "reason": status.get("reason")})
    return found


def _collective_cell(collective: Optional[Dict[str, Any]]) -> str:
    if collective is None:
        return "-"
    head = f"{collective['op']} #{collective['step']}"
    if "error" in collective:  # the exception's name: the message is the commands' to give
        return f"{head} failed {collective['ago_s']:.1f} s ago: " \
               f"{collective['error'].split(':', 1)[0]}"
    waits = collective["waiting_for"]
    return f"{head} {collective['age_s']:.1f} s" + ("" if waits is None
                                                     else f", waits for rank {waits}")


def cells(row: Dict[str, Any]) -> List[str]:
    """A row as the text of each of `COLUMNS`."""
    call, collective = row["oldest_call"], row["collective"]
    return [
        f"{row['rank']} {row['name'] or ''}".strip(),
        f"{row['host']}:{row['pid']}",
        row["state"] if not row.get("reason") else f"{row['state']} ({row['reason']})",
        "-" if row["msgs_per_s_in"] is None else f"{row['msgs_per_s_in']:g}",
        "-" if row["msgs_per_s_out"] is None else f"{row['msgs_per_s_out']:g}",
        "-" if call is None else f"{call['function']} {call['age_s']:.1f} s",
        "-" if row["contexts"] is None else str(row["contexts"]),
        _collective_cell(collective),
        "-" if row["rss_bytes"] is None else format_bytes(row["rss_bytes"]),
        "-" if row["cpu_s"] is None else f"{row['cpu_s']:.1f}",
    ]
