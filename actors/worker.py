"""``python -m actors.worker``: a worker process that serves RPCs until its world shuts down.

Start one per terminal (or per machine) next to a driver script that calls
``actors.init_rpc`` as another rank; the worker leaves when the whole world calls
``actors.shutdown``. Flags default from MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE.

For clients that do not join the world (other languages, plain pyzmq): ``--import``
the modules that `actors.expose` their functions, ``--no-pickle`` to accept only
JSON, and ``--serve-forever`` to keep serving until SIGINT or SIGTERM. Once it serves,
the worker prints its mailbox address, the one to give `actors.ExposedClient`.
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from typing import List, Optional

from actors.runtime.process.log import get_logger, say
from actors.rpc.inflight import CALLS
from actors.runtime.errors import ActorStoppedError
from actors.runtime.introspection.recorder import describe_callable
from actors.runtime.protocol import kind_name
from actors.runtime.protocol.envelope import Message

log = get_logger("actors.worker")
GRACEFUL_TIMEOUT = 10.0  # seconds, --graceful-timeout's default


def _env_int(name: str) -> Optional[int]:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else None


def build_parser() -> argparse.ArgumentParser:
    """The worker command's options, each defaulting from the environment as its help says."""
    parser = argparse.ArgumentParser(
        prog="python -m actors.worker",
        description="Serve RPCs as one worker of an actorgrad RPC world until the world "
                    "shuts down. Every flag defaults from the environment variable named in "
                    "its help; the store of the world is hosted by rank 0 at "
                    "MASTER_ADDR:MASTER_PORT.")
    parser.add_argument("--rank", type=int, default=_env_int("RANK"),
                        help="this worker's rank, 0 to world size - 1 (default: RANK; "
                             "required)")
    parser.add_argument("--world-size", type=int, default=_env_int("WORLD_SIZE"),
                        help="number of workers in the world, driver included (default: "
                             "WORLD_SIZE; required)")
    parser.add_argument("--master-addr", default=os.environ.get("MASTER_ADDR", "127.0.0.1"),
                        help="host of rank 0's store (MASTER_ADDR, default 127.0.0.1)")
    parser.add_argument("--master-port", type=int, default=_env_int("MASTER_PORT") or 29500,
                        help="port of rank 0's store (MASTER_PORT, default 29500)")
    parser.add_argument("--name", default=None, help="worker name (default: worker<rank>)")
    parser.add_argument("--num-worker-threads", type=int, default=16,
                        help="threads that run incoming calls (default 16)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds to wait for the world to assemble (default 300)")
    parser.add_argument("--import", dest="modules", action="append", default=[],
                        metavar="MODULE",
                        help="import MODULE before joining, e.g. one that exposes functions "
                             "with actors.expose (repeatable; default: none)")
    parser.add_argument("--no-pickle", action="store_true",
                        help="safe mode: never load a pickle from the wire; serve only named "
                             "calls and JSON store requests (default: off)")
    parser.add_argument("--serve-forever", action="store_true",
                        help="once the world is formed, serve until SIGINT or SIGTERM, then "
                             "leave without waiting for the other workers (default: off, "
                             "leave when the world shuts down)")
    parser.add_argument("--graceful-timeout", type=float, default=None, metavar="SECONDS",
                        help="with --serve-forever: after SIGINT or SIGTERM, how long the "
                             "calls being served may take to finish and reply; calls that "
                             "come meanwhile get an error saying the worker is stopping "
                             "(default 10)")
    return parser


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The options of `argv`; a usage error (exit 2) when they cannot make a worker."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.rank is None or args.world_size is None:
        parser.error("--rank and --world-size are required (or RANK and WORLD_SIZE)")
    if args.world_size < 1:
        parser.error(f"--world-size must be at least 1, got {args.world_size}")
    if not 0 <= args.rank < args.world_size:
        parser.error(f"--rank must be 0 to {args.world_size - 1} in a world of "
                     f"{args.world_size}, got {args.rank}")
    if args.graceful_timeout is None:
        args.graceful_timeout = GRACEFUL_TIMEOUT
    elif not args.serve_forever:
        parser.error("--graceful-timeout needs --serve-forever (a worker of a world leaves "
                     "when the world shuts down, once every call is done)")
    if not 0 <= args.graceful_timeout < float("inf"):
        parser.error(f"--graceful-timeout must be a finite number of seconds >= 0, got "
                     f"{args.graceful_timeout}")
    if not 0 < args.master_port < 65536:
        parser.error(f"--master-port must be 1 to 65535, got {args.master_port}")
    return args


def _finish_calls(name: str, timeout: float) -> None:
    """Let the calls being served finish and reply (at most `timeout` seconds), taking
    no new ones; those cut short get an error reply, and are named."""
    from actors.rpc import state

    actor = state.current_agent().actor
    say("worker", f"{name} stops: finishing the calls it serves (at most {timeout:g} s)",
        sys.stdout)
    cut = actor.finish_serving(timeout)
    if not cut:
        return
    called = sorted(_called(msg) for msg in cut)
    log.warning("worker_calls_cut_short", name=name, calls=called)
    say("worker", f"{name} stopped {len(cut)} call(s) before they finished: "
        f"{', '.join(called)}", sys.stdout)
    for msg in cut:
        actor.reply_error(msg, ActorStoppedError(
            f"worker {name} stopped before the call finished (--graceful-timeout {timeout:g} s)"))


def _called(msg: Message) -> str:
    """What a request calls: a named function's name, a pickled call's function, or the
    request's kind."""
    payload = msg.payload
    if isinstance(payload, dict) and isinstance(payload.get("fn"), str):
        return payload["fn"]
    if msg.kind in CALLS and isinstance(payload, tuple) and payload:
        return str(describe_callable(payload[0]))
    return kind_name(msg.kind)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    import actors

    name = args.name or f"worker{args.rank}"
    for module in args.modules:
        importlib.import_module(module)
    stop = threading.Event()
    if args.serve_forever:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
    log.info("worker_starting", name=name, rank=args.rank, world_size=args.world_size,
             master=f"{args.master_addr}:{args.master_port}")
    actors.init_rpc(name, args.rank, args.world_size,
                    init_method=f"tcp://{args.master_addr}:{args.master_port}",
                    timeout=args.timeout, num_worker_threads=args.num_worker_threads,
                    allow_pickle=not args.no_pickle)
    address = actors.get_worker_info().address
    log.info("worker_serving", name=name, address=address, safe_mode=args.no_pickle,
             exposed=actors.exposed_names())
    say("worker", f"{name} (rank {args.rank} of {args.world_size}) serves at {address}; "
        f"actors.ExposedClient({address!r}) calls its exposed functions", sys.stdout)
    if args.serve_forever:
        while not stop.wait(3600):
            pass
        _finish_calls(name, args.graceful_timeout)
    actors.shutdown(graceful=not args.serve_forever)
    log.info("worker_done", name=name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
