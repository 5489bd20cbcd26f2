"""A job of real processes for the debugging tests: a store, three ranks, a release file."""
from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import subprocess
import sys
from typing import Dict, Iterator, List

from tests.net import free_port
from tests.subprocesses import ROOT
from tests.waiting import wait_until

SCRIPT = str(pathlib.Path(__file__).with_name("job.py"))


class Job:
    """The running ranks, the store's ``HOST:PORT`` (rank 0 hosts it), and their logs."""

    def __init__(self, port: int, procs: List[subprocess.Popen], logs: List[pathlib.Path],
                 release: pathlib.Path):
        self.procs, self.logs, self.release = procs, logs, release
        self.spec = f"127.0.0.1:{port}"

    def log(self, rank: int) -> str:
        return self.logs[rank].read_text()


@contextlib.contextmanager
def job(scenario: str, tmp_path: pathlib.Path, world_size: int = 3,
        env: Dict[str, str] = None) -> Iterator[Job]:
    """Run `scenario` of job.py on `world_size` ranks; released, reaped and killed after."""
    port = free_port()
    release = tmp_path / "release"
    procs: List[subprocess.Popen] = []
    logs: List[pathlib.Path] = []
    try:
        for rank in range(world_size):
            logs.append(tmp_path / f"rank{rank}.log")
            child_env = {**os.environ, "MASTER_ADDR": "127.0.0.1",
                         "MASTER_PORT": str(port), "RANK": str(rank),
                         "WORLD_SIZE": str(world_size), "PYTHONPATH": str(ROOT),
                         "ACTORGRAD_LOG_DIR": str(tmp_path / "flight"), **(env or {})}
            with open(logs[-1], "w") as out:
                procs.append(subprocess.Popen([sys.executable, SCRIPT, scenario, str(release)],
                                              cwd=ROOT, env=child_env, stdout=out,
                                              stderr=subprocess.STDOUT))
        # Every question the tests ask goes through the store, whose client gives up
        # after a few seconds: a loaded host may take longer to start rank 0's.
        if "JOB_INIT_METHOD" not in (env or {}):
            assert wait_until(lambda: _listening(port), 60, 0.1), \
                [p.read_text() for p in logs]
        yield Job(port, procs, logs, release)
    finally:
        release.touch()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                pass
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
        return True
    except OSError:
        return False
