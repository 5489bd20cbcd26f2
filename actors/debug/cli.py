"""``python -m actors.debug``: what a running job is doing, from a shell.

Exit status: 0 after printing; 1 when the job's store cannot be reached, or when what
reads the output stopped reading (``| head``); 2 for a usage error (one line and the
usage, no traceback).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable, List, Optional

from store.agreement import ranks_text
from store.base import Store

from . import (collectives, directory, format_chain, format_stack_report, snapshot, stacks,
               trace, trace_files)
from .chains import call_chains
from .diagnosis import OK, Probe, silent_line
from .probe import DEFAULT_TIMEOUT, open_store, parse_store

PROG = "python -m actors.debug"


def store_spec(text: str) -> str:
    """argparse type of ``--store``: ``HOST:PORT`` or ``etcd://HOST:PORT/PREFIX``."""
    try:
        parse_store(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


STORE_HELP = ("the job's store: its MASTER_ADDR:MASTER_PORT, or the store the launcher "
              "prints at start, or etcd://HOST:PORT/PREFIX for a job whose init method is "
              "etcd://")


def nothing_in_view(spec: str) -> str:
    """What the commands say when no process is published in the store at `spec`."""
    return (f"nothing in view at {spec}: no process has joined a job through this store "
            "yet (a process appears once init_rpc or init_process_group has joined it; "
            "kill -USR1 PID writes the stacks of one still joining)")


def positive_seconds(text: str) -> float:
    """argparse type of a duration: seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text!r}")
    return value


def reach_store(spec: str, timeout: float, prog: str) -> Optional[Store]:
    """A client of the job's store at `spec`, or None after one line on stderr saying why
    it cannot be reached (the commands then exit 1)."""
    try:
        return open_store(spec, timeout)
    except Exception as error:  # noqa: BLE001 - one line for the person at the shell
        print(f"{prog}: cannot reach the job's store at {spec}: {error}", file=sys.stderr)
        return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Ask every process of a running job what it is doing, "
        "through the job's store. Each process answers on its I/O thread, even while "
        "its own threads are stuck.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", required=True, type=store_spec, metavar="HOST:PORT",
                        help=f"{STORE_HELP} (required)")
    common.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT,
                        metavar="SECONDS", help="how long to wait for each process's answer; "
                        "a process silent that long is reported hung "
                        f"(default {DEFAULT_TIMEOUT:g})")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands.add_parser("status", parents=[common], prog=f"{PROG} status",
                        help="every process's status as JSON (one object per line)",
                        description="Print every process's STATUS as one JSON object per "
                                    "line.")
    commands.add_parser("calls", parents=[common], prog=f"{PROG} calls",
                        help="RPC calls in flight as chains: w0 → w1 → w2  function  age",
                        description="Print the RPC calls in flight as chains across "
                                    "workers, with the function running at the end and "
                                    "its age, the oldest first.")
    stack = commands.add_parser("stacks", parents=[common], prog=f"{PROG} stacks",
                                help="the Python stacks of every thread",
                                description="Print the Python stack of every thread of "
                                            "every process (or one rank's).")
    stack.add_argument("--rank", type=int, default=None, metavar="N",
                       help="only the process of rank N (default: every process)")
    commands.add_parser("collectives", parents=[common], prog=f"{PROG} collectives",
                        help="the collective in progress and which rank holds it up",
                        description="Print, per process group, the collective in progress, "
                                    "the ranks waiting in it, and why each other rank is "
                                    "not there (not entered, a different call or shape, "
                                    "dead, hung).")
    timeline = commands.add_parser(
        "trace", prog=f"{PROG} trace", help="every process's flight recorder as one "
        "Chrome-trace / Perfetto timeline",
        description="Merge every process's flight recorder into one Chrome-trace JSON "
                    "(open it in https://ui.perfetto.dev or chrome://tracing): a slice per "
                    "call served and per collective, an arrow from each message sent to its "
                    "receipt, clocks aligned by round trips. From a running job (--store) or "
                    "from recorder files written after it failed (FILE ...).")
    timeline.add_argument("files", nargs="*", metavar="FILE",
                          help="flight recorder files (default: ask the job at --store)")
    timeline.add_argument("--store", type=store_spec, default=None, metavar="HOST:PORT",
                          help=f"{STORE_HELP} (default: none; give it or FILEs)")
    timeline.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT,
                          metavar="SECONDS", help="how long to wait for each process's "
                          f"answer; a silent process is left out (default {DEFAULT_TIMEOUT:g})")
    timeline.add_argument("-o", "--output", required=True, metavar="PATH",
                          help="where to write the trace JSON (required)")
    timeline.set_defaults(usage_error=timeline.error)
    return parser


def _write_trace(args: argparse.Namespace) -> int:
    merged = trace_files(args.files) if args.files else trace(args.store, args.timeout)
    with open(args.output, "w") as out:
        json.dump(merged, out)
    flows = sum(1 for event in merged["traceEvents"] if event["ph"] == "s")
    slices = sum(1 for event in merged["traceEvents"] if event["ph"] == "X")
    print(f"wrote {args.output}: {slices} slices, {flows} messages")
    for gone in merged.get("otherData", {}).get("left_out", []):
        print("left out: " + silent_line(Probe(gone["rank"], gone["state"], None,
                                               gone["reason"])))
    return 0


def _calls_report(statuses: List[dict]) -> List[str]:
    """The chains of calls in flight, then a line per process that did not answer and
    one for those that keep no table of calls: a chain may run through them, and their
    own calls are not in view."""
    chains = call_chains([status for status in statuses if status["state"] == OK])
    lines = [format_chain(chain) for chain in chains] or ["no calls in flight"]
    lines += [silent_line(Probe(status.get("rank"), status["state"], None,
                                status.get("reason", "")))
              for status in statuses if status["state"] != OK]
    untracked = [status["rank"] for status in statuses if status["state"] == OK
                 and status.get("introspection") is False and status.get("rank") is not None]
    if untracked:
        lines.append(f"{ranks_text(untracked)}: introspection is off "
                     "(ACTORGRAD_INTROSPECTION=0), their calls are not in view")
    return lines


def run(command: Callable[[], int]) -> int:
    """Run a command's `main` for ``sys.exit``; a reader that stops reading early
    (``| head``) ends it with status 1 and no traceback, as it ends other commands."""
    try:
        status = command()
        sys.stdout.flush()  # here, where a closed pipe can still be caught
        return status
    except BrokenPipeError:
        # What is left in stdout's buffer must not fail again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "trace":
        if bool(args.files) == (args.store is not None):
            args.usage_error("give either --store HOST:PORT or recorder FILEs, not both")
        try:
            return _write_trace(args)
        except (OSError, ValueError) as error:  # a file unreadable, or not a recorder
            print(f"{PROG} trace: {error}", file=sys.stderr)
            return 1
    store = reach_store(args.store, args.timeout, PROG)
    if store is None:
        return 1
    try:
        if not directory.entries(store):
            # else "no calls in flight" or "no collective in progress" would read as all well
            print(nothing_in_view(args.store))
        elif args.command == "status":
            for status in snapshot(store, args.timeout):
                print(json.dumps(status, sort_keys=True))
        elif args.command == "calls":
            print("\n".join(_calls_report(snapshot(store, args.timeout))))
        elif args.command == "stacks":
            answers = stacks(store, args.rank, args.timeout)
            print("\n\n".join(format_stack_report(a) for a in answers) if answers
                  else "no process found")
        else:
            print("\n".join(collectives(store, args.timeout)))
    finally:
        store.close()
    return 0
