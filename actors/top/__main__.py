"""``python -m actors.top --store HOST:PORT``: the live view (see `actors.top`).

Exit status: 0 (Ctrl-C ends the live view); 1 when the job's store cannot be
reached, or goes away (the job ended), or what reads the output stopped reading; 2
for a usage error.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import List, Optional

from rich.console import Console
from rich.live import Live
from rich.table import Table

from actors.debug import snapshot
from actors.debug.cli import (STORE_HELP, nothing_in_view, positive_seconds, reach_store, run,
                              store_spec)
from actors.debug.probe import DEFAULT_TIMEOUT
from actors.top import COLUMNS, WRAPPED, cells, rows, shown_columns
from store.errors import StoreError

PROG = "python -m actors.top"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="A live view of a running job: one row per worker with its "
        "state, message rates, oldest call in flight, distributed-autograd contexts, "
        "collective in progress and whom it waits for, RSS and CPU time.")
    parser.add_argument("--store", required=True, type=store_spec, metavar="HOST:PORT",
                        help=f"{STORE_HELP} (required)")
    parser.add_argument("--interval", type=positive_seconds, default=1.0, metavar="SECONDS",
                        help="time between two frames, over which rates are measured "
                             "(default 1)")
    parser.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT,
                        metavar="SECONDS",
                        help="how long to wait for each process's answer; a process silent "
                             f"that long shows as hung (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--once", action="store_true",
                        help="print one frame and exit (default: refresh until Ctrl-C)")
    parser.add_argument("--json", action="store_true",
                        help="print the rows of one frame as JSON and exit (default: a table)")
    return parser


def table(found: List[dict], spec: str, width: int) -> Table:
    """The frame for a terminal `width` characters wide: a value is never split, and
    the least needed columns are left out when not all fit (`shown_columns`)."""
    view = Table(title=f"actorgrad job at {spec}  ({time.strftime('%H:%M:%S')})",
                 caption=None if found else nothing_in_view(spec))
    texts = [cells(row) for row in found]
    shown = shown_columns(texts, width)
    for column in shown:
        # a function's name folds rather than lose its end to an ellipsis
        view.add_column(column, no_wrap=column not in WRAPPED,
                        overflow="fold" if column in WRAPPED else "ellipsis")
    for text in texts:
        view.add_row(*(text[COLUMNS.index(column)] for column in shown))
    return view


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    store = reach_store(args.store, args.timeout, PROG)
    if store is None:
        return 1
    console = Console()  # its width is the terminal's, read again for each frame
    try:
        before, taken = snapshot(store, args.timeout), time.monotonic()
        if args.once or args.json:
            time.sleep(args.interval)  # a second look, for the rates
            found = rows(before, snapshot(store, args.timeout), time.monotonic() - taken)
            if args.json:
                print(json.dumps(found, indent=2))
            else:
                console.print(table(found, args.store, console.width))
            return 0
        with Live(table(rows([], before, 0), args.store, console.width), console=console,
                  auto_refresh=False) as live:
            while True:
                time.sleep(args.interval)
                now = snapshot(store, args.timeout)
                found = rows(before, now, time.monotonic() - taken)
                before, taken = now, time.monotonic()
                live.update(table(found, args.store, console.width), refresh=True)
    except KeyboardInterrupt:
        return 0
    except StoreError as error:  # the job ended, or the process that hosted its store died
        print(f"{PROG}: the job's store at {args.store} is gone: {error}", file=sys.stderr)
        return 1
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(run(main))
