"""`Leaving`: the shutdown half of `RpcAgent`, which leaves the world.

A graceful leave meets every worker at store barriers once its work is done, and
goes on without the workers that any worker found lost: whoever found one lost
writes its rank in the store (``rpc/lost``), where the others' barriers read it.
"""
from __future__ import annotations

import time
from typing import Optional, Set

from actors.runtime.introspection import status
from actors.runtime.process.log import get_logger
from actors.runtime.protocol import shared_buffers
from store.barrier import add_member, arrive, barrier, members_at, wait_open
from store.errors import StoreConnectionError

from . import hooks as hook_registry

log = get_logger(__name__)

LOST_KEY = "rpc/lost"  # ranks that workers found lost, "1,3,"
STORE_HOST_GRACE = 5.0  # seconds; see `Leaving.leave`


class Leaving:
    """How `RpcAgent` leaves; it uses the agent's actor, store, directory, call count
    and the workers it found lost."""

    def _lost_ranks(self) -> Set[int]:
        """The ranks any worker of the world found lost, this worker's written down first
        (in the store's ``rpc/lost``, for the others' shutdown barriers)."""
        for name in set(self._lost) - self._lost_written:
            add_member(self.store, LOST_KEY, self.directory.resolve(name).id)
            self._lost_written.add(name)
        return members_at(self.store, LOST_KEY)

    def wait_idle(self, timeout: Optional[float]) -> bool:
        """Wait until no call sent from here is outstanding."""
        with self._idle:
            self._idle_waiters += 1
            try:
                return self._idle.wait_for(lambda: self._outstanding == 0, timeout)
            finally:
                self._idle_waiters -= 1

    def _arrive_last(self) -> None:
        """Arrive at the last shutdown barrier, this worker's last store call.

        The store host closes the store once every worker is in, and two workers that
        arrive together may both see it complete and open it: the host may then close
        the store under the other's last call. Nothing depends on that call any more,
        so a store lost there ends nothing.
        """
        try:
            arrive(self.store, "barriers/shutdown/left", self.world_size, self.rank)
        except StoreConnectionError as exc:
            if self.rank == 0:
                raise
            log.info("rpc_store_closed_at_last_barrier", worker=self.name, error=str(exc))

    def leave(self, graceful: bool, timeout: Optional[float]) -> None:
        """Leave the world: with `graceful`, a barrier once every worker's work is done.

        Workers that any worker found lost are not waited for: the others leave
        without them, and say so in a warning.
        """
        if graceful:
            without: Set[int] = set()  # ranks a barrier opened without
            # Two rounds: work that arrived while others drained (nested calls) is
            # finished before the second barrier.
            for round_ in ("drained", "drained-again"):
                self.wait_idle(timeout)
                # While every peer still waits at the barrier, it can confirm what it
                # was sent one way (RRef deletions, context releases).
                self.actor.deliver_sent(timeout, "shutdown")
                without |= barrier(
                    self.store, f"barriers/shutdown/{round_}", self.world_size, timeout,
                    label=f"rpc shutdown of {self.name!r}", members="workers",
                    member=self.rank, lost=self._lost_ranks)
                self._leaving = True  # every worker is in shutdown: departures are expected
            self.wait_idle(timeout)
            self._withdraw()  # every call is done, and the store is certainly up
            # Rank 0 may host the store: it closes only after everyone's last store call,
            # and gives a worker found lost STORE_HOST_GRACE to come all the same: one
            # only slow to answer (a loaded host) would otherwise lose the store.
            self._arrive_last()
            if self.rank == 0:
                since = time.monotonic()
                without |= wait_open(
                    self.store, "barriers/shutdown/left", timeout, self.world_size,
                    f"rpc shutdown of {self.name!r}: leaving", "workers",
                    lost=lambda: (self._lost_ranks() if time.monotonic() - since
                                  >= STORE_HOST_GRACE else set()))
            if without:
                log.warning("rpc_shutdown_without_lost_workers", worker=self.name,
                            lost=[self.directory.resolve(rank).name for rank in sorted(without)])
        self._leaving = True
        status.remove_section("rpc", self._status)
        self.actor.stop(deliver=not graceful)  # graceful: delivered before the barriers
        for name, hook in hook_registry.hooks():
            try:
                hook.world_left()
            except Exception:  # noqa: BLE001 - leaving must finish: release the rest
                log.exception("rpc_hook_world_left_failed", hook=name)
        for channel in self._channels.values():
            channel.close()
        shared_buffers.BLOCKS.release()
        log.info("rpc_worker_left", worker=self.name, graceful=graceful)
