"""Where a `Manager` finds its job when run under ``python -m actors.launch``: the job's
store, the session (one run of the job) and its replica id and world size, from the
environment the launcher sets."""
from __future__ import annotations

import os

from actors.runtime.introspection.status import ROUND_VARIABLE
from store import Store


def job_store(timeout: float) -> Store:
    """A client of the job's TCPStore, at the address the launcher gives."""
    # The launcher sets the variable; its module is imported only when no store= is given.
    from actors.launch.agent import JOB_STORE_VARIABLE
    from store import TCPStore

    address = os.environ.get(JOB_STORE_VARIABLE)
    if not address:
        raise ValueError(f"Manager needs the job's store: pass store=..., or run under "
                         f"python -m actors.launch, which sets {JOB_STORE_VARIABLE}")
    host, _, port = address.rpartition(":")
    return TCPStore(host, int(port), timeout=max(timeout, 30.0))


def session() -> str:
    """The launcher's run id and rendezvous round: a job restarted from scratch is a new
    one. The round, not the restart count, which counts a node's own restarts only:
    after a failure on one node, every node restarts in one new round."""
    run_id = os.environ.get("TORCHELASTIC_RUN_ID")
    if run_id is None:
        raise ValueError("Manager needs a session: pass session=..., or run under "
                         "python -m actors.launch, whose run id and rendezvous round name it")
    return f"{run_id}/{os.environ.get(ROUND_VARIABLE, '0')}"


def env_int(name: str) -> int:
    """An integer the launcher sets (``RANK``, ``WORLD_SIZE``)."""
    value = os.environ.get(name)
    if value is None:
        raise ValueError(f"Manager needs {name}: pass it, or run under python -m actors.launch")
    return int(value)
