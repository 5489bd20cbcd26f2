"""The STATUS answer: who this process is, what it moved, and what its layers are doing.

The runtime knows only its own part (identity, resources, traffic, and the elastic
rendezvous round its launcher started it for, from the environment). The layers above
register a *section* each (`add_section`): a function called on the answering thread
that returns JSON-ready data, e.g. the RPC agent's calls in flight, a process
group's collective in progress, the open distributed-autograd contexts. A section
reads shared state without locks the hot path takes, and must not block.
"""
from __future__ import annotations

import os
import resource
import socket
import sys
import time
from typing import Any, Callable, Dict, Optional

from ..protocol import kind_name
from .recorder import RECORDING, TRAFFIC, Traffic

# Set by the launcher for each worker: the rendezvous round, and its nodes in rank order.
ROUND_VARIABLE = "ACTORGRAD_RDZV_ROUND"
MEMBERS_VARIABLE = "ACTORGRAD_RDZV_MEMBERS"

_started_wall = time.time()
_started = time.monotonic()
_identity: Dict[str, Any] = {"name": None, "rank": None}
_sections: Dict[str, Callable[[], Any]] = {}
_mailboxes: Dict[str, Optional[str]] = {}  # address -> the routing id its actor presents (hex)


def set_identity(name: Optional[str] = None, rank: Optional[int] = None) -> None:
    """Name this process in answers and recorder files (the last caller wins)."""
    if name is not None:
        _identity["name"] = name
    if rank is not None:
        _identity["rank"] = rank


def identity() -> Dict[str, Any]:
    """``{"name", "rank", "pid", "host"}`` of this process."""
    return {**_identity, "pid": os.getpid(), "host": socket.gethostname()}


def note_mailbox(address: str, routing_id: Optional[bytes]) -> None:
    """An actor of this process listens at `address` and presents `routing_id` to peers."""
    _mailboxes[address] = None if routing_id is None else routing_id.hex()


def forget_mailbox(address: str) -> None:
    _mailboxes.pop(address, None)


def endpoints() -> Dict[str, list]:
    """Where this process's actors listen, and the identities they present: what lets a
    trace tell which process a recorder entry's peer is."""
    mailboxes = dict(_mailboxes)
    return {"mailboxes": sorted(mailboxes),
            "identities": sorted(i for i in mailboxes.values() if i is not None)}


def add_section(name: str, provider: Callable[[], Any]) -> None:
    """Answer STATUS with ``provider()`` under `name` (replacing an earlier one)."""
    _sections[name] = provider


def remove_section(name: str, provider: Optional[Callable[[], Any]] = None) -> None:
    """Stop answering `name` (only if it is still `provider`, when given)."""
    if provider is None or _sections.get(name) == provider:
        _sections.pop(name, None)


def rss_bytes() -> int:
    """The resident set size now (Linux), else the peak."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def traffic_table(traffic: Traffic) -> Dict[str, Dict[str, int]]:
    """The counts by kind name."""
    return {kind_name(kind): row for kind, row in traffic.by_kind().items()}


def process_status(traffic: Traffic = TRAFFIC) -> Dict[str, Any]:
    """This process's STATUS answer (see docs/PROTOCOL.md for its fields)."""
    status: Dict[str, Any] = {
        **identity(), "uptime_s": round(time.monotonic() - _started, 3),
        "started_at": _started_wall, "monotonic_ns": time.monotonic_ns(),
        "rss_bytes": rss_bytes(), "cpu_s": round(time.process_time(), 3),
        "threads": len(sys._current_frames()), "messages": traffic_table(traffic),
        "messages_complete": traffic.complete,
        "recorder": traffic.ring is not None, "introspection": RECORDING, **endpoints(),
    }
    if os.environ.get(ROUND_VARIABLE) is not None:
        status["rendezvous"] = rendezvous()
    for name, provider in list(_sections.items()):
        try:
            status[name] = provider()
        except Exception as error:  # noqa: BLE001 - one broken section must not hide the rest
            status[name] = {"error": f"{type(error).__name__}: {error}"}
    return status


def rendezvous() -> Dict[str, Any]:
    """The elastic rendezvous round this worker was started for, as its launcher told it
    (`ROUND_VARIABLE`, `MEMBERS_VARIABLE` and torchrun's variables)."""
    def number(name: str) -> Optional[int]:
        value = os.environ.get(name, "")
        return int(value) if value.lstrip("-").isdigit() else None

    members = os.environ.get(MEMBERS_VARIABLE, "")
    return {"run_id": os.environ.get("TORCHELASTIC_RUN_ID"), "round": number(ROUND_VARIABLE),
            "restart_count": number("TORCHELASTIC_RESTART_COUNT"),
            "node_rank": number("GROUP_RANK"), "nodes": number("GROUP_WORLD_SIZE"),
            "members": members.split(",") if members else []}


def dump_recorder(reason: str, force: bool = False) -> Optional[str]:
    """Write the flight recorder to a file for `reason` (see `Traffic.dump`)."""
    return TRAFFIC.dump(reason, identity(), extra=endpoints(), force=force)
