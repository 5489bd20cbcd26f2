"""Rendezvous settings and node identity: plain, validated values, no behaviour.

Defaults are torch's: join 600 s, last call 30 s, close 30 s, heartbeat 5 s,
keep-alive every 5 s, a node declared dead after 3 missed keep-alives.
"""
from __future__ import annotations

import itertools
import os
import socket
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple, Optional, Union

Seconds = Union[float, int, timedelta]


def to_positive_seconds(value: Seconds, name: str) -> float:
    """Float seconds from seconds or a timedelta; a clear error unless strictly positive."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be seconds (float) or a timedelta, "
                        f"got {type(value).__name__}")
    else:
        seconds = float(value)
    if not seconds > 0:
        raise ValueError(f"{name} must be positive, got {seconds:g}s")
    return seconds


class RendezvousTimeout:
    """The rendezvous timeouts, in seconds (each given as seconds or a timedelta).

    join: how long `next_rendezvous` may take; last_call: how long a round that has
    reached `min_nodes` stays open for more; close: how long `set_closed` may take;
    heartbeat: how long one keep-alive may take.
    """

    __slots__ = ("join", "last_call", "close", "heartbeat")

    def __init__(self, join: Optional[Seconds] = 600, last_call: Optional[Seconds] = 30,
                 close: Optional[Seconds] = 30, heartbeat: Optional[Seconds] = 5):
        self.join = to_positive_seconds(600 if join is None else join, "join timeout")
        self.last_call = to_positive_seconds(30 if last_call is None else last_call,
                                             "last_call timeout")
        self.close = to_positive_seconds(30 if close is None else close, "close timeout")
        self.heartbeat = to_positive_seconds(5 if heartbeat is None else heartbeat,
                                             "heartbeat timeout")

    def __repr__(self) -> str:
        return (f"RendezvousTimeout(join={self.join:g}, last_call={self.last_call:g}, "
                f"close={self.close:g}, heartbeat={self.heartbeat:g})")


@dataclass(frozen=True)
class RendezvousSettings:
    """Everything the operators and the executor need to know about one rendezvous."""

    run_id: str
    min_nodes: int
    max_nodes: int
    timeout: RendezvousTimeout
    keep_alive_interval: float
    keep_alive_max_attempt: int

    def __post_init__(self) -> None:
        if not isinstance(self.run_id, str) or not self.run_id:
            raise ValueError(f"run_id must be a non-empty str, got {self.run_id!r}")
        for name in ("min_nodes", "max_nodes", "keep_alive_max_attempt"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be int, got {type(value).__name__}")
        if self.min_nodes < 1:
            raise ValueError(f"min_nodes must be at least 1, got {self.min_nodes}")
        if self.max_nodes < self.min_nodes:
            raise ValueError(f"max_nodes ({self.max_nodes}) must be at least "
                             f"min_nodes ({self.min_nodes})")
        if self.keep_alive_max_attempt < 1:
            raise ValueError("keep_alive_max_attempt must be at least 1, "
                             f"got {self.keep_alive_max_attempt}")
        if not isinstance(self.timeout, RendezvousTimeout):
            raise TypeError(f"timeout must be a RendezvousTimeout, "
                            f"got {type(self.timeout).__name__}")
        object.__setattr__(self, "keep_alive_interval",
                           to_positive_seconds(self.keep_alive_interval, "keep_alive_interval"))

    @property
    def dead_after(self) -> float:
        """Seconds without a keep-alive after which a node counts as dead."""
        return self.keep_alive_interval * self.keep_alive_max_attempt


class NodeDesc(NamedTuple):
    """One rendezvous participant: a handler instance in a process on a host.

    Tuples order by (host, pid, local_id): ranks are given in that order.
    """

    host: str
    pid: int
    local_id: int

    def __str__(self) -> str:
        return f"{self.host}_{self.pid}_{self.local_id}"


_local_ids = itertools.count()
_local_ids_lock = threading.Lock()


def new_node_desc(host: Optional[str] = None) -> NodeDesc:
    """A NodeDesc unique to this call: this host, this process, the next local id."""
    with _local_ids_lock:
        local_id = next(_local_ids)
    return NodeDesc(host or socket.gethostname(), os.getpid(), local_id)
