"""The launcher's command line, parsed into a `LaunchConfig` (torchrun's options)."""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import shutil
import sys
import uuid
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from actors.launch.environment import defaults_from_environment
from store.elastic.registry import DEFAULT_PORT, ETCD_DEFAULT_PORT, parse_rendezvous_endpoint

STD_NONE, STD_OUT, STD_ERR, STD_ALL = 0, 1, 2, 3
# How long a node whose workers finished waits for the others' (torchrun's agent
# waits as long; it has no option for it either): the node hosting the store must
# outlive the slowest healthy worker.
EXIT_BARRIER_TIMEOUT = 300.0
_RUN_PATH = ("import runpy, sys; sys.argv = sys.argv[1:]; "
             "runpy.run_path(sys.argv[0], run_name='__main__')")


@dataclass
class OutputPlan:
    """Where each local rank's output goes: `redirects` to files only, `tee` to both.

    Both map a local rank (-1: every one) to STD_OUT, STD_ERR or STD_ALL (torchrun's
    Std codes); the files are `<agent folder>/attempt_<restart>/<local_rank>/std{out,err}.log`,
    the agent folder being `<log_dir>/<run_id>_<random>` (`actors.launch.cli.output_dir`).
    """

    log_dir: Optional[str] = None
    redirects: Dict[int, int] = field(default_factory=dict)
    tee: Dict[int, int] = field(default_factory=dict)

    def to_file(self, local_rank: int, stream: int) -> bool:
        return bool((_code(self.redirects, local_rank) | _code(self.tee, local_rank)) & stream)

    def to_console(self, local_rank: int, stream: int) -> bool:
        redirected = _code(self.redirects, local_rank) & stream
        return not redirected or bool(_code(self.tee, local_rank) & stream)

    def any_file(self) -> bool:
        return any(self.redirects.values()) or any(self.tee.values())


def _code(plan: Dict[int, int], local_rank: int) -> int:
    return plan.get(local_rank, plan.get(-1, STD_NONE))


@dataclass
class LaunchConfig:
    min_nodes: int
    max_nodes: int
    nproc_per_node: int
    rdzv_host: str
    rdzv_port: int
    run_id: str
    max_restarts: int
    monitor_interval: float
    standalone: bool
    entry: List[str]  # the worker's argv after the interpreter: script or -m module, args
    local_addr: str = "127.0.0.1"
    rdzv_conf: Dict[str, float] = field(default_factory=dict)
    exit_barrier_timeout: float = EXIT_BARRIER_TIMEOUT
    stop_grace: float = 5.0
    static: bool = False  # fixed membership: node `node_rank` of `max_nodes`
    rdzv_backend: Optional[str] = None  # "etcd" or "etcd-v2": the state lives in etcd
    node_rank: int = 0
    role: str = "default"
    command: List[str] = field(default_factory=list)  # the worker's whole argv
    output: OutputPlan = field(default_factory=OutputPlan)
    set_omp_threads: bool = False  # OMP_NUM_THREADS=1 for each worker, as torchrun does
    restart_policy: str = "all"  # "failed": restart only a failed worker, in place

    def conf(self, name: str, default: Optional[float]) -> Optional[float]:
        return self.rdzv_conf.get(name, default)


# torchrun's default --rdzv-id: the nodes of a job meet without being given one.
DEFAULT_RUN_ID = "none"
ETCD_BACKENDS = ("etcd", "etcd-v2")
RESTART_POLICIES = ("all", "failed")
_CONF_KEYS = ("join_timeout", "last_call_timeout", "close_timeout", "heartbeat_timeout",
              "keep_alive_interval", "keep_alive_max_attempt", "read_timeout", "lease_ttl")


def parse_nnodes(text: str) -> Tuple[int, int]:
    """`N` or `MIN:MAX` as (min, max); a clear error otherwise."""
    parts = text.split(":")
    try:
        if len(parts) == 1:
            low = high = int(parts[0])
        elif len(parts) == 2:
            low, high = int(parts[0]), int(parts[1])
        else:
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(f"--nnodes must be N or MIN:MAX, got {text!r}") from None
    if low < 1 or high < low:
        raise argparse.ArgumentTypeError(
            f"--nnodes {text!r}: need 1 <= MIN <= MAX, got MIN={low}, MAX={high}")
    return low, high


def parse_endpoint(text: str) -> Tuple[str, Optional[int]]:
    """`HOST[:PORT]`; the port is None when not given (its default is the backend's)."""
    try:
        host, port = parse_rendezvous_endpoint(text, None)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--rdzv-endpoint: {exc}") from None
    if port == 0:
        raise argparse.ArgumentTypeError(f"--rdzv-endpoint must be HOST:PORT, got {text!r}")
    return host, port


def parse_conf(text: str) -> Dict[str, float]:
    """`key=value,...` with the keys of `_CONF_KEYS`."""
    conf: Dict[str, float] = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or key not in _CONF_KEYS:
            raise argparse.ArgumentTypeError(
                f"--rdzv-conf item {item!r}: expected key=value with key one of {_CONF_KEYS}")
        try:
            conf[key] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--rdzv-conf {key} must be a number") from None
    return conf


def parse_std(text: str) -> Dict[int, int]:
    """torchrun's `--redirects`/`--tee`: `N` for every local rank or `RANK:N,...`; N in 0..3."""
    def code(value: str) -> int:
        if value not in ("0", "1", "2", "3"):
            raise argparse.ArgumentTypeError(
                f"expected 0 (none), 1 (stdout), 2 (stderr) or 3 (both), got {value!r}")
        return int(value)

    if ":" not in text:
        return {-1: code(text)}  # -1: every local rank
    plan = {}
    for item in text.split(","):
        rank, _, value = item.partition(":")
        if not rank.isdigit():
            raise argparse.ArgumentTypeError(f"expected LOCAL_RANK:N, got {item!r}")
        plan[int(rank)] = code(value)
    return plan


def parse_nproc(text: str) -> int:
    """An integer, or torchrun's "auto" / "cpu": one worker per CPU (there are no accelerators)."""
    if text in ("auto", "cpu"):
        return os.cpu_count() or 1
    if text in ("gpu", "xpu"):
        raise argparse.ArgumentTypeError(f"--nproc-per-node {text}: this machine's workers run "
                                         f"on CPUs only; use auto, cpu or a number")
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--nproc-per-node must be a number, auto or cpu, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("--nproc-per-node must be at least 1")
    return value


def _number(kind: type, zero_ok: bool = True):
    """A parser of finite numbers of `kind`, at least 0 (above 0 unless `zero_ok`)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if value < 0 or (value == 0 and not zero_ok):
            bound = "must not be negative" if zero_ok else "must be more than 0"
            raise argparse.ArgumentTypeError(f"{bound}, got {text!r}")
        return value
    return parse


def build_parser(prog: str = "python -m actors.launch") -> argparse.ArgumentParser:
    """The launcher's options, with `prog` the command as it was invoked."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Start an elastic agent on this node: rendezvous with the other nodes, "
                    "run --nproc-per-node workers of the training script, restart on "
                    "failure or membership change. torchrun's options, whose defaults "
                    "its PET_<OPTION> variables set as in torchrun (PET_NPROC_PER_NODE=2); "
                    "`actorrun` is the same command.")
    option = parser.add_argument

    def both(name: str, **kwargs) -> None:  # torchrun spells options with - and with _
        option(name, name.replace("-", "_").replace("__", "--", 1), **kwargs)

    option("--nnodes", type=parse_nnodes, default=(1, 1),
           help="number of nodes, N or MIN:MAX (default 1)")
    both("--nproc-per-node", type=parse_nproc, default=1,
         help="workers on this node: a number, auto or cpu (one per CPU) (default 1)")
    both("--rdzv-endpoint", type=parse_endpoint, default=None,
         help="HOST:PORT of the rendezvous store; the agent that can bind it hosts it "
              "(default: none; required with more than one node)")
    both("--rdzv-id", default=None,
         help=f"the job's run id, the same on every node (default: {DEFAULT_RUN_ID}, as "
              f"torchrun's; a random one with --standalone or a single node without "
              f"--rdzv-endpoint, whose store is its own)")
    both("--rdzv-backend", default=None,
         choices=["store", "c10d", "static", *ETCD_BACKENDS],
         help="store (default; c10d is its alias): elastic membership, the state in a "
              "TCPStore an agent hosts; etcd (etcd-v2 is its alias): the same, the state "
              "in the etcd server at --rdzv-endpoint (port 2379 by default); static: fixed "
              "membership, node --node-rank of --nnodes (the default when --node-rank, "
              "--master-addr or --master-port is given)")
    both("--rdzv-conf", type=parse_conf, default={},
         help="key=value,... among " + ", ".join(_CONF_KEYS) + " (default: none)")
    both("--node-rank", type=_number(int), default=None,
         help="static mode: this node's rank (default 0)")
    both("--master-addr", default=None,
         help="static mode: address of node 0, which hosts the store (default 127.0.0.1)")
    both("--master-port", type=_number(int), default=None,
         help="static mode: port of the store on node 0 (default 29500)")
    both("--max-restarts", type=_number(int), default=0,
         help="how many times workers are restarted after a failure before the launch "
              "fails (default 0); restarts to take in new nodes are free")
    both("--restart-policy", default="all", choices=list(RESTART_POLICIES),
         help="all (default, torchrun's behaviour): a failed worker stops the node's "
              "workers and the whole job re-rendezvous and starts again; failed: only "
              "the failed worker is started again, with the same rank and environment, "
              "while the others keep running (for jobs that survive a lost rank in "
              "place, e.g. with engine.ft); each restart uses one of --max-restarts")
    # 0 would make the agent look at its workers without pause, busy on a core.
    both("--monitor-interval", type=_number(float, zero_ok=False), default=0.1,
         help="seconds between looks at the workers, more than 0 (default 0.1)")
    option("--standalone", action="store_true",
           help="one node with an embedded store on a free port (default: off)")
    both("--local-addr", default="127.0.0.1",
         help="address workers use to reach this node (MASTER_ADDR) (default 127.0.0.1)")
    option("--role", default="default",
           help="the workers' role (ROLE_NAME) (default: default)")
    both("--log-dir", default=None,
         help="directory for this agent's new folder <run id>_<random>/: the launcher's "
              "structured event lines (events.log) and the files of --redirects and --tee "
              "(default: no events file; worker files in a new temporary directory)")
    option("-r", "--redirects", type=parse_std, default={},
           help="send workers' output to files only: 0 none, 1 stdout, 2 stderr, 3 both; "
                "for every local rank, or LOCAL_RANK:N,... (default 0)")
    option("-t", "--tee", type=parse_std, default={},
           help="send workers' output to files and to this console (codes as --redirects) "
                "(default 0)")
    both("--no-python", action="store_true",
         help="run the script as an executable, not with the Python interpreter "
              "(default: off)")
    both("--run-path", action="store_true",
         help="run the script with runpy.run_path (its name is __main__) (default: off)")
    both("--start-method", default="spawn", choices=["spawn", "fork", "forkserver"],
         help="accepted for torchrun's sake: every worker is a fresh interpreter, as "
              "with spawn (default spawn)")
    option("-m", "--module", action="store_true",
           help="treat the script as a module name, like python -m (default: off)")
    option("script", nargs="?", help="the training script (or module with -m)")
    option("script_args", nargs=argparse.REMAINDER,
           help="arguments passed on to the script (optional)")
    return parser


def missing_script(args: argparse.Namespace) -> Optional[str]:
    """Why the script cannot start, checked before any worker does; None if it can."""
    if args.script is None:
        return "no script given: the training script to run comes after the options"
    if args.module:
        try:
            found = importlib.util.find_spec(args.script) is not None
        except (ImportError, ValueError):
            found = False
        return None if found else f"no module named {args.script!r}"
    if args.no_python:
        found = os.path.isfile(args.script) or shutil.which(args.script) is not None
        return None if found else f"no such executable: {args.script}"
    return None if os.path.isfile(args.script) else f"no such script: {args.script}"


def parse_args(argv: Optional[Sequence[str]] = None,
               prog: str = "python -m actors.launch") -> LaunchConfig:
    """The launch as the command line asks; a usage error (exit 2) for a bad one."""
    parser = build_parser(prog)
    defaults_from_environment(parser)
    args = parser.parse_args(argv)
    min_nodes, max_nodes = args.nnodes
    static_options = (args.node_rank, args.master_addr, args.master_port)
    static = args.rdzv_backend == "static" or (
        args.rdzv_backend is None and args.rdzv_endpoint is None
        and any(value is not None for value in static_options))
    if static:
        if args.standalone:
            parser.error("--standalone and static mode (--node-rank, --master-addr, "
                         "--master-port) exclude each other")
        if min_nodes != max_nodes:
            parser.error(f"static mode needs a fixed --nnodes, got {min_nodes}:{max_nodes}")
        if (args.node_rank or 0) >= max_nodes:
            parser.error(f"--node-rank {args.node_rank} must be below --nnodes {max_nodes}")
        host, port = (args.rdzv_endpoint if args.rdzv_endpoint is not None else
                      (args.master_addr or "127.0.0.1", args.master_port or 29500))
    elif args.standalone:
        min_nodes = max_nodes = 1
        host, port = "127.0.0.1", 0
    elif args.rdzv_endpoint is None:
        if max_nodes > 1:
            parser.error("--rdzv-endpoint is required with more than one node "
                         "(or use --standalone, or --node-rank with --master-addr and "
                         "--master-port for fixed membership)")
        host, port = "127.0.0.1", 0
    else:
        host, port = args.rdzv_endpoint
    if port is None:
        port = ETCD_DEFAULT_PORT if args.rdzv_backend in ETCD_BACKENDS else DEFAULT_PORT
    if args.rdzv_backend in ETCD_BACKENDS and (static or args.standalone
                                               or args.rdzv_endpoint is None):
        parser.error(f"--rdzv-backend {args.rdzv_backend} needs --rdzv-endpoint HOST[:PORT] "
                     f"of an etcd server, and excludes --standalone")
    if args.no_python and args.module:
        parser.error("--no-python and --module exclude each other")
    problem = missing_script(args)
    if problem is not None:
        parser.error(problem)
    nproc = args.nproc_per_node
    # A store on a free port (port 0) meets no other node: a random id keeps its runs
    # apart, as torchrun's standalone one does.
    run_id = args.rdzv_id or (uuid.uuid4().hex[:12] if port == 0 else DEFAULT_RUN_ID)
    return LaunchConfig(
        min_nodes=min_nodes, max_nodes=max_nodes, nproc_per_node=nproc,
        rdzv_host=host, rdzv_port=port, run_id=run_id,
        max_restarts=args.max_restarts, monitor_interval=args.monitor_interval,
        standalone=args.standalone and not static, entry=[args.script, *args.script_args],
        local_addr=args.local_addr, rdzv_conf=args.rdzv_conf, static=static,
        rdzv_backend=args.rdzv_backend if args.rdzv_backend in ETCD_BACKENDS else None,
        node_rank=args.node_rank or 0, role=args.role,
        command=worker_command(args),
        output=OutputPlan(args.log_dir, args.redirects, args.tee),
        set_omp_threads=nproc > 1 and "OMP_NUM_THREADS" not in os.environ,
        restart_policy=args.restart_policy)


def worker_command(args: argparse.Namespace) -> List[str]:
    """The worker's argv: the script run by this interpreter, as a module, path or executable."""
    if args.run_path:
        return [sys.executable, "-u", "-c", _RUN_PATH, args.script, *args.script_args]
    if args.no_python:
        return [args.script, *args.script_args]
    target = ["-m", args.script] if args.module else [args.script]
    return [sys.executable, "-u", *target, *args.script_args]
