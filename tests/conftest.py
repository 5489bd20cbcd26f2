"""Fixtures for every folder: one real etcd server per session, started on first use;
the project compiled to bytecode once, before the session starts its processes."""
from __future__ import annotations

import compileall
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from actors.runtime.process import log
from tests.store.etcd_server import etcd_server

# What the suite's child processes import: the packages, and the helper modules of the
# examples and benchmarks that tests run (a script itself is always compiled).
_SOURCES = ("actors", "engine", "store", "tests", "examples", "benchmarks")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Write the project's bytecode (`__pycache__`) if it is missing or stale.

    The suite starts hundreds of Python processes. Where the environment forbids
    writing bytecode (PYTHONDONTWRITEBYTECODE, as some CI images set it), each of them
    would compile every project module it imports from source again: 0.4 to 0.7 s more
    for a process that imports the RPC, process-group and store layers
    (docs/TESTING.md).
    """
    root = Path(__file__).resolve().parent.parent
    for folder in _SOURCES:
        compileall.compile_dir(str(root / folder), quiet=2)
    # The project's log pipeline, before any test captures logs: a capture configures
    # structlog, and a pipeline configured by then is taken for the application's own.
    log.configure()


@pytest.fixture(scope="session")
def etcd_endpoint(tmp_path_factory) -> Iterator[str]:
    """One real etcd server for the session's tests (each uses a prefix of its own)."""
    with etcd_server(tmp_path_factory.mktemp("etcd") / "data") as endpoint:
        yield endpoint


@pytest.fixture
def etcd_prefix() -> str:
    return f"/test-{uuid.uuid4().hex}"
