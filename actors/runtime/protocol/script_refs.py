"""Definitions of the running script travel by reference, with their value beside the name.

torch pickles a function or class defined in the script (`__main__`) by name, and a
callee running the same script uses its own copy, with the module state the script
keeps there (the parameter-server singleton of torch's tutorials). We do the same
when the receiver's `__main__` is the same file as the sender's. A receiver running
another program (a worker started with `python -m actors.worker`, a different
script) cannot find the name, so the definition's value, pickled by cloudpickle,
travels too and is rebuilt there, as a fresh copy with its own globals. A definition
whose value cannot be pickled (it uses a module-level lock, say) travels by name
only, and only a receiver running the same script can call it.

A sender that knows its receiver runs the same script (an RPC world publishes each
worker's script) says so with `same_script_receiver`: the value of a definition made
by a top-level ``def`` or ``class`` statement of the script is then left out, the
sender checks it once per (script, name), and the receiver looks it up by name instead
of rebuilding it from its value on every message. A definition made under ``if
__name__ == "__main__":`` (or any other condition) keeps its value beside: a process
that imports the script, as a spawned child does, may not have made it.
"""
from __future__ import annotations

import ast
import functools
import os
import sys
import threading
from typing import Any, Dict, Optional, Tuple

import cloudpickle

# A spawned multiprocessing child imports the parent's script as `__mp_main__` and
# aliases it as `__main__`.
MAIN_MODULES = frozenset({"__main__", "__mp_main__"})


def script_path() -> Optional[str]:
    """The real path of this process's `__main__` file, or None (interactive, `-c`)."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    return _real_path(path) if path else None


@functools.lru_cache(maxsize=8)
def _real_path(path: str) -> str:
    return os.path.realpath(path)


class _Receiver(threading.local):
    """Whether this thread's messages go to a receiver that runs this script."""

    same = False


_receiver = _Receiver()


class same_script_receiver:
    """``with same_script_receiver(same):`` messages encoded on this thread meanwhile go
    to a receiver that runs this process's script (`same`), or may not.

    A class, not a generator: it wraps every call.
    """

    __slots__ = ("same", "before")

    def __init__(self, same: bool):
        self.same = same

    def __enter__(self) -> None:
        self.before = _receiver.same
        _receiver.same = self.same

    def __exit__(self, *exc: Any) -> None:
        _receiver.same = self.before


# The script's definitions already checked: obj -> (qualname, path).
_names: Dict[Any, Tuple[str, str]] = {}


def reduce_script_definition(obj: Any) -> Optional[Tuple[Any, tuple]]:
    """A pickle reduction of `obj` by reference to the script, if it is one of its definitions.

    None for anything else (the pickler then goes on as usual): an object of another
    module, a nested definition, or a script without a file. The value travels beside
    the name unless `same_script_receiver` says the receiver has the script.
    """
    name = _checked_name(obj)
    if name is None:
        return None
    qualname, path = name
    value = None if _receiver_finds(qualname, path) else _by_value(obj)
    return resolve_script_definition, (qualname, path, value)


# The script's definitions that a receiver running the script makes (`_receiver_finds`).
_found_by_receiver: set = set()


def goes_by_name(obj: Any) -> bool:
    """True if `obj` is a definition of the script that travels by name alone on this thread."""
    if not _receiver.same:
        return False
    if obj in _found_by_receiver:
        return True
    name = _checked_name(obj)
    if name is None or not _receiver_finds(*name):
        return False
    _found_by_receiver.add(obj)
    return True


def _checked_name(obj: Any) -> Optional[Tuple[str, str]]:
    """(qualname, script path) of a definition of the script, looked up once per object."""
    name = _names.get(obj)
    if name is None:
        name = _script_name(obj)
        if name is not None:
            _names[obj] = name
    return name


def _receiver_finds(qualname: str, path: str) -> bool:
    """Whether this thread's receiver runs the script and has made the definition."""
    return _receiver.same and qualname.split(".", 1)[0] in _unconditional_definitions(path)


def _script_name(obj: Any) -> Optional[Tuple[str, str]]:
    if getattr(obj, "__module__", None) not in MAIN_MODULES:
        return None
    qualname = getattr(obj, "__qualname__", "<")
    if "<" in qualname:  # a lambda or a nested definition: no name to find it by
        return None
    path = script_path()
    if path is None or lookup_qualname(sys.modules[obj.__module__], qualname) is not obj:
        return None
    return qualname, path


@functools.lru_cache(maxsize=8)
def _unconditional_definitions(path: str) -> frozenset:
    """The names bound by the top-level ``def`` and ``class`` statements of the script at
    `path`: every process that runs or imports it makes them."""
    try:
        with open(path, "rb") as source:
            tree = ast.parse(source.read(), path)
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    return frozenset(node.name for node in tree.body if isinstance(
        node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))


def resolve_script_definition(qualname: str, path: str, value: Any) -> Any:
    """The receiver's own definition when it runs the script at `path`, else the value sent.

    `value` is cloudpickle's bytes, the reason they could not be made (a str), or None
    when the sender knew this receiver runs the same script.
    """
    if path == script_path():
        found = lookup_qualname(sys.modules["__main__"], qualname)
        if found is not None:
            return found
    if isinstance(value, bytes):
        return cloudpickle.loads(value)
    why = "its value was not sent" if value is None else f"cannot travel by value: {value}"
    raise LookupError(f"{qualname} of script {path} is not defined here (this process runs "
                      f"{script_path()}) and {why}")


def _by_value(obj: Any) -> Any:
    if obj.__module__ == "__mp_main__":
        # cloudpickle would name `__mp_main__`, which a receiver that is not a
        # spawned child of the same parent does not have (registering is idempotent).
        cloudpickle.register_pickle_by_value(sys.modules["__mp_main__"])
    try:
        return cloudpickle.dumps(obj)
    except Exception as exc:  # noqa: BLE001 - the name alone still serves the same script
        return f"{type(exc).__name__}: {exc}"


def lookup_qualname(module: Any, qualname: str) -> Any:
    """What `qualname` ("Class.method") names in `module`, or None."""
    target = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return target
