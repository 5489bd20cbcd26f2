"""Store fixtures: one `store` per implementation, and shared specs for multi-process tests."""
from __future__ import annotations

import contextlib
from typing import Iterator

import pytest

from store import FileStore, HashStore, PrefixStore, Store, TCPStore
from tests.store.stores import SPEC_TIMEOUT, open_store


@contextlib.contextmanager
def tcp_server() -> Iterator[Store]:
    """A TCPStore master on a free 127.0.0.1 port, hosted in this process."""
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=SPEC_TIMEOUT)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(params=["hash", "file", "prefix", "tcp", "etcd"])
def store(request, tmp_path) -> Iterator[Store]:
    """A fresh, empty store of each kind, with a 10 s default timeout."""
    kind = request.param
    with contextlib.ExitStack() as stack:
        if kind == "hash":
            s = HashStore(timeout=SPEC_TIMEOUT)
        elif kind == "file":
            s = FileStore(str(tmp_path / "store"), timeout=SPEC_TIMEOUT)
        elif kind == "prefix":
            inner = HashStore(timeout=SPEC_TIMEOUT)
            stack.callback(inner.close)
            s = PrefixStore("job", inner)
        elif kind == "tcp":
            server = stack.enter_context(tcp_server())
            s = open_store(("tcp", "127.0.0.1", server.port))
        else:
            endpoint = request.getfixturevalue("etcd_endpoint")
            s = open_store(("etcd", endpoint, request.getfixturevalue("etcd_prefix")))
        stack.callback(s.close)
        yield s


@pytest.fixture(params=["file", "tcp", "etcd"])
def shared_store_spec(request, tmp_path) -> Iterator[tuple]:
    """A spec that spawned processes open with `open_store`; the test's process owns the store."""
    if request.param == "file":
        path = str(tmp_path / "shared")
        owner = FileStore(path, timeout=SPEC_TIMEOUT)  # keeps the file alive for the test
        try:
            yield ("file", path)
        finally:
            owner.close()
    elif request.param == "tcp":
        with tcp_server() as server:
            yield ("tcp", "127.0.0.1", server.port)
    else:
        yield ("etcd", request.getfixturevalue("etcd_endpoint"),
               request.getfixturevalue("etcd_prefix"))


@pytest.fixture
def tcp_master() -> Iterator[Store]:
    """`tcp_server` as a fixture, for clients of this process or of others."""
    with tcp_server() as server:
        yield server
