"""The elastic agent: rendezvous, run the node's workers, restart them, report the end.

torch's `SimpleElasticAgent._invoke_run`, on our store: after each rendezvous round
the agent starts its workers with their ranks; then every `monitor_interval` it
looks at them. A failed worker stops the group and costs one restart (re-rendezvous
and start again) until `max_restarts` are used; nodes waiting to join make a
healthy group restart too, for free, to take them in (a node waits only while the
round has room: a newcomer, or a peer that restarted after its own worker failed).
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional

from actors.launch.config import LaunchConfig
from actors.launch.progress import Progress
from actors.launch.workers import GroupState, WorkerFailure, WorkerGroup
from actors.runtime.introspection.recorder import DIR_VARIABLE
from actors.runtime.introspection.status import MEMBERS_VARIABLE, ROUND_VARIABLE
from actors.runtime.process.waits import reported_by
from store.barrier import barrier
from store.base import Store
from store.errors import StoreError
from store.elastic import (EtcdRendezvousBackend, RendezvousError, RendezvousInfo,
                           RendezvousParameters, RendezvousStoreInfo, StaticRendezvousHandler,
                           StoreRendezvousBackend, create_handler)

# host:port of the job's store (the rendezvous store), for engine.ft's Manager.
JOB_STORE_VARIABLE = "ACTORGRAD_JOB_STORE"
FLIGHT_RECORDER_DIR = DIR_VARIABLE
# How long the other workers of a group where one failed may take to end on their own
# (they fail at their next call to the lost rank, and write their flight-recorder files
# as they exit) before they are sent SIGTERM; torchrun sends it at once.
FAILURE_SETTLE = 2.0


@dataclass
class RunResult:
    exitcode: int
    failure: Optional[WorkerFailure] = None
    message: str = ""


class ElasticAgent:
    """One node's agent over `store` (which the launcher opened, and closes)."""

    def __init__(self, config: LaunchConfig, store: Store, stop: threading.Event,
                 log_dir: Optional[str] = None, progress: Optional[Progress] = None):
        self._config = config
        self._progress = progress or Progress()
        self._store = store
        self._stop = stop
        self._log_dir = log_dir
        self.handler = rendezvous_handler(config, store)
        self._group: Optional[WorkerGroup] = None
        self._restarts_left = config.max_restarts
        self._round: Optional[RendezvousInfo] = None  # this node's place in the last round

    @property
    def restart_count(self) -> int:
        return self._config.max_restarts - self._restarts_left

    def run(self) -> RunResult:
        """Run until the workers succeed, restarts run out, or `stop` is set (by a signal:
        then this node leaves the rendezvous open for the others)."""
        try:
            return self._invoke_run()
        except (RendezvousError, StoreError) as exc:
            self._progress.tell(None, "agent_rendezvous_failed", "error",
                                run_id=self._config.run_id, error=str(exc))
            return RunResult(1, message=f"rendezvous failed: {type(exc).__name__}: {exc}")
        finally:
            self._stop_workers()
            if self._stop.is_set():
                # A signal (a preempted node) ends this node only: closing would end the
                # job for every node, where torchrun's survivors re-form without it.
                self.handler.leave()
            elif self.handler.shutdown() and getattr(self._store, "is_master", False):
                self._keep_store_until_nodes_leave()

    def _keep_store_until_nodes_leave(self) -> None:
        """The store host's last act: let the other nodes read the closed rendezvous (a
        node on the wait list then fails with RendezvousClosedError, not a lost store)."""
        try:
            connected = self.handler.wait_for_nodes_to_leave()
        except (RendezvousError, StoreError) as exc:
            self._progress.tell(f"could not tell whether other nodes still use the rendezvous "
                                f"store: {exc}", "agent_store_users_unknown", "warning",
                                run_id=self._config.run_id, error=str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - the launcher's signal, raised in the wait
            if not self._stop.is_set():
                raise
            # The run's result stands: its workers had ended before the wait began.
            self._progress.tell(f"stopped waiting for the other nodes to leave the rendezvous "
                                f"store ({exc})", "agent_store_wait_stopped", "warning",
                                run_id=self._config.run_id)
            return
        if connected:
            self._progress.tell(
                f"closing the rendezvous store while {len(connected)} other node(s) still "
                f"use it: {', '.join(map(str, connected))}", "agent_store_closed_in_use",
                "warning", run_id=self._config.run_id, nodes=[str(n) for n in connected])

    def _invoke_run(self) -> RunResult:
        self._start_round()
        while not self._stop.wait(self._config.monitor_interval):
            state = self._group.poll()
            if state is GroupState.SUCCEEDED:
                count = len(self._group.workers)
                self._progress.tell(f"{count} worker{'s' if count != 1 else ''} succeeded",
                                    "agent_workers_succeeded", run_id=self._config.run_id,
                                    restarts=self.restart_count)
                self._exit_barrier()
                return RunResult(0)
            if state is GroupState.FAILED and self._config.restart_policy == "failed":
                result = self._restart_failed()
                if result is not None:
                    return result
            elif state is GroupState.FAILED:
                failure = self._group.first_failure()
                then = (f"restarting ({self._restarts_left} restart"
                        f"{'s' if self._restarts_left != 1 else ''} left)"
                        if self._restarts_left > 0 else "no restarts left")
                self._progress.tell(f"{failure.headline()}; {then}", "agent_worker_failed",
                                    "warning", run_id=self._config.run_id,
                                    rank=failure.rank, exitcode=failure.exitcode,
                                    restarts_left=self._restarts_left)
                if self._restarts_left <= 0:
                    return RunResult(1, failure, self._summary(failure))
                self._restarts_left -= 1
                self._restart("worker_failed")
            elif self._config.restart_policy != "failed" and self.handler.num_nodes_waiting():
                # A node waits only while the round has room (fewer than max_nodes
                # participants): a newcomer, or a peer that left to restart. Under the
                # in-place policy nothing re-rendezvous: a restart would cost an
                # engine.ft job every step it made (a new round is a new session).
                self._restart("nodes_waiting")
        return RunResult(1, message="stopped by a signal")

    def _restart_failed(self) -> Optional[RunResult]:
        """``--restart-policy failed``: start each failed worker again, alone, with the
        same rank and environment; the others keep running. A result once restarts
        run out."""
        for failure in self._group.failures():
            then = (f"restarting it alone ({self._restarts_left} restart"
                    f"{'s' if self._restarts_left != 1 else ''} left)"
                    if self._restarts_left > 0 else "no restarts left")
            self._progress.tell(f"{failure.headline()}; {then}", "agent_worker_failed",
                                "warning", run_id=self._config.run_id, rank=failure.rank,
                                exitcode=failure.exitcode, restarts_left=self._restarts_left,
                                policy="failed")
            if self._restarts_left <= 0:
                return RunResult(1, failure, self._summary(failure))
            self._restarts_left -= 1
            self._group.restart(failure.rank)
        return None

    def _restart(self, reason: str) -> None:
        text = "restarting the workers to take in a waiting node" \
            if reason == "nodes_waiting" else None  # a failure was told already
        self._progress.tell(text, "agent_restarting_workers", run_id=self._config.run_id,
                            reason=reason, restart_count=self.restart_count)
        self._stop_workers()
        self._start_round()

    def _start_round(self) -> None:
        with reported_by(self._progress.waiting):
            info = self.handler.next_rendezvous()
        self._round = info
        master = info.bootstrap_store_info
        envs = self._worker_envs(info, master)
        log_dir = (None if self._log_dir is None else
                   os.path.join(self._log_dir, f"attempt_{self.restart_count}"))
        self._group = WorkerGroup.start(self._config.command, envs, self._config.output,
                                        log_dir)
        ranks = [worker.rank for worker in self._group.workers]
        pids = [worker.pid for worker in self._group.workers]
        self._progress.tell(
            f"round {info.round}: node {info.rank} of {info.world_size} runs "
            f"rank{'s' if len(ranks) != 1 else ''} {_span(ranks)} of {info.world_size * len(ranks)}"
            f" (pid{'s' if len(pids) != 1 else ''} {', '.join(map(str, pids))})",
            "agent_round_started", run_id=self._config.run_id, group_rank=info.rank,
            nodes=info.world_size, restart_count=self.restart_count,
            master=f"{master.master_addr}:{master.master_port}", ranks=ranks, pids=pids)

    def _worker_envs(self, info: RendezvousInfo, master: RendezvousStoreInfo
                     ) -> List[Dict[str, str]]:
        config, k = self._config, self._config.nproc_per_node
        group_rank, nodes = info.rank, info.world_size
        restarts, world = str(self.restart_count), str(nodes * k)
        base = dict(os.environ, MASTER_ADDR=master.master_addr,
                    MASTER_PORT=str(master.master_port),
                    WORLD_SIZE=world, LOCAL_WORLD_SIZE=str(k),
                    GROUP_RANK=str(group_rank), GROUP_WORLD_SIZE=str(nodes),
                    ROLE_NAME=config.role, ROLE_WORLD_SIZE=world,
                    RESTART_COUNT=restarts, TORCHELASTIC_RESTART_COUNT=restarts,
                    MAX_RESTARTS=str(config.max_restarts),
                    TORCHELASTIC_MAX_RESTARTS=str(config.max_restarts),
                    ELASTIC_RUN_ID=config.run_id, TORCHELASTIC_RUN_ID=config.run_id,
                    PYTHONUNBUFFERED="1", **{ROUND_VARIABLE: str(info.round),
                                             MEMBERS_VARIABLE: ",".join(info.members)})
        if config.rdzv_backend is None:  # a TCPStore that outlives every worker
            base[JOB_STORE_VARIABLE] = f"{config.rdzv_host}:{config.rdzv_port}"
        if self._log_dir is not None:  # flight recorder files beside the workers' output
            base[FLIGHT_RECORDER_DIR] = self._log_dir
        if config.set_omp_threads:
            base["OMP_NUM_THREADS"] = "1"
        ranks = [str(group_rank * k + local) for local in range(k)]
        return [dict(base, RANK=rank, ROLE_RANK=rank, LOCAL_RANK=str(local))
                for local, rank in enumerate(ranks)]

    def _stop_workers(self) -> None:
        if self._group is not None:
            failed = self._group.poll() is GroupState.FAILED and not self._stop.is_set()
            self._group.stop(self._config.stop_grace, FAILURE_SETTLE if failed else 0.0)
            self._group = None

    def _exit_barrier(self) -> None:
        """Wait (bounded) for every node of the round to finish, so a store host outlives
        them. With ``--restart-policy failed`` nodes never re-rendezvous, so a node gone
        from the round is dead: the barrier opens without it."""
        info, timeout = self._round, self._config.exit_barrier_timeout
        in_place = self._config.restart_policy == "failed" and not self._config.static
        try:
            with reported_by(self._progress.waiting):
                barrier(info.store, "exit_barrier", info.world_size, timeout,
                        label="waiting for the other nodes' workers to finish",
                        members="nodes", member=info.rank if in_place else None,
                        lost=(lambda: self.handler.lost_since(info)) if in_place else None)
        except TimeoutError as exc:
            self._exit_barrier_incomplete(
                f"the other nodes' workers did not all finish within {timeout:g} s; "
                f"leaving without them", exc)
        except (OSError, RuntimeError) as exc:
            self._exit_barrier_incomplete(
                f"the exit barrier failed ({exc}); leaving without waiting for the other "
                f"nodes", exc)

    def _exit_barrier_incomplete(self, text: str, exc: BaseException) -> None:
        self._progress.tell(text, "agent_exit_barrier_incomplete", "warning",
                            run_id=self._config.run_id, error=str(exc))

    def _summary(self, failure: WorkerFailure) -> str:
        return (f"elastic run {self._config.run_id!r} failed after "
                f"{self.restart_count} restart(s) (max {self._config.max_restarts}):\n"
                + failure.describe())


def _span(ranks: List[int]) -> str:
    """`3` or `2-5` for consecutive ranks."""
    return str(ranks[0]) if len(ranks) == 1 else f"{ranks[0]}-{ranks[-1]}"


def rendezvous_handler(config: LaunchConfig, store: Store):
    """The node's rendezvous: fixed membership in static mode, else the dynamic one."""
    if config.static:
        return StaticRendezvousHandler(store, config.run_id, config.node_rank,
                                       config.max_nodes, config.conf("join_timeout", 600),
                                       config.local_addr)
    backend_name = config.rdzv_backend or "store"
    params = RendezvousParameters(backend_name, f"{config.rdzv_host}:{config.rdzv_port}",
                                  config.run_id, config.min_nodes, config.max_nodes,
                                  config.local_addr, **config.rdzv_conf)
    if config.rdzv_backend is not None:
        backend = EtcdRendezvousBackend(store, config.run_id, name=backend_name)
    else:
        backend = StoreRendezvousBackend(store, config.run_id)
    return create_handler(store, backend, params)
