"""Forming and ending this process's default group, and making subgroups.

`init_process_group` follows torch's path: an init method (``env://`` by default,
``tcp://``, ``file://``) or an explicit store → every rank publishes its transport
address and routing identity under ``pg/<n>/`` → every rank connects to every
other. `n` counts the process's initializations, so a group formed again after
`destroy_process_group` uses fresh keys. A process may hold an RPC world at the same
time: they share the ``env://`` store server (a master `TCPStore` on a port this
process already serves joins that server, as torch's multi-tenant stores do).
"""
from __future__ import annotations

import itertools
import os
import threading
import time
from datetime import timedelta
from typing import Any, List, Optional, Sequence, Tuple, Union

from actors.debug.directory import publish
from actors.network import bind_host, workers_on_host
from actors.runtime.introspection import signals
from actors.runtime.process import at_exit
from actors.runtime.process.log import get_logger
from actors.runtime.process.tuning import keep_freed_memory, share_cores
from store.agreement import Belief, agree, generation
from store.base import Store, to_seconds
from store.errors import StoreConnectionError, StoreTimeoutError

from .errors import DistError
from .group import ProcessGroup
from .transport import Transport

log = get_logger(__name__)

DEFAULT_TIMEOUT = timedelta(minutes=30)
# How many times a rank that lost its store connection while forming the default group
# starts over (see `_rendezvous_and_form`); once is what a restarted master needs.
STORE_LOST_RETRIES = 2
_BACKENDS = ("zmq", "gloo")  # "gloo": torch scripts run unchanged on this backend


class _World:
    """The default group, its transport, the store and the subgroups made so far."""

    def __init__(self, store: Store, owns_store: bool, group: ProcessGroup):
        self.store, self.owns_store, self.group = store, owns_store, group
        self.subgroups: List[ProcessGroup] = []
        self.next_group = itertools.count(1)


_lock = threading.Lock()
_world: Optional[_World] = None


def init_process_group(backend: Optional[str] = None, init_method: Optional[str] = None,
                       timeout: Union[timedelta, float, None] = None, world_size: int = -1,
                       rank: int = -1, store: Optional[Store] = None, group_name: str = "",
                       pg_options: Any = None) -> None:
    """Join the default process group (torch's signature; `group_name` and `pg_options`
    are accepted and ignored). DistError if one is already initialized. As `init_rpc`,
    it tunes the allocator and shares the host's cores among the ranks' BLAS threads
    (see `actors.runtime.process.tuning`)."""
    global _world
    if backend is not None and str(backend).lower() not in _BACKENDS:
        raise ValueError(f"backend {backend!r} is not available; use 'zmq' (or 'gloo', "
                         f"which names the same backend)")
    seconds = to_seconds(DEFAULT_TIMEOUT if timeout is None else timeout, "timeout")
    keep_freed_memory()
    signals.install()  # from here: a process stuck waiting for the others dumps too
    with _lock:
        if _world is not None:
            raise DistError("the default process group is already initialized; call "
                            "destroy_process_group() first")
        if store is None:
            if rank == -1 and "RANK" in os.environ and init_method in (None, "env://"):
                rank = int(os.environ["RANK"])
            store, rank, world_size, group = _rendezvous_and_form(
                init_method or "env://", rank, world_size, seconds)
            owns_store = True
        else:
            if init_method is not None:
                raise ValueError("init_method and store are mutually exclusive")
            group = _checked_form(store, rank, world_size, seconds, owns_store=False)
            owns_store = False
        _world = _World(store, owns_store, group)
    at_exit.on_exit(_leave_at_exit)
    log.info("process_group_initialized", rank=rank, world_size=world_size)


def _rendezvous_and_form(init_method: str, rank: int, world_size: int, timeout: float
                         ) -> Tuple[Store, int, int, ProcessGroup]:
    """(store, rank, world size, group): the group formed over the store of
    `init_method`'s rendezvous.

    A rank whose store connection is lost before the group formed starts over with a
    new one, up to STORE_LOST_RETRIES times: the master of the previous group closes
    that group's store when it destroys it, and a rank that destroyed its own first and
    called init_process_group again may have reached that store just before; the
    master opens the next one on the same port.
    """
    from store import rendezvous

    deadline = time.monotonic() + timeout

    def attempt() -> Tuple[Store, int, int, ProcessGroup]:
        left = max(0.0, deadline - time.monotonic())
        store, rank_, size = next(rendezvous(init_method, rank, world_size, timeout=left,
                                             wait_for_workers=False))
        return store, rank_, size, _checked_form(store, rank_, size, left, owns_store=True)

    for retry in range(1, STORE_LOST_RETRIES + 1):
        try:
            return attempt()
        except StoreConnectionError as exc:
            if time.monotonic() >= deadline:
                raise
            log.info("process_group_store_lost", attempt=retry, error=str(exc))
    return attempt()


def _checked_form(store: Store, rank: int, world_size: int, timeout: float,
                  owns_store: bool) -> ProcessGroup:
    """The group formed over `store`, once `rank` and `world_size` are checked; the store
    closed on failure if `owns_store`."""
    if not 0 <= rank < world_size:
        raise ValueError(f"init_process_group needs 0 <= rank < world_size, got "
                         f"rank={rank}, world_size={world_size}")
    try:
        return _form(store, rank, world_size, timeout)
    except BaseException:
        if owns_store:
            store.close()
        raise


def _leave_at_exit(deadline: float) -> None:
    """At a normal exit without `destroy_process_group`, tell the peers this rank leaves
    (after everything it sent), so that they fail only waits for its messages."""
    global _world
    with _lock:
        world, _world = _world, None
    if world is not None:
        world.group.transport.close(max(0.0, deadline - time.monotonic()))


def _form(store: Store, rank: int, world_size: int, timeout: float) -> ProcessGroup:
    from store import PrefixStore

    formation = generation(PrefixStore('pg', store), world_size)
    keys = PrefixStore(f"pg/{formation}", store)
    agree(PrefixStore("agreement", keys), Belief(rank, world_size), timeout,
          lambda message: DistError(f"init_process_group: {message}"),
          lambda missing: _not_assembled(timeout, missing, formation),
          label=f"init_process_group of rank {rank}")
    return form_group(keys, rank, world_size, timeout)


def form_group(keys: Store, rank: int, world_size: int, timeout: float) -> ProcessGroup:
    """A group of its own transport over `keys`, a namespace of the store that no other
    formation uses: every member publishes its address there and connects to all.

    Not the default group: the caller owns it (`destroy()`, then `transport.close()`).
    This is how a fault-tolerant job forms a new group over the survivors in place.
    """
    transport = Transport(rank, bind_host(keys))
    try:
        # The identity first: a rank's address tells the others that both are there.
        keys.set(f"identities/{rank}", transport.identity)
        keys.set(f"addresses/{rank}", transport.address)
        wanted = [f"addresses/{r}" for r in range(world_size)]
        try:
            keys.wait(wanted, timeout)
        except StoreTimeoutError:
            raise DistError(_not_assembled(timeout, [
                r for r in range(world_size) if not keys.check([wanted[r]])])) from None
        addresses = [a.decode() for a in keys.multi_get(wanted)]
        identities = keys.multi_get([f"identities/{r}" for r in range(world_size)])
        transport.connect(addresses, identities, timeout)
    except BaseException:
        transport.close()
        raise
    withdraw = publish(keys, "pg", transport.serve_introspection(), None, rank)
    share_cores(workers_on_host(addresses, transport.address))
    group = ProcessGroup(transport, "0", range(world_size), timeout)
    group.on_destroy(withdraw)
    return group


def _not_assembled(timeout: float, missing: List[int], formation: int) -> str:
    text = (f"the process group did not assemble within {timeout:g}s: "
            + ", ".join(f"rank {r}" for r in missing) + " never joined")
    if formation:  # a late claimant of a world that formed opens the next formation
        text += (" (a world of this size formed on this store before: this process may "
                 "have come too late for it, or claimed a rank taken there)")
    return text


def destroy_process_group(group: Optional[ProcessGroup] = None) -> None:
    """End `group`, or the default group with every subgroup and its connections."""
    global _world
    with _lock:
        world = _world
        if world is None:
            raise DistError("the default process group is not initialized")
        if group is not None and group is not world.group:
            group.destroy()
            if group in world.subgroups:
                world.subgroups.remove(group)
            return
        _world = None
    for sub in world.subgroups:
        sub.destroy()
    world.group.destroy()
    world.group.transport.close()
    if world.owns_store:
        world.store.close()
    log.info("process_group_destroyed", rank=world.group.rank)


def new_group(ranks: Optional[Sequence[int]] = None, timeout: Union[timedelta, float, None]
              = None, backend: Optional[str] = None, pg_options: Any = None) -> ProcessGroup:
    """A group of global `ranks` (all ranks when None). Every rank of the default group
    calls it, with the same ranks, in the same order; a non-member gets a group whose
    `rank` is -1 and whose collectives raise."""
    world = current()
    default = world.group
    members = sorted(set(range(default.size) if ranks is None else ranks))
    for r in members:
        if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < default.size:
            raise ValueError(f"new_group: rank {r!r} is not in the default group of "
                             f"{default.size}")
    seconds = default.timeout if timeout is None else to_seconds(timeout, "timeout")
    group = ProcessGroup(default.transport, str(next(world.next_group)), members, seconds)
    world.subgroups.append(group)
    return group


def current() -> _World:
    world = _world
    if world is None:
        raise DistError("the default process group is not initialized; call "
                        "init_process_group() first")
    return world


def group_or_default(group: Optional[ProcessGroup]) -> ProcessGroup:
    return current().group if group is None else group


def is_initialized() -> bool:
    """Whether this process has a default process group (`init_process_group` ran, not yet
    destroyed)."""
    return _world is not None
