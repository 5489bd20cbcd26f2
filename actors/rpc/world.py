"""Forming an RPC world through a store: registration and the directory of workers.

Keys (under the store the agent is given): ``agreement/...``, the log in which the
workers check that they agree on the world size and that names and ranks are unique
(`store.agreement`), then ``names/<name>`` → rank,
``ranks/<rank>`` → name, ``addresses/<rank>`` → mailbox address, ``scripts/<rank>`` →
the path of the script the worker runs (empty without one), ``hosts/<rank>`` → its
`host_key` (workers with the same one pass large buffers through shared memory), and
``barriers/<tag>/...`` for the shutdown barriers (`store.barrier`).
"""
from __future__ import annotations

from actors.runtime.protocol.script_refs import script_path
from actors.runtime.protocol.shared_buffers import host_key

from store.agreement import Belief, agree
from store.base import Store
from store.errors import StoreTimeoutError
from store.prefix_store import PrefixStore

from .directory import WorkerDirectory
from .errors import RpcInitError


def join_world(store: Store, name: str, rank: int, world_size: int, address: str,
               timeout: float) -> WorkerDirectory:
    """Register this worker and wait for the whole world; RpcInitError says what went wrong
    (on every worker, when the workers disagree on the world size or share a name or rank)."""
    agree(PrefixStore("agreement", store), Belief(rank, world_size, name), timeout,
          lambda message: RpcInitError(f"init_rpc: {message}"),
          lambda missing: f"the RPC world did not assemble within {timeout:g}s: ranks "
                          f"{missing} of {world_size} never joined",
          label=f"init_rpc of {name!r}")
    taken_by = store.compare_set(f"names/{name}", "", str(rank)).decode()
    if taken_by != str(rank):
        raise RpcInitError(f"duplicate worker name {name!r}: rank {taken_by} already uses it")
    owner = store.compare_set(f"ranks/{rank}", "", name).decode()
    if owner != name:
        raise RpcInitError(f"duplicate rank {rank}: worker {owner!r} already has it")
    store.multi_set([f"scripts/{rank}", f"hosts/{rank}"], [script_path() or "", host_key()])
    store.set(f"addresses/{rank}", address)
    keys = [f"addresses/{r}" for r in range(world_size)]
    try:
        store.wait(keys, timeout)
    except StoreTimeoutError:
        missing = [r for r in range(world_size) if not store.check([f"addresses/{r}"])]
        raise RpcInitError(
            f"the RPC world did not assemble within {timeout:g}s: ranks {missing} of "
            f"{world_size} never joined") from None
    names = [n.decode() for n in store.multi_get([f"ranks/{r}" for r in range(world_size)])]
    addresses = [a.decode() for a in store.multi_get(keys)]
    both = [v.decode() for v in store.multi_get(
        [f"{key}/{r}" for key in ("scripts", "hosts") for r in range(world_size)])]
    return WorkerDirectory(names, addresses, both[:world_size], both[world_size:])
