"""torchrun's ``PET_<OPTION>`` variables: defaults, from the environment, of the options
the launcher shares with torchrun (``PET_NPROC_PER_NODE=2`` for ``--nproc-per-node 2``);
the command line wins over them."""
from __future__ import annotations

import argparse
import os
from typing import Dict, Optional

# The options torchrun has too: each takes its default from PET_<OPTION>, as there.
TORCHRUN_OPTIONS = frozenset({
    "nnodes", "nproc_per_node", "rdzv_endpoint", "rdzv_id", "rdzv_backend", "rdzv_conf",
    "node_rank", "master_addr", "master_port", "max_restarts", "monitor_interval",
    "standalone", "local_addr", "role", "log_dir", "redirects", "tee", "no_python",
    "run_path", "start_method", "module"})


def environment_variable(dest: str) -> str:
    """torchrun's variable for an option: ``PET_NPROC_PER_NODE`` for --nproc-per-node."""
    return f"PET_{dest.upper()}"


def defaults_from_environment(parser: argparse.ArgumentParser,
                              environ: Optional[Dict[str, str]] = None) -> None:
    """Set the default of each option shared with torchrun from its ``PET_`` variable, if
    set and not empty (the command line still wins); a usage error names a bad one."""
    environ = os.environ if environ is None else environ
    for action in parser._actions:
        if action.dest not in TORCHRUN_OPTIONS:
            continue
        name = environment_variable(action.dest)
        text = environ.get(name, "")
        if not text:
            continue
        try:
            action.default = _option_value(action, text)
        except argparse.ArgumentTypeError as exc:
            parser.error(f"{name}={text!r}: {exc}")


def _option_value(action: argparse.Action, text: str) -> object:
    """`text` read as a value of `action`; a flag's is 0 (off) or 1 (on)."""
    if action.nargs == 0:
        if text not in ("0", "1"):
            raise argparse.ArgumentTypeError("expected 0 or 1")
        return text == "1"
    value = action.type(text) if action.type else text
    if action.choices is not None and value not in action.choices:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(map(str, action.choices))}")
    return value
