"""Where a job's processes say how to reach their introspection socket: keys in its store.

Each process that joins a job through a store (`init_rpc`, `init_process_group`)
sets ``introspection/<host>/<pid>/<role>`` to a JSON object naming its address,
role, name and rank. The commands list the store's keys to find them all, from the
root store or any prefix of it. Given the launcher's rendezvous store instead (the
address it prints first), they follow its latest round to the workers' store
(`workers_store`).
"""
from __future__ import annotations

import json
import os
import socket
from typing import Any, Callable, Dict, List, Optional

from actors.runtime.introspection import signals, status
from actors.runtime.process.log import get_logger

log = get_logger(__name__)

SEGMENT = "introspection"


def publish(store: Any, role: str, address: str, name: Optional[str], rank: Optional[int]
            ) -> Callable[[], None]:
    """Tell the job's `store` where this process answers introspection (best effort);
    returns what takes the entry back when the process leaves the job cleanly, so that
    the commands do not report it dead."""
    status.set_identity(name, rank)
    signals.install()
    entry = {"address": address, "role": role, "name": name, "rank": rank,
             "pid": os.getpid(), "host": socket.gethostname()}
    key = f"{SEGMENT}/{entry['host']}/{entry['pid']}/{role}"
    try:
        store.set(key, json.dumps(entry))
    except Exception as error:  # noqa: BLE001 - introspection must never break joining
        log.warning("introspection_not_published", role=role, error=str(error))

    def withdraw() -> None:
        try:
            store.delete_key(key)
        except Exception as error:  # noqa: BLE001 - nor leaving (the store may be gone)
            log.info("introspection_not_withdrawn", role=role, error=str(error))

    return withdraw


def is_entry_key(key: str) -> bool:
    """Whether `key` (under any prefix) is a published introspection entry."""
    parts = key.split("/")
    return len(parts) >= 4 and parts[-4] == SEGMENT


def workers_store(store: Any) -> Optional[str]:
    """``HOST:PORT`` of the workers' store (their MASTER_ADDR:MASTER_PORT) that the latest
    rendezvous round in `store` names, when `store` has no entries of its own (it is a
    launcher's rendezvous store); else None."""
    keys = store.list_keys()
    if any(is_entry_key(key) for key in keys):
        return None
    rounds = []
    for key in keys:
        parts = key.split("/")
        if parts[-1] == "MASTER_ADDR" and len(parts) >= 3 and parts[-3] == "round" \
                and parts[-2].isdigit():
            rounds.append((int(parts[-2]), key[:-len("MASTER_ADDR")]))
    if not rounds:
        return None
    prefix = max(rounds)[1]
    try:
        addr, port = store.multi_get([prefix + "MASTER_ADDR", prefix + "MASTER_PORT"])
    except Exception:  # noqa: BLE001 - a round half written: nothing to follow yet
        return None
    return f"{addr.decode()}:{int(port)}"


def entries(store: Any) -> List[Dict[str, Any]]:
    """Every published entry, one per process (the RPC worker's when it has several)."""
    keys = sorted(key for key in store.list_keys() if is_entry_key(key))
    found: Dict[tuple, Dict[str, Any]] = {}
    for value in (store.multi_get(keys) if keys else []):
        try:
            entry = json.loads(value)
        except ValueError:
            continue
        process = (entry.get("host"), entry.get("pid"))
        if process not in found or entry.get("role") == "rpc":
            found[process] = entry
    return sorted(found.values(), key=lambda e: (e.get("rank") is None, e.get("rank") or 0,
                                                 e.get("name") or ""))
