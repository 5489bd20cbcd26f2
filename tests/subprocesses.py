"""Command-line programs under test: started as real processes, never left running."""
from __future__ import annotations

import contextlib
import os
import pathlib
import re
import subprocess
import sys
from typing import Dict, Iterator, List, Optional, Set

ROOT = pathlib.Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def running(args: List[str], log_path: Optional[pathlib.Path] = None,
            env: Optional[Dict[str, str]] = None) -> Iterator[subprocess.Popen]:
    """``python *args`` from the repository root, output to `log_path` (logs at info).

    On exit the process is killed if it still runs; every wait is bounded. When the
    body raises (a failed test), the log is printed, so that pytest's report of the
    failure shows what the process said even after its temporary directory is gone.
    """
    env = {**os.environ, "ACTORGRAD_LOG_LEVEL": "info"} if env is None else env
    with contextlib.ExitStack() as stack:
        out = (stack.enter_context(open(log_path, "w")) if log_path is not None
               else subprocess.DEVNULL)
        process = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env,
                                   stdout=out, stderr=out)
        try:
            yield process
        except BaseException:
            if log_path is not None:
                print(f"--- {log_path} ---\n{log_path.read_text(errors='replace')}")
            raise
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)


def logged_events(log_path: pathlib.Path) -> Set[str]:
    """The structlog event names a process wrote to its log."""
    return set(re.findall(r"event='([^']+)'", log_path.read_text()))


def reap(procs: list, grace: float = 5.0) -> None:
    """Join each multiprocessing process for up to `grace` seconds, then kill what is left."""
    for proc in procs:
        proc.join(grace)
        if proc.is_alive():
            proc.kill()
            proc.join(grace)
