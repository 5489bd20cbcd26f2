"""``python -m actors.launch``: parse the options, open the store, run the agent, report.

Exit status: 0 when every worker succeeded; 1 with a summary on stderr naming the
failed rank, its exit code or signal and the tail of its error; 2 for a usage error
(a bad option, a script that does not exist: found before any worker starts); 128+N
after signal N (SIGINT, SIGTERM, SIGHUP, SIGQUIT), once every worker is stopped.
Progress goes to stderr as ``launch: ...`` lines (`actors.launch.progress`).
"""
from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
from typing import Optional, Sequence

from actors.launch.agent import ElasticAgent
from actors.launch.config import LaunchConfig, parse_args
from actors.launch.progress import Progress
from actors.runtime.process.waits import reported_by
from actors.runtime.process.tuning import core_share
from store.base import Store
from store.elastic.registry import open_rendezvous_store
from store.errors import StoreError

_STORE_TIMEOUT = 60.0
# torchrun's: each stops the workers (and what they started) and the agent, which
# leaves the rendezvous open for the other nodes. SIGHUP comes with a closed terminal
# or ssh session, SIGQUIT with Ctrl-\.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


class SignalReceived(Exception):
    """Raised in the main thread by a stop signal, so any wait (a rendezvous too) ends."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def open_store(config: LaunchConfig) -> Store:
    """Host the rendezvous store on a free port when standalone, else as `--rdzv-endpoint` says
    (with an etcd backend: a client of the etcd server there, whose liveness keys live
    --rdzv-conf lease_ttl seconds after a crash). Its timeout is the --rdzv-conf
    read_timeout."""
    timeout = config.conf("read_timeout", _STORE_TIMEOUT)
    if config.rdzv_backend is not None:
        from store.etcd import EtcdStore
        from store.etcd.store import EPHEMERAL_TTL

        return EtcdStore(f"{config.rdzv_host}:{config.rdzv_port}", timeout=timeout,
                         ephemeral_ttl=int(config.conf("lease_ttl", EPHEMERAL_TTL)))
    if config.standalone or config.rdzv_port == 0:
        from store.tcp_store import TCPStore

        store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                         timeout=timeout)
        config.rdzv_port = store.port
        return store
    is_host = (config.node_rank == 0) if config.static else None
    return open_rendezvous_store(config.rdzv_host, config.rdzv_port, timeout, is_host)


def output_dir(config: LaunchConfig) -> Optional[str]:
    """This agent's new folder `<run id>_<random>`: under --log-dir, or a temporary one
    for worker output files. Each agent has its own, as with torchrun, so that agents
    sharing a --log-dir (nodes on one host, or runs under one run id) never write into
    each other's files."""
    if config.output.log_dir is not None:
        os.makedirs(config.output.log_dir, exist_ok=True)
        return tempfile.mkdtemp(prefix=f"{config.run_id}_", dir=config.output.log_dir)
    if config.output.any_file():
        return tempfile.mkdtemp(prefix=f"actorrun_{config.run_id}_")
    return None


def describe_launch(config: LaunchConfig, log_dir: Optional[str] = None) -> str:
    """The first progress line: how many workers of what, where the store is, and the
    folder of this agent's files, if any."""
    script = os.path.basename(config.entry[0]) if config.entry else "?"
    text = (f"{config.nproc_per_node} worker{'s' if config.nproc_per_node != 1 else ''} "
            f"of {script}, store {config.rdzv_host}:{config.rdzv_port}")
    if config.max_nodes > 1:
        nodes = (str(config.max_nodes) if config.min_nodes == config.max_nodes
                 else f"{config.min_nodes}:{config.max_nodes}")
        text += f", {nodes} nodes, run id {config.run_id}"
    if log_dir is not None:
        text += f", files in {log_dir}"
    return text


def run() -> None:
    """The `actorrun` console script."""
    sys.exit(main(prog="actorrun"))


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m actors.launch") -> int:
    """Launch as `argv` says; the exit status the module docstring lists."""
    config = parse_args(argv, prog)
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        for other in STOP_SIGNALS:
            signal.signal(other, signal.SIG_IGN)  # the cleanup must not be interrupted
        stop.set()
        raise SignalReceived(signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)
    try:
        with reported_by(Progress().waiting):  # a store host that is not up yet
            store = open_store(config)
    except SignalReceived as exc:
        return 128 + exc.signum
    except (StoreError, OSError) as exc:
        Progress().tell(f"cannot reach the rendezvous store at {config.rdzv_host}:"
                        f"{config.rdzv_port}: {exc}", "agent_store_unreachable", "error",
                        error=str(exc))
        return 1
    log_dir = output_dir(config)
    progress = Progress(None if config.output.log_dir is None
                        else os.path.join(log_dir, "events.log"))
    progress.tell(describe_launch(config, log_dir), "agent_started", run_id=config.run_id,
                  nnodes=f"{config.min_nodes}:{config.max_nodes}",
                  nproc_per_node=config.nproc_per_node,
                  endpoint=f"{config.rdzv_host}:{config.rdzv_port}", entry=config.entry,
                  rendezvous="static" if config.static else "dynamic", log_dir=log_dir)
    if config.set_omp_threads and core_share(config.nproc_per_node) > 1:
        # Only when it changes something: each worker would otherwise take its share.
        progress.tell(f"OMP_NUM_THREADS=1 for each worker (it would use "
                      f"{core_share(config.nproc_per_node)} threads); set OMP_NUM_THREADS "
                      f"to choose", "omp_num_threads_set", value=1)
    try:
        result = ElasticAgent(config, store, stop, log_dir, progress).run()
    except SignalReceived as exc:
        progress.tell(f"stopped by {exc}; every worker is stopped", "agent_stopped_by_signal",
                      run_id=config.run_id, signal=str(exc))
        return 128 + exc.signum
    finally:
        store.close()
    if result.exitcode != 0:
        progress.tell(result.message, "agent_failed", "error", run_id=config.run_id)
    return result.exitcode
