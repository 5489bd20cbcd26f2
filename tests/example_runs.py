"""Running an example as a reader would, in an empty folder, and what it must leave.

Every example must exit 0 without a traceback and leave its working directory as it
found it; with `failing_children=True` every Python process it starts (but not the
example itself) ends with exit code 3 after doing its work, and the example must then
exit non-zero.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Optional, Sequence

ROOT = pathlib.Path(__file__).resolve().parents[1]
_FAILING = pathlib.Path(__file__).resolve().parent / "failing_children"


def run_example(relpath: str, *args: str, cwd: pathlib.Path, failing_children: bool = False,
                timeout: float = 150, launcher: Optional[Sequence[str]] = None
                ) -> subprocess.CompletedProcess:
    """Run examples/`relpath` (under `launcher` if given) in `cwd`, which must start empty."""
    env = dict(os.environ)
    path = [str(ROOT)] + ([str(_FAILING)] if failing_children else [])
    env["PYTHONPATH"] = os.pathsep.join(path + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("ACTORGRAD_FAILING_MAIN_PID", None)
    command = [sys.executable, *(launcher or []), str(ROOT / "examples" / relpath), *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def succeeds_cleanly(relpath: str, *args: str, cwd: pathlib.Path,
                     launcher: Optional[Sequence[str]] = None) -> str:
    """The example's stdout, after checking it exited 0, printed no traceback, left nothing."""
    out = run_example(relpath, *args, cwd=cwd, launcher=launcher)
    both = out.stdout + out.stderr
    assert out.returncode == 0, both
    assert "Traceback" not in both, both
    assert list(cwd.iterdir()) == [], f"left behind: {sorted(p.name for p in cwd.iterdir())}"
    return out.stdout
