"""DESIGN §1: a module imports only from its own layer or the layers below it.

Layers, bottom up: the actor runtime (`actors.runtime`), `store`, the actor
services (the rest of `actors`), `engine`.
"""
import ast
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAYERS = ["actors.runtime", "store", "actors", "engine"]


def layer_of(module: str) -> int:
    """Index in LAYERS of the most specific layer `module` belongs to (-1: outside)."""
    best = -1
    for index, prefix in enumerate(LAYERS):
        if module == prefix or module.startswith(prefix + "."):
            if best == -1 or len(prefix) > len(LAYERS[best]):
                best = index
    return best


def imports_of(path: pathlib.Path, module: str) -> list:
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                found.append(".".join(base + ([node.module] if node.module else [])))
            else:
                found.append(node.module)
    return found


def library_modules():
    for top in ("actors", "store", "engine"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield path, ".".join(parts)


def test_every_library_module_imports_only_its_own_layer_or_below():
    violations = []
    for path, module in library_modules():
        own = layer_of(module)
        for imported in imports_of(path, module):
            other = layer_of(imported)
            if other > own:
                violations.append(f"{module} ({LAYERS[own]}) imports {imported} ({LAYERS[other]})")
    assert not violations, "\n".join(violations)


def test_the_layer_table_recognises_each_layer():
    assert [layer_of(m) for m in ("actors.runtime.actor", "store.server", "actors.rpc",
                                  "engine.nn", "numpy")] == [0, 1, 2, 3, -1]


def _loaded_after(statement: str) -> list:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return out.split()


def test_importing_the_runtime_pulls_in_no_store_engine_or_services():
    loaded = _loaded_after("import actors.runtime, actors.runtime.io.channel")
    above = [m for m in loaded if layer_of(m) > 0]
    assert above == ["actors"], above  # the package itself, whose names load lazily


def test_importing_the_stores_pulls_in_no_engine_or_services():
    loaded = _loaded_after("import store, store.tcp_store, store.server, store.file_store, "
                           "store.rendezvous")
    above = [m for m in loaded if layer_of(m) > 1]
    assert above == ["actors"], above


PRIVATE_TO_ACTORS = {"actors.rpc.state"}


def _private_imports_of_actors(path: pathlib.Path) -> list:
    """Imports in `path` of an underscore name of `actors`, or of a module kept private."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] != "actors":
                continue
            if any(part.startswith("_") for part in parts) or \
                    any(name == m or name.startswith(m + ".") for m in PRIVATE_TO_ACTORS):
                found.append(name)
    return found


def test_the_engine_imports_only_public_names_of_actors():
    violations = [f"{module} imports {name}" for path, module in library_modules()
                  if layer_of(module) == LAYERS.index("engine")
                  for name in _private_imports_of_actors(path)]
    assert not violations, "\n".join(violations)


def test_the_private_import_check_sees_underscore_names_and_the_rpc_state(tmp_path):
    source = tmp_path / "sample.py"
    source.write_text("from actors.rpc.state import current_agent\n"
                      "from actors.rpc.agent import _Sending\n"
                      "import actors._hidden\n"
                      "from actors.runtime import Future\n")
    assert _private_imports_of_actors(source) == [
        "actors.rpc.state.current_agent", "actors.rpc.agent._Sending", "actors._hidden"]
