"""`Traffic`: counts of messages and bytes by kind, and the flight recorder.

Every message an actor sends or receives, and every collective, is recorded by
whichever thread moves it with `Traffic.record`: one tuple and one C call, no Python
frame, no lock, no formatting. `Traffic.fold` takes the queued entries in one batch,
counts them by kind and moves them to the flight recorder, a ring
(`collections.deque` with a ``maxlen``) of the last entries; each actor's I/O thread
folds every `FOLD_INTERVAL` seconds, and every reader (STATUS, a dump) folds first.
The ring is formatted only when dumped, to a file, on a failure worth explaining (a
lost rank, a collective timeout or mismatch, an RPC timeout) or on SIGUSR1; the
failing thread copies it and goes on, the file is written by `dumps.WRITER`.

Entries are ``(t_ns, event, peer, kind, ident, sent, received, what, since)``:
`t_ns` from `time.monotonic_ns`; `event` one of `EVENTS`; `peer` an address or a
sender's identity; `kind` a message kind or a collective's name; `ident` a request id
or a collective's sequence number; `sent` and `received` the bytes this process sent
and received; `what` the function a request calls, a collective's error, or None.
A request and its reply make one entry on each side, written when the reply passes
(`CALLED` on the caller, `SERVED` on the server), and a collective one entry when it
ends (`OP`); `since` is then the `time.monotonic` seconds of the request or the
collective's start (None: not known). A one-way message, a request that ends without
a reply and a reply whose request is gone are entries of their own. So the ring holds
up to twice its length in messages. What has started and not ended (a request in
flight, a blocking call waiting, a call being served, a collective running) is asked
of the objects that know it, the `watch`ed sources, whenever the entries are read.
`format_entries` turns an entry back into the messages and steps it stands for, each
with its own time.

``ACTORGRAD_INTROSPECTION=0`` turns all of this bookkeeping off (counts, recorder,
the tables of calls waited on and served), for the last percent of speed: each place that records
does so ``if RECORDING``, read once at import, so a message then costs one test;
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
import threading
import time
import weakref
from itertools import repeat, starmap
from operator import itemgetter
from typing import Any, Dict, List, Optional, Tuple

from ..concurrency.weak import members
from ..process.log import get_logger
from ..process.settings import number_setting
from .dumps import WRITER, keep_newest, write_now

log = get_logger(__name__)

SWITCH_VARIABLE = "ACTORGRAD_INTROSPECTION"
ENABLED_VARIABLE = "ACTORGRAD_FLIGHT_RECORDER"
SIZE_VARIABLE = "ACTORGRAD_FLIGHT_RECORDER_SIZE"
DIR_VARIABLE = "ACTORGRAD_LOG_DIR"
DEFAULT_SIZE = 4096
# The files kept in the shared temporary folder, the newest (a folder of one's own,
# DIR_VARIABLE, keeps all): processes that time out again and again, or many short
# jobs, would fill it otherwise.
KEPT_IN_TEMP = 200
# Seconds between an I/O thread's folds; the queue holds at most QUEUE_LIMIT entries
# (more than any process moves in that time), so memory stays bounded even where no
# actor folds.
FOLD_INTERVAL = 0.25
QUEUE_LIMIT = 32768
# One dump per reason at most this often (seconds): a hundred timeouts, one file.
_DUMP_INTERVAL = 10.0

# The events `format_entries` writes; all but REPLIED and OP_END are entries too.
SENT, RECEIVED, REPLIED, ANSWERED = "send", "recv", "send_reply", "recv_reply"
OP_START, OP_END = "op_start", "op_end"
# Entries of a whole exchange: (opening, closing) events each stands for.
CALLED, SERVED, OP = "call", "serve", "op"
HALVES = {CALLED: (SENT, ANSWERED), SERVED: (RECEIVED, REPLIED), OP: (OP_START, OP_END)}
# What an entry's event may be: an exchange, or one message or step of its own.
EVENTS = (CALLED, SERVED, OP, SENT, RECEIVED, ANSWERED, OP_START)
# Messages out and in that an entry of each event stands for.
_MESSAGES = {SENT: (1, 0), RECEIVED: (0, 1), ANSWERED: (0, 1), CALLED: (1, 1),
             SERVED: (1, 1)}

Entry = Tuple[int, str, Any, Any, int, int, int, Any, Optional[float]]


def enabled() -> bool:
    """Whether this process keeps counts, a recorder and tables of calls (the default)."""
    return os.environ.get(SWITCH_VARIABLE, "1") != "0"


def _ignore(*_args: Any) -> None:
    """What counting and recording are when introspection is off."""


def _size() -> int:
    if os.environ.get(ENABLED_VARIABLE, "1") == "0":
        return 0
    return number_setting(SIZE_VARIABLE, DEFAULT_SIZE, int, lambda size: size >= 0,
                          "a whole number of entries, 0 or more")


class Traffic:
    """This process's message counts and flight recorder (`size` entries; 0: no recorder;
    `counting` False: neither counts nor recorder)."""

    def __init__(self, size: int, counting: bool = True):
        self._counts = Counts()
        self.ring: Optional["collections.deque[Entry]"] = \
            collections.deque(maxlen=size) if size and counting else None
        self._queue: "collections.deque[Entry]" = collections.deque(maxlen=QUEUE_LIMIT)
        self.record = self._queue.append if counting else _ignore
        """Append one `Entry` (any thread): all that a message costs on its path."""
        self.counting = counting
        self.complete = True  # False once the queue overflowed: counts missed entries
        self._folding = threading.RLock()  # a SIGUSR1 dump may interrupt a fold
        self._dumped: Dict[str, float] = {}
        self._sources: "weakref.WeakSet[Any]" = weakref.WeakSet()

    def watch(self, source: Any) -> None:
        """Read `source.open_entries()` (entries of what has started and not ended) with
        the ring and the counts from now on, for as long as `source` lives."""
        if self.counting:
            self._sources.add(source)

    def _open_entries(self) -> List[Entry]:
        return [entry for source in members(self._sources) for entry in source.open_entries()]

    def fold(self) -> None:
        """Count the entries recorded since the last fold and move them to the ring."""
        with self._folding:
            queue = self._queue
            waiting = len(queue)
            if waiting == queue.maxlen:
                self.complete = False
            batch = list(starmap(queue.popleft, repeat((), waiting)))
            self._counts.add(batch)
            if self.ring is not None:
                self.ring.extend(batch)

    def by_kind(self) -> Dict[int, Dict[str, int]]:
        """Messages and bytes in and out per kind (of what is still open too)."""
        with self._folding:
            self.fold()
            counts = self._counts.copy()
        counts.add(self._open_entries())
        table: Dict[int, Dict[str, int]] = {}
        for (event, kind), (entries, sent, received) in counts.items():
            if event not in _MESSAGES:
                continue
            out, into = _MESSAGES[event]
            row = table.setdefault(kind, dict.fromkeys(
                ("msgs_in", "bytes_in", "msgs_out", "bytes_out"), 0))
            row["msgs_out"] += out * entries
            row["bytes_out"] += sent
            row["msgs_in"] += into * entries
            row["bytes_in"] += received
        return table

    def entries(self) -> List[Entry]:
        """The recorder's entries in the order they were written, then those of what is
        still open (a copy; empty when the recorder is off)."""
        if self.ring is None:
            return []
        with self._folding:
            self.fold()
            written = list(self.ring)
        return written + self._open_entries()

    def dump(self, reason: str, identity: Dict[str, Any], extra: Optional[dict] = None,
             force: bool = False, even_without_recorder: bool = False,
             here: bool = False) -> Optional[str]:
        """Have the recorder (and `extra`) written to a file, named in a WARNING line once
        written; the file's path, or None when the recorder is off (unless
        `even_without_recorder`, for `extra`'s sake) or this reason was dumped moments
        ago (unless `force`). The entries are copied here and the file written on the
        `dumps` thread, so a failure is reported without waiting for its dump; `here`
        writes it on this thread before returning (a signal handler, which must not
        take the locks that starting a thread takes)."""
        if self.ring is None and not even_without_recorder:
            return None
        now = time.monotonic()
        if not force and now - self._dumped.get(reason, -_DUMP_INTERVAL) < _DUMP_INTERVAL:
            return None
        self._dumped[reason] = now
        try:
            path = _dump_path(identity)
        except OSError as error:
            log.warning("flight_recorder_not_written", reason=reason, error=str(error))
            return None
        entries = self.entries()
        in_temp = not os.environ.get(DIR_VARIABLE)

        def write(to: str) -> None:
            if in_temp:
                keep_newest(os.path.dirname(to), KEPT_IN_TEMP - 1)
            _write_json(to, recording(reason, identity, entries, extra))

        if here:
            write_now(path, reason, write)
        else:
            WRITER.submit(path, reason, write)
        return path


def _write_json(path: str, data: Any) -> None:
    """Write `data` to `path` whole: whoever looks sees a whole file or none."""
    text = json.dumps(data)
    with open(path + ".part", "w") as out:
        out.write(text)
    os.replace(path + ".part", path)


class Counts:
    """Entries, bytes sent and bytes received per (event, kind), added a batch at a time
    (`add`): the entries are counted by C code, and a batch of one (event, kind) (what a
    process that only calls, or only serves, records) is summed by C code too."""

    def __init__(self) -> None:
        self.entries: "collections.Counter[Tuple[str, Any]]" = collections.Counter()
        self.sent: "collections.Counter[Tuple[str, Any]]" = collections.Counter()
        self.received: "collections.Counter[Tuple[str, Any]]" = collections.Counter()

    def add(self, batch: List[Entry]) -> None:
        """Count the entries of `batch`."""
        keys = list(map(_KEY, batch))
        if not keys:
            return
        self.entries.update(keys)
        if keys.count(keys[0]) == len(keys):
            self.sent[keys[0]] += sum(map(_SENT, batch))
            self.received[keys[0]] += sum(map(_RECEIVED, batch))
            return
        sent, received = self.sent, self.received
        for key, out, into in zip(keys, map(_SENT, batch), map(_RECEIVED, batch)):
            if out:
                sent[key] += out
            if into:
                received[key] += into

    def copy(self) -> "Counts":
        """Counts of their own with the same figures (for a reader to add to)."""
        counts = Counts()
        counts.entries, counts.sent, counts.received = \
            self.entries.copy(), self.sent.copy(), self.received.copy()
        return counts

    def items(self) -> List[Tuple[Tuple[str, Any], Tuple[int, int, int]]]:
        """((event, kind), (entries, bytes sent, bytes received)) for each key counted."""
        return [(key, (entries, self.sent[key], self.received[key]))
                for key, entries in self.entries.items()]


_KEY, _SENT, _RECEIVED = itemgetter(1, 3), itemgetter(5), itemgetter(6)


def recording(reason: str, identity: Dict[str, Any], entries: List[Entry],
              extra: Optional[dict] = None) -> Dict[str, Any]:
    """A recorder's contents as JSON-ready data: who, why, both clocks now, and the
    messages and steps of the entries, oldest first."""
    events = [event for entry in entries for event in format_entries(entry)]
    events.sort(key=lambda event: event["t_ns"])
    return {"reason": reason, **identity, "monotonic_ns": time.monotonic_ns(),
            "time_ns": time.time_ns(), "entries": events, **(extra or {})}


def format_entries(entry: Entry) -> List[Dict[str, Any]]:
    """The messages or steps one recorder entry stands for, as JSON-ready data: one for
    an entry of one event, the opening and the closing one for an exchange (`HALVES`),
    each ``{"t_ns", "event", "peer", "kind", "id", "size", "what"}``."""
    from ..protocol import kind_name

    t_ns, event, peer, kind, ident, sent, received, what, since = entry
    common = {"peer": peer.hex() if isinstance(peer, bytes) else peer,
              "kind": kind_name(kind) if isinstance(kind, int) else kind, "id": ident}
    halves = HALVES.get(event)
    if halves is None:
        return [{"t_ns": t_ns, "event": event, **common, "size": sent + received,
                 "what": describe_callable(what)}]
    opening, closing = halves
    # the bytes of the first message and of the second: the server's first is received
    first, second = (received, sent) if event == SERVED else (sent, received)
    # a request says what it calls; a collective's end says how it ended
    named = describe_callable(what)
    opening_what, closing_what = (None, named) if event == OP else (named, None)
    written = [] if since is None else [{"t_ns": round(since * 1e9), "event": opening,
                                          **common, "size": first, "what": opening_what}]
    written.append({"t_ns": t_ns, "event": closing, **common, "size": second,
                    "what": closing_what})
    return written


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


RECORDING = enabled()
TRAFFIC = Traffic(_size(), RECORDING)
record = TRAFFIC.record
