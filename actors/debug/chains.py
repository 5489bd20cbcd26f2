"""Calls in flight as chains across workers: who waits on whom, and what runs at the end.

Pure: takes the STATUS answers (their ``rpc`` sections) and returns chains. A
worker's outgoing call is linked to the call it serves on the same thread (that
call made it; an `async_execution` call that returned its future keeps the calls it
made, and those its futures' callbacks make, under a token of its own in place of
the thread), and to the callee's served
call from that worker with the same function, so a nested call ``w0 → w1 → w2``
reads as one chain ending in the function that runs (or is stuck) on ``w2``.
"""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence


class Chain(NamedTuple):
    """Workers from the first caller to the last callee, the function running at the
    end (None if the last callee does not show it) and how long it has run."""

    workers: List[str]
    function: Optional[str]
    age_s: float


def call_chains(statuses: Sequence[Dict[str, Any]]) -> List[Chain]:
    """Every chain of calls in flight among `statuses`, the oldest first."""
    serving: Dict[str, List[dict]] = {}
    waiting: Dict[str, List[dict]] = {}
    for status in statuses:
        rpc = status.get("rpc") if status else None
        if isinstance(rpc, dict) and rpc.get("name"):
            serving[rpc["name"]] = list(rpc.get("serving", []))
            waiting[rpc["name"]] = list(rpc.get("waiting", []))
    used: set = set()  # ids of served entries already placed in a chain
    chains = []
    for worker, calls in waiting.items():
        own_threads = {entry.get("thread") for entry in serving.get(worker, [])}
        for call in calls:
            if call.get("thread") in own_threads:
                continue  # made by a call this worker serves: part of that call's chain
            chains.append(_follow([worker], call, serving, waiting, used))
    for worker, calls in serving.items():
        for call in calls:
            if id(call) not in used:  # its caller is not in view (or called asynchronously)
                used.add(id(call))
                chains.append(_descend([call["caller"], worker], call, serving, waiting, used))
    return sorted(chains, key=lambda chain: -chain.age_s)


def _follow(path: List[str], call: dict, serving: Dict[str, List[dict]],
            waiting: Dict[str, List[dict]], used: set) -> Chain:
    """Extend `path` (ending at the caller of `call`) through the callee."""
    callee = call["peer"]
    served = _match(serving.get(callee, []), path[-1], call.get("function"), used)
    if served is None:
        return Chain(path + [callee], call.get("function"), call.get("age_s", 0.0))
    used.add(id(served))
    return _descend(path + [callee], served, serving, waiting, used)


def _descend(path: List[str], served: dict, serving: Dict[str, List[dict]],
             waiting: Dict[str, List[dict]], used: set) -> Chain:
    """`served` runs on the last worker of `path`: follow its own call out, if any."""
    if len(path) <= 16:  # a cycle of names would otherwise never end
        for call in waiting.get(path[-1], []):
            if call.get("thread") == served.get("thread"):
                return _follow(path, call, serving, waiting, used)
    return Chain(path, served.get("function"), served.get("age_s", 0.0))


def _match(candidates: List[dict], caller: str, function: Any, used: set) -> Optional[dict]:
    """The oldest unused served call from `caller` running `function`."""
    found = [c for c in candidates if id(c) not in used and c.get("caller") == caller
             and c.get("function") == function]
    return max(found, key=lambda c: c.get("age_s", 0.0)) if found else None


def format_chain(chain: Chain) -> str:
    """``w0 → w1 → w2  mymodule.stuck_here  3.2 s``."""
    function = chain.function or "(not started on the callee)"
    return f"{' → '.join(chain.workers)}  {function}  {chain.age_s:.1f} s"
