"""The STACKS answer: the Python stack of every thread of this process."""
from __future__ import annotations

import sys
import threading
import traceback
from typing import Any, Dict, List


def thread_stacks() -> List[Dict[str, Any]]:
    """One entry per thread: its name, ident, whether it is a daemon, and its stack as
    ``"file:line in function: source"`` lines, outermost first."""
    threads = {thread.ident: thread for thread in threading.enumerate()}
    stacks = []
    for ident, frame in sys._current_frames().items():
        thread = threads.get(ident)
        lines = [f"{f.filename}:{f.lineno} in {f.name}" + (f": {f.line}" if f.line else "")
                 for f in traceback.extract_stack(frame)]
        stacks.append({"thread": ident, "name": thread.name if thread else f"thread-{ident}",
                       "daemon": bool(thread and thread.daemon), "stack": lines})
    del frame
    return sorted(stacks, key=lambda s: (s["name"] != "MainThread", s["name"]))


def format_stacks(stacks: List[Dict[str, Any]]) -> str:
    """`thread_stacks` as text, as a person reads a traceback."""
    out = []
    for entry in stacks:
        out.append(f"Thread {entry['name']} ({entry['thread']}):")
        out.extend(f"  {line}" for line in entry["stack"])
    return "\n".join(out)
