"""Open a store from a picklable spec, so spawned processes can reach the test's store.

Specs: `("hash",)` (in-process only), `("file", path)`, `("tcp", host, port)`,
`("etcd", "host:port", prefix)`.
"""
from __future__ import annotations

from typing import Tuple

from store import FileStore, HashStore, Store

SPEC_TIMEOUT = 10.0  # short enough that a broken test fails instead of hanging

StoreSpec = Tuple


def open_store(spec: StoreSpec) -> Store:
    """A new client of the store described by `spec`."""
    kind = spec[0]
    if kind == "hash":
        return HashStore(timeout=SPEC_TIMEOUT)
    if kind == "file":
        return FileStore(spec[1], timeout=SPEC_TIMEOUT)
    if kind == "tcp":
        from store.tcp_store import TCPStore

        return TCPStore(
            spec[1], spec[2], is_master=False, timeout=SPEC_TIMEOUT, wait_for_workers=False
        )
    if kind == "etcd":
        from store.etcd import EtcdStore

        return EtcdStore(spec[1], spec[2], timeout=SPEC_TIMEOUT)
    raise ValueError(f"unknown store spec {spec!r}")
