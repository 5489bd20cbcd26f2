"""Several hosts on one machine: an elastic job loses a host and finishes on the survivor.

Root only. Three network namespaces joined by a bridge (see `netns`): etcd runs in the
first, and each of the other two, a "host", runs one launcher agent with two workers of
`examples/elastic_train.py` (``--nnodes 1:2``, so one host is enough to go on). The
checkpoint is one file in a temporary folder that both hosts see, as they would see
shared storage. Once the job has reported `--kill-after` steps, one host dies at once:
its cable is pulled (its veth down) and its agent and workers are SIGKILLed. The other
host's workers lose their peers, its agent meets the rendezvous again alone, and the
job resumes from the newest checkpoint and finishes. Everything is removed on the way
out, whatever happens; the last line printed is one JSON summary:

    killed_at_step         the newest checkpoint reported before the kill
    resumed_from_step      the step the survivor's workers resumed at
    survivor_world_size    the number of workers after the kill
    seconds_kill_to_resume from the kill to the survivors' first line after it
    final_accuracy         held-out accuracy at the last step
    total_s                the whole run, the network's making and unmaking included

Usage: ``python benchmarks/multihost/run.py [--backend etcd|c10d] [--quick]
[--kill rank0|host2|host3] [--no-partition] [--steps N] [--checkpoint-every N]
[--kill-after N] [--rdzv-conf K=V,..] [--timeout S] [--keep]``.

``--backend c10d`` keeps the rendezvous in a TCPStore that host2's agent hosts instead
of etcd (no etcd namespace); then killing host2 ends the job's coordination too, so the
default victim is host3.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import IO, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from benchmarks.multihost.netns import (Interrupted, NetworkError, SimulatedNetwork,  # noqa: E402
                                        plan_network)

EXAMPLE = os.path.join(ROOT, "examples", "elastic_train.py")
ETCD_PORT = 2379
C10D_PORT = 29400
HOSTS = ("host2", "host3")
NPROC_PER_NODE = 2
ETCD_READY_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0  # a SIGKILLed process to be reaped; a finished agent to exit

# Lines of the agents' output that tell how the job goes.
PROGRESS = re.compile(r"^\[rank0\]: step (\d+) loss ([0-9.]+) held-out accuracy ([0-9.]+)%")
RESUMED = re.compile(r"^\[rank(\d+)\]: rank \d+/(\d+) restart (\d+): resuming at step (\d+)")
AGENT_EVENT = re.compile(r"event='?([a-z_]+)'?")
_FIELD = re.compile(r"(\w+)=('[^']*'|\S+)")
_QUIET_FIELDS = {"timestamp", "level", "event", "logger", "run_id", "entry", "log_dir",
                 "note"}
ETCD_READY = "ready to serve client requests"


# ---- the story told by the output lines (pure) -------------------------------------

@dataclass
class Progress:
    step: int
    loss: float
    accuracy: float  # a fraction


@dataclass
class Resumed:
    rank: int
    world_size: int
    restart: int
    step: int


def parse_line(line: str):
    """A `Progress` (rank 0's checkpoint line), a `Resumed` (a worker's first line), or
    None, for one line of an agent's output."""
    match = PROGRESS.match(line)
    if match:
        return Progress(int(match[1]), float(match[2]), float(match[3]) / 100)
    match = RESUMED.match(line)
    if match:
        return Resumed(*(int(group) for group in match.groups()))
    return None


def agent_event(line: str) -> Optional[Tuple[str, Dict[str, str]]]:
    """(event, its fields less the noisy ones) for one of the agent's own log lines."""
    if line.startswith("[rank") or "event=" not in line:
        return None
    match = AGENT_EVENT.search(line)
    if not match:
        return None
    fields = {key: value.strip("'") for key, value in _FIELD.findall(line)
              if key not in _QUIET_FIELDS}
    return match[1], fields


def agent_command(backend: str, endpoint: str, run_id: str, local_addr: str,
                  rdzv_conf: str, train_args: List[str]) -> List[str]:
    """One host's `python -m actors.launch` command line."""
    argv = [sys.executable, "-m", "actors.launch", "--nnodes", f"1:{len(HOSTS)}",
            "--nproc-per-node", str(NPROC_PER_NODE), "--rdzv-backend", backend,
            "--rdzv-endpoint", endpoint, "--rdzv-id", run_id, "--local-addr", local_addr,
            "--max-restarts", "3"]
    if rdzv_conf:
        argv += ["--rdzv-conf", rdzv_conf]
    return argv + [EXAMPLE, *train_args]


def etcd_command(binary: str, address: str, data_dir: str) -> List[str]:
    """One etcd member listening on `address` only (clients on 2379, peers on 2380)."""
    client, peer = f"http://{address}:{ETCD_PORT}", f"http://{address}:{ETCD_PORT + 1}"
    return [binary, "--name", "multihost", "--data-dir", data_dir,
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"multihost={peer}", "--unsafe-no-fsync"]


# ---- processes ---------------------------------------------------------------------

class Child:
    """A process this script started (in its own session), its output lines copied to
    `log_path` and put on `lines` as (name, monotonic time, line); None at its end."""

    def __init__(self, name: str, argv: List[str], env: Dict[str, str], log_path: str,
                 lines: "queue.Queue[Tuple[str, float, Optional[str]]]"):
        self.name, self.log_path = name, log_path
        self.proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1, start_new_session=True)
        self._log: IO[str] = open(log_path, "w")
        self._reader = threading.Thread(target=self._read, args=(lines,),
                                        name=f"{name}-output", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self, lines: "queue.Queue[Tuple[str, float, Optional[str]]]") -> None:
        for line in self.proc.stdout:
            if not self._log.closed:  # closed only if the reader outlived `close`'s wait
                self._log.write(line)
                self._log.flush()
            lines.put((self.name, time.monotonic(), line.rstrip("\n")))
        lines.put((self.name, time.monotonic(), None))

    def descendants(self) -> List[int]:
        """The PIDs this process started, and theirs, as /proc shows them now (the
        launcher starts each worker in a session of its own, so they are not in ours)."""
        parents: Dict[int, List[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
            parents.setdefault(ppid, []).append(int(entry))
        found, todo = [], [self.pid]
        while todo:
            children = parents.get(todo.pop(), [])
            found += children
            todo += children
        return found

    def kill(self) -> List[int]:
        """SIGKILL this process's group and every descendant; reap it (bounded). The PIDs
        killed besides this one."""
        others = self.descendants() if self.proc.poll() is None else []
        for kill, pid in [(os.killpg, self.pid)] + [(os.kill, pid) for pid in others]:
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            print(f"warning: {self.name} (PID {self.pid}) not gone {STOP_TIMEOUT:.0f} s "
                  f"after SIGKILL", flush=True)
        return others

    def close(self) -> None:
        self.kill()
        self._reader.join(STOP_TIMEOUT)
        self._log.close()


class JobFailed(RuntimeError):
    pass


# ---- the run -----------------------------------------------------------------------

class Run:
    """One run: start etcd and the agents, watch their lines, kill a host, report."""

    def __init__(self, args: argparse.Namespace, net: SimulatedNetwork, workdir: str):
        self.args, self.net, self.workdir = args, net, workdir
        self.started = time.monotonic()
        self.lines: "queue.Queue[Tuple[str, float, Optional[str]]]" = queue.Queue()
        self.children: Dict[str, Child] = {}
        self.deadline = self.started + args.timeout

    def say(self, text: str, at: Optional[float] = None) -> None:
        print(f"[{(at or time.monotonic()) - self.started:6.1f}s] {text}", flush=True)

    def start(self, name: str, argv: List[str], env: Optional[Dict[str, str]] = None) -> Child:
        child = Child(name, self.net.exec_argv(name, argv), env or dict(os.environ),
                      os.path.join(self.workdir, f"{name}.log"), self.lines)
        self.children[name] = child
        return child

    def next_line(self, deadline: float, waiting_for: str) -> Tuple[str, float, Optional[str]]:
        timeout = min(deadline, self.deadline) - time.monotonic()
        try:
            if timeout <= 0:
                raise queue.Empty
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise JobFailed(f"timed out waiting for {waiting_for}") from None

    def close(self) -> None:
        """Kill and reap every child, newest first. A signal meanwhile is raised at the end
        (the network's handler ignores any further one, so closing again succeeds)."""
        interrupted: Optional[Interrupted] = None
        for child in reversed(list(self.children.values())):
            try:
                child.close()
            except Interrupted as exc:
                interrupted = exc
                child.close()
        if interrupted is not None:
            raise interrupted

    def start_etcd(self) -> str:
        from store.etcd.local import etcd_binary

        address = self.net.plan.host("etcd").address
        data_dir = os.path.join(self.workdir, "etcd-data")
        self.start("etcd", etcd_command(etcd_binary(), address, data_dir),
                   dict(os.environ, ETCD_UNSUPPORTED_ARCH=""))
        deadline = time.monotonic() + ETCD_READY_TIMEOUT
        while True:
            name, at, line = self.next_line(deadline, "etcd to serve")
            if name == "etcd" and line is None:
                raise JobFailed(f"etcd exited: see {self.children['etcd'].log_path}")
            if name == "etcd" and ETCD_READY in line:
                self.say(f"etcd serving at {address}:{ETCD_PORT} (namespace "
                         f"{self.net.plan.host('etcd').namespace})", at)
                return f"{address}:{ETCD_PORT}"

    def start_agents(self, endpoint: str) -> None:
        args = self.args
        train = ["--steps", str(args.steps), "--checkpoint-every", str(args.checkpoint_every),
                 "--checkpoint", os.path.join(self.workdir, "shared", "elastic_train.ckpt.npz")]
        os.makedirs(os.path.join(self.workdir, "shared"))
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        run_id = f"multihost-{self.net.plan.suffix}"
        for host in HOSTS:
            address = self.net.plan.host(host).address
            child = self.start(host, agent_command(args.backend, endpoint, run_id, address,
                                                   args.rdzv_conf, train), env)
            self.say(f"{host} ({address}): launcher agent PID {child.pid}, "
                     f"{NPROC_PER_NODE} workers")

    def show(self, name: str, at: float, line: str) -> None:
        """Echo the lines that tell the story; the rest stay in the logs."""
        event = agent_event(line)
        if event is not None:
            what, fields = event
            if what.startswith(("agent_", "rendezvous_")):
                details = " ".join(f"{key}={value}" for key, value in fields.items())
                self.say(f"{name}: {what} {details}", at)
        elif parse_line(line) is not None or line.startswith("launch:"):
            self.say(f"{name}: {line}", at)

    def watch(self) -> dict:
        args = self.args
        victim: Optional[str] = None if args.kill == "rank0" else args.kill
        rank0_host: Optional[str] = None
        last: Optional[Progress] = None
        killed_at: Optional[float] = None
        killed_step = 0
        resumed: Optional[Resumed] = None
        resumed_at: Optional[float] = None
        finished: Dict[str, int] = {}
        while True:
            name, at, line = self.next_line(self.deadline, "the job to finish")
            if line is None:
                if name == victim and killed_at is not None:
                    continue
                code = self.children[name].proc.wait(STOP_TIMEOUT)
                self.say(f"{name}: exited with status {code}", at)
                if name == "etcd" or code != 0:
                    raise JobFailed(f"{name} exited with status {code}: see "
                                    f"{self.children[name].log_path}")
                finished[name] = code
                survivors = [host for host in HOSTS if host != victim]
                if all(host in finished for host in survivors):
                    break
                continue
            self.show(name, at, line)
            event = parse_line(line)
            if isinstance(event, Progress):
                last, rank0_host = event, name
            elif isinstance(event, Resumed) and killed_at is not None and name != victim \
                    and resumed is None:
                resumed, resumed_at = event, at
            if killed_at is None and last is not None and last.step >= args.kill_after:
                victim = victim or rank0_host
                killed_step, killed_at = last.step, self.kill_host(victim)
        if resumed is None or last is None or last.step != args.steps:
            raise JobFailed("the job ended without resuming after the kill")
        return {"backend": args.backend, "killed_host": victim, "killed_at_step": killed_step,
                "resumed_from_step": resumed.step,
                "survivor_world_size": resumed.world_size,
                "seconds_kill_to_resume": round(resumed_at - killed_at, 2),
                "final_step": last.step, "final_accuracy": round(last.accuracy, 4)}

    def kill_host(self, host: str) -> float:
        """Pull the cable of `host` (unless --no-partition) and SIGKILL its processes."""
        child = self.children[host]
        if self.args.partition:
            self.net.partition(host)
        at = time.monotonic()
        killed = child.kill()
        left = self.net.pids(host)
        cable = "veth down, " if self.args.partition else ""
        self.say(f">>> {host} dies: {cable}SIGKILL to agent {child.pid} and "
                 f"{', '.join(map(str, killed)) or 'no other process'}"
                 f"{'' if not left else f' (still in its namespace: {left})'}", at)
        return at


def check_can_run() -> Optional[str]:
    """Why this machine cannot run the benchmark, or None."""
    if shutil.which("ip") is None:
        return "needs the `ip` command (iproute2)"
    if os.geteuid() != 0:
        return "needs root (it makes network namespaces, veths and a bridge)"
    return None


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("etcd", "c10d"), default="etcd")
    parser.add_argument("--quick", action="store_true",
                        help="a shorter job: 800 steps, the kill after 300")
    parser.add_argument("--steps", type=int, default=None, help="default 1500 (800 quick)")
    parser.add_argument("--checkpoint-every", type=int, default=100)
    parser.add_argument("--kill-after", type=int, default=None,
                        help="kill once a checkpoint at this step or later is reported "
                             "(default 600, 300 quick)")
    parser.add_argument("--kill", choices=("rank0", "host2", "host3"), default=None,
                        help="the host to kill: the one running rank 0 (default with etcd), "
                             "or a named one (host3 by default with c10d: host2 hosts its "
                             "store)")
    parser.add_argument("--no-partition", dest="partition", action="store_false",
                        help="only kill the host's processes; leave its veth up")
    parser.add_argument("--rdzv-conf", default="last_call_timeout=3",
                        help="passed to the launcher (default: %(default)s, so that a "
                             "round waits 3 s for more hosts once it has one)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="bound on the whole run, seconds")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary folder (logs, checkpoint, etcd data)")
    args = parser.parse_args(argv)
    args.steps = args.steps or (800 if args.quick else 1500)
    args.kill_after = args.kill_after or (300 if args.quick else 600)
    args.kill = args.kill or ("rank0" if args.backend == "etcd" else "host3")
    if not 0 < args.kill_after < args.steps:
        parser.error(f"--kill-after must be in 1..{args.steps - 1}")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    reason = check_can_run()
    if reason is not None:
        print(f"benchmarks/multihost: {reason}", file=sys.stderr)
        return 2
    started = time.monotonic()
    roles = (("etcd",) if args.backend == "etcd" else ()) + HOSTS
    plan = plan_network(roles)
    workdir = tempfile.mkdtemp(prefix=f"actorgrad-multihost-{plan.suffix}-")
    summary: Optional[dict] = None
    status = 1
    try:
        with SimulatedNetwork(plan) as net:
            print(f"network {plan.subnet} on bridge {plan.bridge}: " + ", ".join(
                f"{host.role} {host.address} ({host.namespace})" for host in plan.hosts),
                flush=True)
            run = Run(args, net, workdir)
            try:
                endpoint = (run.start_etcd() if args.backend == "etcd" else
                            f"{plan.host('host2').address}:{C10D_PORT}")
                run.start_agents(endpoint)
                summary = run.watch()
                status = 0
            finally:
                run.close()
    except JobFailed as exc:
        print(f"benchmarks/multihost: {exc} (logs in {workdir})", file=sys.stderr)
        args.keep = True
    except Interrupted as exc:
        print(f"benchmarks/multihost: stopped by {exc}", file=sys.stderr)
        status = 128 + exc.signum
    except NetworkError as exc:
        print(f"benchmarks/multihost: {exc}", file=sys.stderr)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    left = leftovers(plan)
    print(f"cleanup: {'nothing left' if not left else 'LEFT: ' + ', '.join(left)}", flush=True)
    if summary is not None:
        summary["total_s"] = round(time.monotonic() - started, 1)
        print(json.dumps(summary), flush=True)
    return status if not left else 1


def leftovers(plan) -> List[str]:
    """What of `plan` `ip` still lists (namespaces and links), after the network closed."""
    try:
        return SimulatedNetwork(plan).leftovers()
    except NetworkError as exc:
        return [f"(cannot list: {exc})"]


if __name__ == "__main__":
    sys.exit(main())
