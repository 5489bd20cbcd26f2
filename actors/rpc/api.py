"""The functions users call: init_rpc, rpc_sync, rpc_async, remote, shutdown, ..."""
from __future__ import annotations

import functools
import operator
import os
from datetime import timedelta
from typing import Any, Callable, Optional, Union

from actors.network import bind_host
from actors.runtime import Future
from actors.runtime.introspection import signals
from actors.runtime.protocol import serialization
from actors.runtime.process.log import get_logger
from actors.runtime.process.tuning import keep_freed_memory, share_cores
from store.base import Store, to_seconds

from . import state
from .agent import INIT_TIMEOUT, RpcAgent
from .directory import Destination, WorkerInfo
from .errors import RpcError
from .rref import RRef, create_remote
from .options import TensorPipeRpcBackendOptions, check_backend
from .timeouts import call_timeout, shutdown_timeout

log = get_logger(__name__)

Timeout = Union[float, int, timedelta, None]


def init_rpc(name: Optional[str] = None, rank: int = -1, world_size: Optional[int] = None,
             init_method: Optional[str] = None, store: Optional[Store] = None,
             timeout: Timeout = 60.0, num_worker_threads: int = 16, *,
             backend: Any = None,
             rpc_backend_options: Optional[TensorPipeRpcBackendOptions] = None,
             allow_pickle: bool = True) -> None:
    """Join an RPC world of `world_size` workers as `name` with `rank`.

    torch's keywords work too: `backend` (`BackendType.TENSORPIPE`, the one there is)
    and `rpc_backend_options`, whose `rpc_timeout`, `num_worker_threads` and
    `init_method` take the place of `timeout`, `num_worker_threads` and `init_method`.

    Workers find each other through `store`, or through the store that `init_method`
    (default ``env://``) yields. Rank and world size default to the ``RANK`` and
    ``WORLD_SIZE`` environment variables, and the name to ``worker<rank>``, so that a
    process started by ``python -m actors.launch`` can call ``init_rpc()`` alone.
    `timeout` is the calls' default (0: none) and bounds joining; with 0, joining
    may take 30 minutes, as torch's rendezvous allows. RpcInitError names a duplicate
    name or rank, or the ranks that never joined.
    With ``allow_pickle=False`` the process runs in safe mode until shutdown: it
    never loads a pickle from the wire, serves only named calls (`expose`) and JSON
    store requests, and answers a pickled request with a SafeModeError; its own
    calls of Python functions raise SafeModeError.
    Workers keep freed memory for reuse and share the host's cores among their BLAS
    threads (see `actors.runtime.process.tuning`).
    """
    if state.agent_or_none() is not None:
        raise RpcError("RPC is already initialized in this process; call shutdown() first")
    check_backend(backend)
    _check_positions(rank, world_size)
    if rpc_backend_options is not None:
        timeout = rpc_backend_options.rpc_timeout
        num_worker_threads = rpc_backend_options.num_worker_threads
        init_method = init_method or rpc_backend_options.init_method
    keep_freed_memory()
    signals.install()  # from here: a process stuck waiting for the others dumps too
    if not allow_pickle:
        serialization.allow_pickle(False)
    seconds = to_seconds(timeout, "timeout")
    if rank == -1 and "RANK" in os.environ:
        rank = int(os.environ["RANK"])
    if world_size is None and "WORLD_SIZE" in os.environ:
        world_size = int(os.environ["WORLD_SIZE"])
    if store is None:
        from store import rendezvous

        # join_world waits for the others itself, with errors that name who is missing.
        store, rank, world_size = next(rendezvous(
            init_method or "env://", rank, -1 if world_size is None else world_size,
            timeout=seconds or INIT_TIMEOUT, wait_for_workers=False))
        owns_store = True
    else:
        owns_store = False
    if world_size is None or rank < 0 or not 0 <= rank < world_size:
        raise ValueError(f"init_rpc needs 0 <= rank < world_size, got rank={rank}, "
                         f"world_size={world_size}")
    name = f"worker{rank}" if name is None else name
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    from store import PrefixStore

    agent = RpcAgent(name, rank, world_size, PrefixStore("rpc", store), bind_host(store),
                     seconds, num_worker_threads)
    agent.owned_store = store if owns_store else None
    state.set_agent(agent)
    try:
        agent.join()
    except BaseException:
        state.set_agent(None)
        serialization.allow_pickle(True)
        if owns_store:
            store.close()
        raise
    agent.publish_introspection(store)
    share_cores(agent.directory.workers_on_host(agent.actor.address))


def _check_positions(rank: Any, world_size: Any) -> None:
    """TypeError for a rank or world size that is no int: most likely torch's positional
    order (name, backend, rank, world_size), which differs from ours after the name."""
    for what, value in (("rank", rank), ("world_size", world_size)):
        if value is not None and (isinstance(value, bool) or not _is_integer(value)):
            raise TypeError(f"init_rpc's {what} must be an int, got {value!r}; after the "
                            f"name, its positional order is rank, world_size (torch's: "
                            f"backend, rank, world_size): pass them by keyword")


def _is_integer(value: Any) -> bool:
    try:
        operator.index(value)  # an int, or a numpy integer
    except TypeError:
        return False
    return True


def shutdown(graceful: bool = True, timeout: Timeout = None) -> None:
    """Leave the RPC world.

    With `graceful`, a barrier: returns once every worker has called shutdown and all
    work addressed to any of them is done; `timeout` bounds each of its waits (None,
    0 as torch's default, a negative number or infinity: no limit). Otherwise leave
    at once; pending calls fail.
    """
    agent = state.current_agent()
    try:
        agent.leave(graceful, shutdown_timeout(timeout))
    finally:
        state.set_agent(None)
        if agent.owned_store is not None:
            agent.owned_store.close()
        serialization.allow_pickle(True)


def get_worker_info(name: Optional[str] = None, *, worker_name: Optional[str] = None
                    ) -> WorkerInfo:
    """The WorkerInfo of worker `name` (torch's keyword: `worker_name`), or of this worker."""
    agent = state.current_agent()
    name = worker_name if name is None else name
    return agent.info if name is None else agent.directory.resolve(name)


def get_rpc_timeout() -> float:
    """The world's default call timeout in seconds (0: none), as set at init_rpc."""
    return state.current_agent().timeout or 0.0


def is_available() -> bool:
    """Whether RPC can be used in this build (always: torch's name)."""
    return True


def rpc_async(to: Destination, fn: Callable, args: Optional[tuple] = (),
              kwargs: Optional[dict] = None,
              timeout: Timeout = None) -> Future:
    """Run `fn(*args, **kwargs)` on `to`; a Future of its value.

    `timeout` in seconds or a timedelta; None or negative (`UNSET_RPC_TIMEOUT`, as in
    torch) is init_rpc's, 0 none. A dead worker fails the future with WorkerLostError
    (a ConnectionError and a RuntimeError); a timeout raises a TimeoutError that is a
    RuntimeError too; a remote exception is raised again with its type and
    `remote_traceback`.
    """
    return state.current_agent().call(to, fn, tuple(args or ()), kwargs or {},
                                      call_timeout(timeout))


def rpc_sync(to: Destination, fn: Callable, args: Optional[tuple] = (),
             kwargs: Optional[dict] = None,
             timeout: Timeout = None) -> Any:
    """Run `fn(*args, **kwargs)` on `to` and return its value (see rpc_async)."""
    return state.current_agent().call_sync(to, fn, tuple(args or ()), kwargs or {},
                                           call_timeout(timeout))


def remote(to: Destination, fn: Callable, args: Optional[tuple] = (),
           kwargs: Optional[dict] = None,
           timeout: Timeout = None) -> RRef:
    """Run `fn(*args, **kwargs)` on `to`, which keeps the value; an RRef to it."""
    return create_remote(to, fn, tuple(args or ()), kwargs or {}, call_timeout(timeout))


def async_execution(fn: Callable) -> Callable:
    """Mark `fn` as returning an `actors.Future`: the callee replies when it completes.

    The worker thread is free while the future is pending, so chains of nested
    calls complete even with one worker thread per worker.
    """
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    wrapper._async_execution = True
    return wrapper


