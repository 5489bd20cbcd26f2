"""Run `python -m actors.launch` as a real subprocess and read its output with deadlines."""
from __future__ import annotations

import os
import pathlib
import queue
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Dict, List, Optional

ROOT = pathlib.Path(__file__).resolve().parents[2]
AGENT_TIMEOUT = 60.0


class Agent:
    """One launcher process; its merged output is kept line by line."""

    def __init__(self, args: List[str], cwd: Optional[pathlib.Path] = None,
                 env: Optional[Dict[str, Optional[str]]] = None,
                 command: Optional[List[str]] = None):
        """`env` adds variables (None removes one); `command` replaces python -m actors.launch."""
        merged = dict(os.environ, PYTHONPATH=str(ROOT), ACTORGRAD_LOG_LEVEL="warning")
        for name, value in (env or {}).items():
            merged.pop(name, None) if value is None else merged.__setitem__(name, value)
        env = merged
        command = command or [sys.executable, "-m", "actors.launch"]
        self.proc = subprocess.Popen([*command, *args],
                                     cwd=str(cwd or ROOT), env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: List[str] = []
        self._queue: "queue.Queue[Optional[str]]" = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def _drain(self, timeout: float) -> Optional[str]:
        line = self._queue.get(timeout=timeout)
        if line is not None:
            self.lines.append(line)
        return line

    def wait_for_line(self, text: str, timeout: float = AGENT_TIMEOUT) -> str:
        """The first output line (from now on, or already read) containing `text`."""
        for line in self.lines:
            if text in line:
                return line
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self._drain(max(0.0, remaining)) if remaining > 0 else None
            except queue.Empty:
                line = None
            if line is None:
                raise AssertionError(f"no line with {text!r} within {timeout}s:\n"
                                     + "\n".join(self.lines))
            if text in line:
                return line

    def finish(self, timeout: float = AGENT_TIMEOUT) -> int:
        """Wait for the agent to exit (bounded) and all of its output to be read."""
        code = self.proc.wait(timeout)
        deadline = time.monotonic() + 10
        while True:
            try:
                if self._drain(max(0.0, deadline - time.monotonic())) is None:
                    break
            except queue.Empty:
                break
        return code

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class Watched:
    """A process held by its pidfd from the moment its PID is read, so that a wait or a
    kill reaches that process even if it exits and another one is given its PID."""

    def __init__(self, pid: int):
        self.pid = pid
        try:
            self.fd: Optional[int] = os.pidfd_open(pid)
        except ProcessLookupError:
            self.fd = None  # gone already

    def gone(self, timeout: float) -> bool:
        """True once the process has exited (a zombie counts as exited), within `timeout`."""
        if self.fd is None:
            return True
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        return bool(poller.poll(int(timeout * 1000)))

    def kill(self) -> None:
        """SIGKILL it if it still runs, and let go of the pidfd."""
        if self.fd is None:
            return
        try:
            signal.pidfd_send_signal(self.fd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(self.fd)
        self.fd = None


def script(tmp_path, name, body):
    """Write a worker script (dedented) into `tmp_path`; its path."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def held_script(tmp_path, name, go, before: str, after: str = "") -> str:
    """A worker script that runs the line `before`, waits (at most 60 s) until the file
    `go` exists, the test's signal to go on, then runs the line `after`; its path."""
    path = tmp_path / name
    path.write_text(f"""import os, pathlib, sys, time
{before}
deadline = time.monotonic() + 60
while not pathlib.Path({str(go)!r}).exists() and time.monotonic() < deadline:
    time.sleep(0.05)
{after}
""")
    return str(path)


def launch(agents, *args, env: Optional[Dict[str, Optional[str]]] = None):
    """Start an agent that the `agents` fixture kills at the end of the test."""
    agent = Agent(list(args), env=env)  # cwd: the repository, so examples/ paths work
    agents.append(agent)
    return agent
