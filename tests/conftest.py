"""Fixtures for every folder: one real etcd server per session, started on first use."""
from __future__ import annotations

import uuid
from typing import Iterator

import pytest

from tests.store.etcd_server import etcd_server


@pytest.fixture(scope="session")
def etcd_endpoint(tmp_path_factory) -> Iterator[str]:
    """One real etcd server for the session's tests (each uses a prefix of its own)."""
    with etcd_server(tmp_path_factory.mktemp("etcd") / "data") as endpoint:
        yield endpoint


@pytest.fixture
def etcd_prefix() -> str:
    return f"/test-{uuid.uuid4().hex}"
