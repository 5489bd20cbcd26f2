"""Asking every process of a job what it is doing: find them in the store, ask at once.

One client-only actor sends STATUS or STACKS (JSON) to every published address and
waits for all answers together, each bounded by `timeout`: a process whose address
refuses the connection is dead, one that does not answer in time hangs (a stopped
process still accepts TCP connections, and never answers).
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from actors.runtime import Actor, Kind, PeerLostError
from actors.runtime.concurrency.futures import FutureTimeoutError
from store.base import Store
from store.tcp_store import TCPStore

from . import directory
from .diagnosis import DEAD, HUNG, OK, Probe

DEFAULT_TIMEOUT = 2.0
# The least time given to reaching the job's store (seconds): a short --timeout is
# for the processes' answers.
STORE_CONNECT_TIMEOUT = 3.0
ETCD = "etcd://"


def parse_store(spec: str) -> Tuple[str, int, Optional[str]]:
    """``HOST:PORT`` → (host, port, None); ``etcd://HOST:PORT[/PREFIX]`` → (host, port,
    prefix, by default ``/actorgrad`` as for the etcd:// init method); ValueError says
    what is wrong."""
    etcd = spec.startswith(ETCD)
    address, _, prefix = spec[len(ETCD):].partition("/") if etcd else (spec, "", "")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--store takes HOST:PORT (the job's MASTER_ADDR:MASTER_PORT) or "
                         f"etcd://HOST:PORT/PREFIX (the job's etcd:// init method), "
                         f"got {spec!r}")
    if not etcd:
        return host, int(port), None
    return host, int(port), "/" + (prefix.strip("/") or "actorgrad")


def open_store(spec: str, timeout: float = STORE_CONNECT_TIMEOUT) -> Store:
    """A client of the job's store at ``HOST:PORT`` (its TCPStore) or
    ``etcd://HOST:PORT/PREFIX`` (its keys on an etcd server), reached within `timeout`
    (STORE_CONNECT_TIMEOUT at least); given the launcher's rendezvous store, of the
    workers' store its latest round names."""
    timeout = max(timeout, STORE_CONNECT_TIMEOUT)
    store = _client(spec, timeout)
    try:
        workers = directory.workers_store(store)
    except Exception:
        store.close()
        raise
    if workers is None:
        return store
    store.close()
    return _client(workers, timeout)


def _client(spec: str, timeout: float) -> Store:
    host, port, prefix = parse_store(spec)
    if prefix is None:
        return TCPStore(host, port, is_master=False, timeout=timeout)
    from store.etcd import EtcdStore  # lazily: only an etcd job needs the etcd client

    return EtcdStore(f"{host}:{port}", prefix, timeout=timeout)


def ask(entries: Sequence[Dict[str, Any]], kind: int = Kind.STATUS,
        timeout: float = DEFAULT_TIMEOUT) -> List[Probe]:
    """Ask each entry's process for `kind`; one `Probe` each, in the entries' order."""
    client = Actor(None, name="actorgrad-debug").start()
    try:
        futures = [client.request(entry["address"], kind, None, timeout, json=True)
                   for entry in entries]
        deadline = time.monotonic() + timeout + 0.5
        probes = []
        for entry, future in zip(entries, futures):
            try:
                answer = future.wait(max(0.0, deadline - time.monotonic()))
                probes.append(Probe(entry.get("rank"), OK, answer))
            except PeerLostError as error:
                probes.append(Probe(entry.get("rank"), DEAD, None, error.reason))
            except (TimeoutError, FutureTimeoutError):
                probes.append(Probe(entry.get("rank"), HUNG, None,
                                    f"no answer within {timeout:g} s"))
            except Exception as error:  # noqa: BLE001 - one odd process must not stop the rest
                probes.append(Probe(entry.get("rank"), DEAD, None,
                                    f"{type(error).__name__}: {error}"))
        return probes
    finally:
        client.stop(0.5, deliver=False)


def ask_job(store: Any, kind: int = Kind.STATUS, timeout: float = DEFAULT_TIMEOUT,
            rank: Optional[int] = None) -> List[Tuple[Dict[str, Any], Probe]]:
    """Every process published in `store` (only `rank`'s, if given) with its answer."""
    entries = directory.entries(store)
    if rank is not None:
        entries = [entry for entry in entries if entry.get("rank") == rank]
    return list(zip(entries, ask(entries, kind, timeout)))
