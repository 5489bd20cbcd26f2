"""See what a running job is doing: per-process status, calls in flight, stacks, collectives.

The functions take the job's store (a `Store`, or ``"HOST:PORT"``: the job's
MASTER_ADDR:MASTER_PORT) and ask every process published there
(`actors.debug.directory`) over its introspection socket, which its I/O thread
answers even while its worker threads are stuck. ``python -m actors.debug`` is the
same from a shell.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from actors.runtime import Kind
from actors.runtime.introspection.stacks import format_stacks

from .chains import Chain, call_chains, format_chain
from .diagnosis import DEAD, HUNG, OK, Probe, diagnose
from .probe import DEFAULT_TIMEOUT, ask_job, open_store

StoreLike = Union[str, Any]

__all__ = ["snapshot", "calls", "stacks", "collectives", "Chain", "Probe", "OK", "DEAD",
           "HUNG", "format_chain"]


def _store(store: StoreLike) -> Any:
    return open_store(store) if isinstance(store, str) else store


def snapshot(store: StoreLike, timeout: float = DEFAULT_TIMEOUT) -> List[Dict[str, Any]]:
    """Every process's STATUS, plus ``"state"`` (ok, dead or hung) and ``"address"``;
    a process that did not answer has its published name and rank and a ``"reason"``."""
    found = []
    for entry, probe in ask_job(_store(store), Kind.STATUS, timeout):
        status = dict(probe.status or {"name": entry.get("name"), "rank": entry.get("rank"),
                                       "pid": entry.get("pid"), "host": entry.get("host")})
        status.update(state=probe.state, address=entry["address"])
        if probe.reason:
            status["reason"] = probe.reason
        found.append(status)
    return found


def calls(store: StoreLike, timeout: float = DEFAULT_TIMEOUT) -> List[Chain]:
    """The RPC calls in flight as chains across workers, the oldest first."""
    return call_chains([s for s in snapshot(store, timeout) if s["state"] == OK])


def stacks(store: StoreLike, rank: Optional[int] = None,
           timeout: float = DEFAULT_TIMEOUT) -> List[Dict[str, Any]]:
    """Every process's (or `rank`'s) thread stacks: ``{"name", "rank", ..., "threads"}``."""
    found = []
    for entry, probe in ask_job(_store(store), Kind.STACKS, timeout, rank):
        answer = dict(probe.status or {"name": entry.get("name"), "rank": entry.get("rank"),
                                       "threads": []})
        answer.update(state=probe.state, reason=probe.reason)
        found.append(answer)
    return found


def collectives(store: StoreLike, timeout: float = DEFAULT_TIMEOUT) -> List[str]:
    """Which collective is in progress and, for each rank not waiting in it, why."""
    return diagnose([probe for _, probe in ask_job(_store(store), Kind.STATUS, timeout)])


def format_stack_report(answer: Dict[str, Any]) -> str:
    """One process's `stacks` entry as text."""
    head = f"== rank {answer.get('rank')} {answer.get('name') or ''} pid {answer.get('pid')}"
    if answer.get("state") != OK:
        return f"{head}: {answer.get('state')} ({answer.get('reason')})"
    return f"{head}\n{format_stacks(answer.get('threads', []))}"
