"""One node's worker processes: start them, forward their output by rank, watch, stop.

Each worker runs in its own process session, so stopping it reaches anything it
started; on Linux it also gets SIGKILL if the agent dies without stopping it. Its
stdout and stderr go to this console with a rank prefix, to files, or both, as the
`OutputPlan` says (torchrun's `--redirects` and `--tee`).
"""
from __future__ import annotations

import collections
import contextlib
import ctypes
import enum
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import IO, Deque, Dict, List, Optional

from actors.launch.config import STD_ERR, STD_OUT, OutputPlan
from actors.runtime.process.log import get_logger, write_line
from actors.runtime.concurrency.threads import start_thread

log = get_logger(__name__)

TAIL_LINES = 20
# How many times this worker alone was started again (--restart-policy failed).
WORKER_RESTARTS_VARIABLE = "ACTORGRAD_WORKER_RESTART_COUNT"
_READER_JOIN = 5.0
_PR_SET_PDEATHSIG = 1


class GroupState(enum.Enum):
    HEALTHY = "healthy"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass
class WorkerFailure:
    """How one worker ended badly: its rank, exit code or signal, and its last error lines."""

    rank: int
    local_rank: int
    pid: int
    exitcode: int
    tail: List[str]
    when: float
    stderr_path: Optional[str] = None  # the file its stderr went to, if any

    def headline(self) -> str:
        """`rank 1 exited with 1: see ...`: what happened and where its error is, or
        that it wrote no error."""
        if self.exitcode < 0:
            how = f"was killed by {signal.Signals(-self.exitcode).name}"
        else:
            how = f"exited with {self.exitcode}"
        if not self.tail:
            return f"rank {self.rank} {how} (it wrote nothing to stderr)"
        where = self.stderr_path or f"its stderr above, lines starting [rank{self.rank}]:"
        return f"rank {self.rank} {how}: see {where}"

    def describe(self) -> str:
        if self.exitcode < 0:
            how = f"killed by signal {signal.Signals(-self.exitcode).name}"
        else:
            how = f"exit code {self.exitcode}"
        lines = [f"worker rank {self.rank} (local rank {self.local_rank}, pid {self.pid}) "
                 f"failed: {how}"]
        if self.tail:
            lines.append("last lines of its stderr:")
            lines += [f"  {line}" for line in self.tail]
        else:
            lines.append("it wrote nothing to stderr")
        return "\n".join(lines)


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the agent dies (Linux), own session."""
    os.setsid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


class Worker:
    """One worker process and the threads that copy its output with a rank prefix."""

    def __init__(self, rank: int, local_rank: int, argv: List[str], env: Dict[str, str],
                 output: Optional[OutputPlan] = None, log_dir: Optional[str] = None):
        self.rank, self.local_rank = rank, local_rank
        self._spawn = (argv, env, output, log_dir)
        self.tail: Deque[str] = collections.deque(maxlen=TAIL_LINES)
        output = output or OutputPlan()
        sinks = [self._sinks(output, log_dir, STD_OUT, "stdout", sys.stdout),
                 self._sinks(output, log_dir, STD_ERR, "stderr", sys.stderr)]
        self.stderr_path: Optional[str] = sinks[1][1]
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     preexec_fn=_die_with_parent)
        streams = [("stdout", self.proc.stdout, sinks[0], False),
                   ("stderr", self.proc.stderr, sinks[1], True)]
        self._readers = [
            start_thread(self._forward, args=(source, *sink, keep_tail),
                         name=f"rank{rank}-{stream}", owner="actors.launch.workers.Worker",
                         purpose=f"copies the worker's {stream} with a rank prefix")
            for stream, source, sink, keep_tail in streams
        ]
        self.exited_at: Optional[float] = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _sinks(self, output: OutputPlan, log_dir: Optional[str], stream: int, name: str,
               console: IO[str]) -> tuple:
        """(console or None, file path or None) for one of the worker's streams."""
        path = None
        if log_dir is not None and output.to_file(self.local_rank, stream):
            folder = os.path.join(log_dir, str(self.local_rank))
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, f"{name}.log")
        return (console if output.to_console(self.local_rank, stream) else None), path

    def _forward(self, source: IO[bytes], console: Optional[IO[str]], path: Optional[str],
                 keep_tail: bool) -> None:
        prefix = f"[rank{self.rank}]: "
        with contextlib.ExitStack() as files:
            log_file = files.enter_context(open(path, "a", encoding="utf-8")) if path else None
            for raw in source:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if keep_tail:
                    self.tail.append(line)
                if log_file is not None:
                    log_file.write(line + "\n")
                    log_file.flush()
                if console is not None:  # a closed console is skipped: keep draining
                    write_line(console, prefix + line)
        source.close()

    def poll(self) -> Optional[int]:
        code = self.proc.poll()
        if code is not None and self.exited_at is None:
            self.exited_at = time.time()
        return code

    def signal(self, signum: int) -> None:
        try:
            os.killpg(self.proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def again(self) -> "Worker":
        """A new process of this worker: same rank, command and environment."""
        argv, env, output, log_dir = self._spawn
        count = int(env.get(WORKER_RESTARTS_VARIABLE, "0")) + 1
        return Worker(self.rank, self.local_rank, argv,
                      dict(env, **{WORKER_RESTARTS_VARIABLE: str(count)}), output, log_dir)

    def join_output(self) -> None:
        for reader in self._readers:
            reader.join(_READER_JOIN)


class WorkerGroup:
    """The K workers this agent runs for one rendezvous round."""

    def __init__(self, workers: List[Worker]):
        self.workers = workers

    @classmethod
    def start(cls, argv: List[str], envs: List[Dict[str, str]],
              output: Optional[OutputPlan] = None, log_dir: Optional[str] = None
              ) -> "WorkerGroup":
        """Start one worker per environment; output files (if any) go under `log_dir`."""
        workers = []
        try:
            for env in envs:
                workers.append(Worker(int(env["RANK"]), int(env["LOCAL_RANK"]), argv, env,
                                      output, log_dir))
        except BaseException:
            cls(workers).stop(0.0)
            raise
        return cls(workers)

    def poll(self) -> GroupState:
        codes = [w.poll() for w in self.workers]
        if any(code not in (None, 0) for code in codes):
            return GroupState.FAILED
        if all(code == 0 for code in codes):
            return GroupState.SUCCEEDED
        return GroupState.HEALTHY

    def first_failure(self) -> Optional[WorkerFailure]:
        """The earliest failed worker (ties by rank), with the tail of its stderr."""
        failed = self.failures()
        return failed[0] if failed else None

    def failures(self) -> List[WorkerFailure]:
        """Every failed worker, earliest first (ties by rank), with the tail of its stderr."""
        failed = [w for w in self.workers if w.poll() not in (None, 0)]
        failed.sort(key=lambda w: (w.exited_at or 0.0, w.rank))
        for worker in failed:
            worker.join_output()
        return [WorkerFailure(w.rank, w.local_rank, w.pid, w.proc.returncode, list(w.tail),
                              w.exited_at or time.time(), w.stderr_path) for w in failed]

    def restart(self, rank: int) -> Worker:
        """Start worker `rank` again in place of its failed process; the others run on."""
        index = next(i for i, w in enumerate(self.workers) if w.rank == rank)
        old = self.workers[index]
        self.workers[index] = new = old.again()
        log.info("worker_restarted", rank=rank, old_pid=old.pid, pid=new.pid,
                 exitcode=old.proc.returncode)
        return new

    def _wait_all(self, seconds: float) -> None:
        """Wait up to `seconds` for every worker to exit."""
        deadline = time.monotonic() + seconds
        for worker in self.workers:
            try:
                worker.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return

    def stop(self, grace: float, settle: float = 0.0) -> None:
        """SIGTERM every worker's process group, SIGKILL what is left after `grace` seconds.

        `settle`: first wait up to that long for the workers still running to end on
        their own. After a rank failed, the others learn of it within milliseconds and
        write their flight-recorder files as they exit; a SIGTERM would cut that short.
        """
        self._wait_all(settle)
        for worker in self.workers:
            if worker.poll() is None:
                worker.signal(signal.SIGTERM)
        self._wait_all(grace)
        for worker in self.workers:
            worker.signal(signal.SIGKILL)  # the group: also anything the worker started
            try:
                worker.proc.wait(_READER_JOIN)
            except subprocess.TimeoutExpired:
                log.error("worker_unkillable", rank=worker.rank, pid=worker.pid)
            worker.join_output()
        log.info("workers_stopped", ranks=[w.rank for w in self.workers],
                 exitcodes=[w.proc.returncode for w in self.workers])
