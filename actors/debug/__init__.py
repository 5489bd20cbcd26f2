"""See what a running job is doing: per-process status, calls in flight, stacks, collectives.

The functions take the job's store (a `Store`, or ``"HOST:PORT"``: the job's
MASTER_ADDR:MASTER_PORT, or ``"etcd://HOST:PORT/PREFIX"`` for a job whose init
method is etcd://) and ask every process published there
(`actors.debug.directory`) over its introspection socket, which its I/O thread
answers even while its worker threads are stuck. ``python -m actors.debug`` is the
same from a shell.
"""
from __future__ import annotations

import contextlib
import json
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from actors.runtime import Kind, PeerLostError, RequestTimeoutError
from actors.runtime.introspection.stacks import format_stacks
from actors.runtime.io.channel import Channel

from .chains import Chain, call_chains, format_chain
from .diagnosis import DEAD, HUNG, OK, Probe, diagnose
from .probe import DEFAULT_TIMEOUT, ask_job, open_store
from .trace import clock_offset, file_offset, merge

StoreLike = Union[str, Any]

__all__ = ["snapshot", "calls", "stacks", "collectives", "trace", "trace_files", "Chain",
           "Probe", "OK", "DEAD", "HUNG", "format_chain"]

# Round trips per process to align its clock; the shortest one counts.
_CLOCK_PROBES = 8
# How far apart two hosts' wall clocks may be, for recorder files (ns).
_FILE_CLOCK_ERROR_NS = 1_000_000


@contextlib.contextmanager
def _store(store: StoreLike, timeout: float) -> Iterator[Any]:
    """The store itself, or a client of ``"HOST:PORT"`` (or etcd://) closed after use,
    reached within `timeout` (`open_store`)."""
    if not isinstance(store, str):
        yield store
        return
    client = open_store(store, timeout)
    try:
        yield client
    finally:
        client.close()


def snapshot(store: StoreLike, timeout: float = DEFAULT_TIMEOUT) -> List[Dict[str, Any]]:
    """Every process's STATUS, plus ``"state"`` (ok, dead or hung) and ``"address"``;
    a process that did not answer has its published name and rank and a ``"reason"``."""
    found = []
    with _store(store, timeout) as opened:
        answers = ask_job(opened, Kind.STATUS, timeout)
    for entry, probe in answers:
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
    with _store(store, timeout) as opened:
        answers = ask_job(opened, Kind.STACKS, timeout, rank)
    for entry, probe in answers:
        answer = dict(probe.status or {"name": entry.get("name"), "rank": entry.get("rank"),
                                       "pid": entry.get("pid"), "host": entry.get("host"),
                                       "threads": []})
        answer.update(state=probe.state, reason=probe.reason)
        found.append(answer)
    return found


def collectives(store: StoreLike, timeout: float = DEFAULT_TIMEOUT) -> List[str]:
    """Which collective is in progress and, for each rank not waiting in it, why."""
    with _store(store, timeout) as opened:
        return diagnose([probe for _, probe in ask_job(opened, Kind.STATUS, timeout)])


def trace(store: StoreLike, timeout: float = DEFAULT_TIMEOUT) -> Dict[str, Any]:
    """Every live process's flight recorder merged into one Chrome-trace / Perfetto JSON
    (see `actors.debug.trace`); processes that do not answer are left out, and named
    in its ``otherData.left_out`` (``{"rank", "name", "pid", "state", "reason"}``)."""
    recordings, left_out = [], []
    with _store(store, timeout) as opened:
        answers = ask_job(opened, Kind.STATUS, timeout)  # all at once: the silent are known
    for entry, probe in answers:
        if probe.state != OK:
            left_out.append(_left_out(entry, probe.state, probe.reason))
            continue
        channel = Channel(entry["address"], connect_timeout=timeout)
        try:
            best = None
            for _ in range(_CLOCK_PROBES):
                sent = time.monotonic_ns()
                remote = channel.call(Kind.CLOCK, None, timeout, json=True)["monotonic_ns"]
                received = time.monotonic_ns()
                if best is None or received - sent < best[0]:
                    best = (received - sent, clock_offset(sent, remote, received))
            recording = channel.call(Kind.RECORDER, None, timeout, json=True)
        except (PeerLostError, RequestTimeoutError) as error:  # gone since it answered
            left_out.append(_left_out(entry, HUNG if isinstance(error, RequestTimeoutError)
                                      else DEAD, str(error)))
            continue
        finally:
            channel.close()
        recording.update(offset_ns=best[1], offset_error_ns=best[0] // 2)
        recordings.append(recording)
    return {**merge(recordings), "otherData": {"left_out": left_out}}


def _left_out(entry: Dict[str, Any], state: str, reason: str) -> Dict[str, Any]:
    return {"rank": entry.get("rank"), "name": entry.get("name"), "pid": entry.get("pid"),
            "state": state, "reason": reason}


def trace_files(paths: Sequence[str]) -> Dict[str, Any]:
    """`trace` from flight recorder files (after the job ended), one per process;
    ValueError naming a file that is not one (OSError for one that cannot be read)."""
    recordings = []
    for path in paths:
        with open(path) as source:
            try:
                recording = json.load(source)
                offset = file_offset(recording)
                if not isinstance(recording["entries"], list):
                    raise TypeError("its entries are not a list")
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(f"{path} is not a flight recorder file "
                                 f"({type(error).__name__}: {error})") from None
        recording.update(offset_ns=offset, offset_error_ns=_FILE_CLOCK_ERROR_NS)
        recordings.append(recording)
    return merge(recordings)


def format_stack_report(answer: Dict[str, Any]) -> str:
    """One process's `stacks` entry as text."""
    head = f"== rank {answer.get('rank')} {answer.get('name') or ''} pid {answer.get('pid')}"
    if answer.get("state") != OK:
        return f"{head}: {answer.get('state')} ({answer.get('reason')})"
    return f"{head}\n{format_stacks(answer.get('threads', []))}"
