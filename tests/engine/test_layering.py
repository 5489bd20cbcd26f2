"""Importing engine pulls in neither the RPC layer nor the stores."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]


def test_importing_engine_loads_no_actors_store_or_zmq_module():
    code = (
        "import sys, engine, engine.nn, engine.optim\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('actors', 'store', 'zmq'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == ""


def test_engine_sources_never_import_actors_or_store():
    offenders = []
    for path in (ROOT / "engine").rglob("*.py"):
        if {"dist_autograd", "ft"} & set(path.parts) or \
                path.name in ("distributed.py", "parallel.py"):
            continue  # the distributed parts sit on top of the actors layer by design
        for line in path.read_text().splitlines():
            words = line.split()
            if words[:1] in (["import"], ["from"]) and words[1].split(".")[0] in ("actors",
                                                                                   "store"):
                offenders.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    assert offenders == []
