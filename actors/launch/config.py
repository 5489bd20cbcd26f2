"""The launcher's command line, parsed into a `LaunchConfig` (torchrun's options)."""
from __future__ import annotations

import argparse
import uuid
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from store.elastic.registry import DEFAULT_PORT, parse_rendezvous_endpoint



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
    exit_barrier_timeout: float = 30.0
    stop_grace: float = 5.0

    def conf(self, name: str, default: Optional[float]) -> Optional[float]:
        return self.rdzv_conf.get(name, default)


_CONF_KEYS = ("join_timeout", "last_call_timeout", "close_timeout", "heartbeat_timeout",
              "keep_alive_interval", "keep_alive_max_attempt")


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


def parse_endpoint(text: str) -> Tuple[str, int]:
    """`HOST[:PORT]` (port defaults to 29400)."""
    try:
        host, port = parse_rendezvous_endpoint(text, DEFAULT_PORT)
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


def _positive(kind: type):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m actors.launch",
        description="Start an elastic agent on this node: rendezvous with the other nodes, "
                    "run --nproc-per-node workers of the training script, restart on "
                    "failure or membership change.")
    parser.add_argument("--nnodes", type=parse_nnodes, default=(1, 1),
                        help="number of nodes, N or MIN:MAX (default 1)")
    parser.add_argument("--nproc-per-node", "--nproc_per_node", type=_positive(int), default=1)
    parser.add_argument("--rdzv-endpoint", "--rdzv_endpoint", type=parse_endpoint,
                        default=None, help="HOST:PORT of the rendezvous store; the agent that "
                        "can bind it hosts it")
    parser.add_argument("--rdzv-id", "--rdzv_id", default=None, help="the job's run id")
    parser.add_argument("--rdzv-backend", "--rdzv_backend", default="store",
                        choices=["store", "c10d"], help="only the store backend exists "
                        "(c10d is accepted as its alias)")
    parser.add_argument("--rdzv-conf", "--rdzv_conf", type=parse_conf, default={},
                        help="key=value,... among " + ", ".join(_CONF_KEYS))
    parser.add_argument("--max-restarts", "--max_restarts", type=_positive(int), default=0)
    parser.add_argument("--monitor-interval", "--monitor_interval", type=_positive(float),
                        default=0.1, help="seconds between looks at the workers")
    parser.add_argument("--standalone", action="store_true",
                        help="one node with an embedded store on a free port")
    parser.add_argument("--local-addr", "--local_addr", default="127.0.0.1",
                        help="address workers use to reach this node (MASTER_ADDR)")
    parser.add_argument("-m", "--module", action="store_true",
                        help="treat the script as a module name, like python -m")
    parser.add_argument("script", help="the training script (or module with -m)")
    parser.add_argument("script_args", nargs=argparse.REMAINDER)
    return parser


def parse_args(argv: Optional[Sequence[str]] = None) -> LaunchConfig:
    parser = build_parser()
    args = parser.parse_args(argv)
    min_nodes, max_nodes = args.nnodes
    if args.standalone:
        min_nodes = max_nodes = 1
        host, port = "127.0.0.1", 0
    elif args.rdzv_endpoint is None:
        if max_nodes > 1:
            parser.error("--rdzv-endpoint is required with more than one node "
                         "(or use --standalone)")
        host, port = "127.0.0.1", 0
    else:
        host, port = args.rdzv_endpoint
    if args.nproc_per_node < 1:
        parser.error("--nproc-per-node must be at least 1")
    entry = (["-m", args.script] if args.module else [args.script]) + list(args.script_args)
    return LaunchConfig(
        min_nodes=min_nodes, max_nodes=max_nodes, nproc_per_node=args.nproc_per_node,
        rdzv_host=host, rdzv_port=port, run_id=args.rdzv_id or uuid.uuid4().hex[:12],
        max_restarts=args.max_restarts, monitor_interval=args.monitor_interval,
        standalone=args.standalone, entry=entry, local_addr=args.local_addr,
        rdzv_conf=args.rdzv_conf)
