"""`Traffic`: counts of messages and bytes by kind, and the flight recorder.

Every message an actor sends or receives is counted here, from whichever thread
moves it: plain integer increments, no lock (two threads counting the same kind at
the same instant may lose one increment, which a debugging view tolerates). The
flight recorder is a ring (`collections.deque` with a ``maxlen``) of the last
messages and collective steps as tuples, appended without formatting; it is
formatted only when dumped, to a file, on a failure worth explaining (a lost rank,
a collective timeout or mismatch, an RPC timeout) or on SIGUSR1.

Entries are ``(t_ns, event, peer, kind, ident, size, what)``: `t_ns` from
`time.monotonic_ns`; `event` one of `EVENTS`; `peer` an address or a sender's
identity; `kind` a message kind or a collective's name; `ident` a request id or a
collective's sequence number; `what` a function or a group, or None.

``ACTORGRAD_INTROSPECTION=0`` turns all of this bookkeeping off (counts, recorder,
the RPC layer's call tables), for the last percent of speed;
``ACTORGRAD_FLIGHT_RECORDER=0`` turns the recorder alone off (the counts stay);
``ACTORGRAD_FLIGHT_RECORDER_SIZE`` sets its length (default 4096). Dumps go to
``ACTORGRAD_LOG_DIR`` (the launcher sets it to its run folder), else to a folder
under the system's temporary directory; the log line names the file.
"""
from __future__ import annotations

import collections
import json
import os
import socket
import tempfile
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..process.log import get_logger

log = get_logger(__name__)

SWITCH_VARIABLE = "ACTORGRAD_INTROSPECTION"
ENABLED_VARIABLE = "ACTORGRAD_FLIGHT_RECORDER"
SIZE_VARIABLE = "ACTORGRAD_FLIGHT_RECORDER_SIZE"
DIR_VARIABLE = "ACTORGRAD_LOG_DIR"
DEFAULT_SIZE = 4096
# One dump per reason at most this often (seconds): a hundred timeouts, one file.
_DUMP_INTERVAL = 10.0

SENT, RECEIVED, REPLIED, ANSWERED = "send", "recv", "send_reply", "recv_reply"
OP_START, OP_END, SERVE_START, SERVE_END = "op_start", "op_end", "serve_start", "serve_end"
EVENTS = (SENT, RECEIVED, REPLIED, ANSWERED, OP_START, OP_END, SERVE_START, SERVE_END)

Entry = Tuple[int, str, Any, Any, int, int, Any]


def enabled() -> bool:
    """Whether this process keeps counts, a recorder and call tables (the default)."""
    return os.environ.get(SWITCH_VARIABLE, "1") != "0"


def _ignore(*_args: Any) -> None:
    """What counting and recording are when introspection is off."""


def _size() -> int:
    if os.environ.get(ENABLED_VARIABLE, "1") == "0":
        return 0
    try:
        return max(0, int(os.environ.get(SIZE_VARIABLE, DEFAULT_SIZE)))
    except ValueError:
        return DEFAULT_SIZE


class Traffic:
    """This process's message counts and flight recorder (`size` entries; 0: no recorder;
    `counting` False: neither counts nor recorder)."""

    def __init__(self, size: int, counting: bool = True):
        # (event, kind) -> [messages, bytes]
        self.counts: Dict[Tuple[str, int], List[int]] = {}
        self.ring: Optional["collections.deque[Entry]"] = \
            collections.deque(maxlen=size) if size and counting else None
        # Appends one `Entry`: the recorder's whole cost on a hot path that has the
        # entry's fields at hand (one C call, no Python frame).
        self.record = self.ring.append if self.ring is not None else _ignore
        self._dumped: Dict[str, float] = {}
        if not counting:
            self.message = self.note = _ignore  # type: ignore[method-assign]

    def message(self, event: str, kind: int, frames: Iterable[Any], peer: Any,
                ident: int) -> None:
        """Count (and record) one message of `kind` to or from `peer`: `event` is SENT,
        REPLIED (a reply sent), RECEIVED or ANSWERED (a reply received)."""
        size = sum(map(len, frames))
        counts = self.counts.get((event, kind))
        if counts is None:
            counts = self.counts.setdefault((event, kind), [0, 0])
        counts[0] += 1
        counts[1] += size
        self.record((time.monotonic_ns(), event, peer, kind, ident, size, None))

    def note(self, event: str, peer: Any, kind: Any, ident: int, size: int, what: Any) -> None:
        """Record a step that is not a message (a collective, a call served)."""
        self.record((time.monotonic_ns(), event, peer, kind, ident, size, what))

    def by_kind(self) -> Dict[int, Dict[str, int]]:
        """Messages and bytes in and out per kind."""
        table: Dict[int, Dict[str, int]] = {}
        for (event, kind), (messages, size) in list(self.counts.items()):
            row = table.setdefault(kind, dict.fromkeys(
                ("msgs_in", "bytes_in", "msgs_out", "bytes_out"), 0))
            way = "in" if event in (RECEIVED, ANSWERED) else "out"
            row[f"msgs_{way}"] += messages
            row[f"bytes_{way}"] += size
        return table

    def entries(self) -> List[Entry]:
        """The recorder's entries, oldest first (a copy; empty when it is off)."""
        ring = self.ring
        if ring is None:
            return []
        while True:
            try:
                return list(ring)
            except RuntimeError:  # appended to meanwhile: copy again
                continue

    def dump(self, reason: str, identity: Dict[str, Any], extra: Optional[dict] = None,
             force: bool = False, even_without_recorder: bool = False) -> Optional[str]:
        """Write the recorder (and `extra`) to a file named in a WARNING line; its path, or
        None when the recorder is off (unless `even_without_recorder`, for `extra`'s
        sake) or this reason was dumped moments ago (unless `force`)."""
        if self.ring is None and not even_without_recorder:
            return None
        now = time.monotonic()
        if not force and now - self._dumped.get(reason, -_DUMP_INTERVAL) < _DUMP_INTERVAL:
            return None
        self._dumped[reason] = now
        try:
            path = _dump_path(identity)
            with open(path + ".part", "w") as out:
                json.dump(recording(reason, identity, self.entries(), extra), out)
            os.replace(path + ".part", path)  # whoever looks sees a whole file or none
        except OSError as error:
            log.warning("flight_recorder_not_written", reason=reason, error=str(error))
            return None
        log.warning("flight_recorder_written", reason=reason, path=path)
        return path


def recording(reason: str, identity: Dict[str, Any], entries: List[Entry],
              extra: Optional[dict] = None) -> Dict[str, Any]:
    """A recorder's contents as JSON-ready data: who, why, both clocks now, the entries."""
    return {"reason": reason, **identity, "monotonic_ns": time.monotonic_ns(),
            "time_ns": time.time_ns(), "entries": [format_entry(e) for e in entries],
            **(extra or {})}


def format_entry(entry: Entry) -> Dict[str, Any]:
    """One recorder entry as JSON-ready data."""
    from ..protocol import kind_name

    t_ns, event, peer, kind, ident, size, what = entry
    return {"t_ns": t_ns, "event": event,
            "peer": peer.hex() if isinstance(peer, bytes) else peer,
            "kind": kind_name(kind) if isinstance(kind, int) else kind,
            "id": ident, "size": size, "what": describe_callable(what)}


def describe_callable(what: Any) -> Any:
    """`module.qualname` for a function, the value itself for plain data."""
    if what is None or isinstance(what, (str, int, float)):
        return what
    name = getattr(what, "__qualname__", None)
    if name is None:
        return repr(what)
    module = getattr(what, "__module__", None)
    return f"{module}.{name}" if module else name


def _dump_path(identity: Dict[str, Any]) -> str:
    folder = os.environ.get(DIR_VARIABLE) or os.path.join(tempfile.gettempdir(),
                                                          "actorgrad-flight")
    os.makedirs(folder, exist_ok=True)
    rank = identity.get("rank")
    who = identity.get("name") or (f"rank{rank}" if rank is not None else f"pid{os.getpid()}")
    stamp = time.strftime("%Y%m%dT%H%M%S")
    return os.path.join(folder, f"flight-{who}-{socket.gethostname()}-{os.getpid()}-"
                                f"{stamp}-{time.monotonic_ns() % 1_000_000}.json")


TRAFFIC = Traffic(_size(), enabled())
