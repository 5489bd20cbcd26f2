"""Merging the flight recorders of a job into one Chrome-trace / Perfetto timeline.

Pure: takes recordings (a recorder's JSON as `RECORDER` answers it or a dump file
holds it, plus ``offset_ns``: what to subtract from its clock to reach the common
one) and returns the trace. Each process is a track. A call is a slice on its
caller's track from the request sent to its reply, named by the function it calls,
and a slice on the callee's track from the request received to the reply sent; a
collective is a slice from ``op_start`` to ``op_end``; each message sent gets an
arrow to its receipt.

The format allows only slices that nest on one thread track (Perfetto drops the
others), and calls made or served at once overlap: a process's slices are laid on as
few thread tracks ("lanes") as keep each track nested (`lanes`), and each arrow
starts and ends on the lane of its message's slice.

Which process a peer is: an address is a process's mailbox (``mailboxes``); an
identity is one its actors present (``identities``), else the process that most often
sent the same request to the receiver just before it arrived from that identity (a
thread's own connection has an identity ZeroMQ makes up, which only its receiver
knows). A send and its receipt then share (sender, receiver, kind, id, size) and are
paired in order, only when both recorders hold as many of them (one-way messages all
have id 0), since a recorder that dropped its oldest entries would shift every pair.

Clocks: ``offset_ns = remote - (t_send + t_recv) / 2`` from a round trip to the
live process (`clock_offset`), or, from files, the wall clock noted beside the
monotonic one when the file was written. Such an offset is known only within
``offset_error_ns`` (half the round trip); within that margin, and only there, each
process's clock is then moved so that what it received comes after it was sent
(`causal_shifts`), as trace viewers correct clock skew.
"""
from __future__ import annotations

from bisect import bisect_right
from collections import Counter, defaultdict
from typing import Any, Dict, List, Optional, Sequence, Tuple

Key = Tuple[int, int, str, int, int, bool]  # sender, receiver, kind, id, size, a reply?
_SENDS = {"send": False, "send_reply": True}
_RECEIPTS = {"recv": False, "recv_reply": True}
# event that opens a slice -> event that closes it (for the same peer and id)
_OPENS = {"send": "recv_reply", "recv": "send_reply", "op_start": "op_end"}
_CLOSES = frozenset(_OPENS.values())
# the longest a request is taken to spend between its send and its receipt
_TRANSIT_NS = 1_000_000_000


def clock_offset(t_send_ns: int, remote_ns: int, t_recv_ns: int) -> int:
    """The remote clock minus ours, by a round trip: it read `remote_ns` half-way."""
    return remote_ns - (t_send_ns + t_recv_ns) // 2


def file_offset(recording: Dict[str, Any]) -> int:
    """For a recorder file: its monotonic clock minus the wall clock (common to hosts)."""
    return recording["monotonic_ns"] - recording["time_ns"]


def merge(recordings: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The Chrome-trace JSON (``{"traceEvents": [...]}``) of `recordings`."""
    events: List[Dict[str, Any]] = []
    by_address, by_identity = {}, {}
    for pid, rec in enumerate(recordings):
        for address in rec.get("mailboxes", []):
            by_address[address] = pid
        for identity in rec.get("identities", []):
            by_identity[identity] = pid
        label = f"rank {rec.get('rank')} {rec.get('name') or ''} (pid {rec.get('pid')})"
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": label.replace("  ", " ")}})
    sends: Dict[Key, List[float]] = defaultdict(list)
    receipts: Dict[Key, List[float]] = defaultdict(list)
    slices: List[Tuple[Dict[str, Any], float]] = []  # each slice and its end (µs)
    guessed = _guess_identities(recordings, by_address, by_identity)
    for pid, rec in enumerate(recordings):
        offset = rec.get("offset_ns", 0)
        # (closing event, peer, id) -> (start, opening entry), oldest first: a thread's own
        # connection numbers its requests apart from its actor's, so ids may repeat
        open_slices: Dict[tuple, List[Tuple[float, Dict[str, Any]]]] = defaultdict(list)
        last = None
        for entry in rec["entries"]:
            ts = (entry["t_ns"] - offset) / 1000.0  # µs
            last = ts
            event, peer = entry["event"], entry["peer"]
            if event in _SENDS:
                other = by_address.get(peer, by_identity.get(peer, guessed.get((pid, peer))))
                if other is not None:
                    sends[(pid, other, entry["kind"], entry["id"], entry["size"],
                           _SENDS[event])].append(ts)
            elif event in _RECEIPTS:
                other = by_address.get(peer, by_identity.get(peer, guessed.get((pid, peer))))
                if other is not None:
                    receipts[(other, pid, entry["kind"], entry["id"], entry["size"],
                              _RECEIPTS[event])].append(ts)
            if event in _OPENS and (entry["id"] or event == "op_start"):  # not one-way
                open_slices[(_OPENS[event], entry["peer"], entry["id"])].append((ts, entry))
            elif event in _CLOSES:
                opened = open_slices.get((event, entry["peer"], entry["id"]))
                if opened:
                    start, opening = opened.pop(0)
                    slices.append((_slice(pid, start, ts, opening, entry), ts))
        # What still runs, runs until the recording was taken (not its last entry).
        taken = last if "monotonic_ns" not in rec else (rec["monotonic_ns"] - offset) / 1000.0
        for start, entry in (opened for started in open_slices.values() for opened in started):
            if entry["event"] == "op_start" or entry["event"] == "send" and entry.get("what"):
                end = max(start, taken or start)
                slices.append(({"ph": "X", "pid": pid, "tid": 0, "ts": start,
                                "dur": end - start, "name": f"{_name(entry)} (running)",
                                "cat": "running"}, end))
    events.extend(lanes(slices, len(recordings)))
    flows, gaps = _flows(sends, receipts)
    events.extend(_on_lanes(flows, slices))
    margins = [rec.get("offset_error_ns", 0) / 1000.0 for rec in recordings]
    shifts = causal_shifts(len(recordings), gaps, margins)
    for event in events:
        if "ts" in event:
            shift = shifts[event["pid"]]
            start = round(event["ts"] - shift, 3)
            if "dur" in event:
                # Rounded as the arrows at its end are, so that they stay inside it.
                event["dur"] = round(event["ts"] + event["dur"] - shift, 3) - start
            event["ts"] = start
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def lanes(slices: Sequence[Tuple[Dict[str, Any], float]], count: int
          ) -> List[Dict[str, Any]]:
    """Give each slice (with its end) the first thread track of its process where it
    nests (it ends before the track's open slice does, or nothing is open there); returns
    the slices and, for each process with more than one, its tracks' names."""
    open_ends: Dict[int, List[List[float]]] = defaultdict(list)  # pid -> lane -> ends
    for event, end in sorted(slices, key=lambda pair: (pair[0]["ts"], -pair[1])):
        stacks = open_ends[event["pid"]]
        for stack in stacks:
            while stack and stack[-1] <= event["ts"]:  # ended before this one starts
                stack.pop()
        lane = next((lane for lane, stack in enumerate(stacks)
                     if not stack or end <= stack[-1]), len(stacks))
        if lane == len(stacks):
            stacks.append([])
        stacks[lane].append(end)
        event["tid"] = lane
    names = [{"ph": "M", "name": "thread_name", "pid": pid, "tid": lane,
              "args": {"name": "calls" if lane == 0 else f"calls at once {lane}"}}
             for pid in range(count) if len(open_ends[pid]) > 1
             for lane in range(len(open_ends[pid]))]
    return names + [event for event, _ in slices]


def _on_lanes(flows: List[Dict[str, Any]], slices: Sequence[Tuple[Dict[str, Any], float]]
              ) -> List[Dict[str, Any]]:
    """Put each arrow's end on the lane of the slice its message starts or ends (a call,
    a reply), else of the latest one around it (a collective's data); an end that no
    slice holds (data that came before its collective began) binds to the next slice."""
    edges: Dict[Tuple[int, float], int] = {}
    spans: Dict[int, List[Tuple[float, float, int]]] = defaultdict(list)
    for event, _ in slices:
        end = event["ts"] + event["dur"]  # where it is drawn to (no less than its start)
        edges.setdefault((event["pid"], event["ts"]), event["tid"])
        edges.setdefault((event["pid"], end), event["tid"])
        spans[event["pid"]].append((event["ts"], end, event["tid"]))
    for held in spans.values():
        held.sort()
    for flow in flows:
        lane = edges.get((flow["pid"], flow["ts"]))
        if lane is None:
            lane = _around(spans[flow["pid"]], flow["ts"])
        if lane is None:
            flow.pop("bp", None)
        flow["tid"] = lane or 0
    return flows


def _around(spans: List[Tuple[float, float, int]], ts: float) -> Optional[int]:
    """The lane of the latest-starting of `spans` (sorted) that holds `ts`, if any."""
    for index in range(bisect_right(spans, (ts, float("inf"), 0)) - 1, -1, -1):
        if spans[index][1] >= ts:
            return spans[index][2]
    return None


def causal_shifts(count: int, gaps: Dict[Tuple[int, int], float], margins: Sequence[float]
                  ) -> List[float]:
    """µs to subtract from each process's times so that every receipt follows its send.

    `gaps[(p, q)]` is the smallest receipt-minus-send time of p's messages to q; a
    process's shift stays within its `margins` of the others' (its clock's uncertainty),
    chosen nearest to no shift, process by process from the first one each is linked to.
    """
    shifts: List[Optional[float]] = [None] * count
    for root in range(count):
        if shifts[root] is not None:
            continue
        shifts[root] = 0.0
        queue = [root]
        while queue:
            p = queue.pop(0)
            for q in range(count):
                if shifts[q] is not None or ((p, q) not in gaps and (q, p) not in gaps):
                    continue
                # corrected gap p→q: gap - shift_q + shift_p >= 0, so shift_q <= gap + shift_p;
                # and q→p: gap + shift_q - shift_p >= 0, so shift_q >= shift_p - gap
                high = gaps.get((p, q), float("inf")) + shifts[p]
                low = shifts[p] - gaps.get((q, p), float("inf"))
                margin = margins[p] + margins[q]
                low, high = max(low, shifts[p] - margin), min(high, shifts[p] + margin)
                shifts[q] = shifts[p] if low > high else min(max(shifts[p], low), high)
                queue.append(q)
    return [shift or 0.0 for shift in shifts]


def _name(opening: Dict[str, Any]) -> str:
    """What a slice is called, from the entry that opened it."""
    if opening["event"] == "op_start":
        return f"{opening['kind']} #{opening['id']}"
    if opening["event"] == "send":
        return str(opening.get("what") or opening["kind"])
    return f"serve {opening['kind']}"


def _slice(pid: int, start: float, end: float, opening: Dict[str, Any],
           closing: Dict[str, Any]) -> Dict[str, Any]:
    if opening["event"] == "op_start":
        category, args = "collective", {"group": opening["peer"], "error": closing.get("what")}
    else:
        category, args = "rpc", {"peer": opening["peer"], "id": opening["id"]}
    return {"ph": "X", "pid": pid, "tid": 0, "ts": start, "dur": max(0.0, end - start),
            "name": _name(opening), "cat": category, "args": args}


def _guess_identities(recordings: Sequence[Dict[str, Any]], by_address: Dict[str, int],
                      by_identity: Dict[str, int]) -> Dict[Tuple[int, str], int]:
    """(receiver, identity) → the process that most often sent, last before a request
    received from that identity, a request to that receiver with the same kind, id and
    size. Senders' ids and sizes often coincide (every store client numbers its requests
    from 1); their times tell them apart."""
    sent: Dict[Tuple[int, tuple], List[Tuple[int, int]]] = defaultdict(list)
    for pid, rec in enumerate(recordings):
        offset = rec.get("offset_ns", 0)
        for entry in rec["entries"]:
            if entry["event"] == "send" and entry["id"] and entry["peer"] in by_address:
                sent[(by_address[entry["peer"]], _request(entry))].append(
                    (entry["t_ns"] - offset, pid))
    for candidates in sent.values():
        candidates.sort()
    votes: Dict[Tuple[int, str], Counter] = defaultdict(Counter)
    for pid, rec in enumerate(recordings):
        offset = rec.get("offset_ns", 0)
        for entry in rec["entries"]:
            peer = entry["peer"]
            if entry["event"] != "recv" or not entry["id"] or peer in by_address \
                    or peer in by_identity:
                continue
            candidates = sent.get((pid, _request(entry)), ())
            received = entry["t_ns"] - offset
            last = bisect_right(candidates, (received, len(recordings))) - 1
            if last >= 0 and received - candidates[last][0] <= _TRANSIT_NS:
                votes[(pid, peer)][candidates[last][1]] += 1
    return {receiver: counted.most_common(1)[0][0] for receiver, counted in votes.items()}


def _request(entry: Dict[str, Any]) -> Tuple[str, int, int]:
    return entry["kind"], entry["id"], entry["size"]


def _flows(sends: Dict[Key, List[float]], receipts: Dict[Key, List[float]]
           ) -> Tuple[List[Dict[str, Any]], Dict[Tuple[int, int], float]]:
    """The arrows, and the smallest receipt-minus-send time between each two processes."""
    events, flow = [], 0
    gaps: Dict[Tuple[int, int], float] = {}
    for key, sent in sends.items():
        received = receipts.get(key)
        if not received or len(sent) != len(received):
            continue  # a recorder dropped some: pairing in order would shift them all
        for t_send, t_recv in zip(sorted(sent), sorted(received)):
            flow += 1
            pair = (key[0], key[1])
            gaps[pair] = min(gaps.get(pair, float("inf")), t_recv - t_send)
            name = str(key[2])
            events.append({"ph": "s", "id": flow, "pid": key[0], "tid": 0, "ts": t_send,
                           "name": name, "cat": "message"})
            events.append({"ph": "f", "bp": "e", "id": flow, "pid": key[1], "tid": 0,
                           "ts": t_recv, "name": name, "cat": "message"})
    return events, gaps
