"""The API reference: which names are public, where each is documented, and which lack a docstring.

A package's public names are its ``__all__``, read by importing it (several
packages load names on first use, which reading the source alone cannot see).
Each name is documented once, on the page of the most specific package that
exports it; the other pages that export it link there. `missing_docstrings` is the
guard the site build turns into warnings (and ``mkdocs build --strict`` into a
failure): every public name, and every public method, property and nested class of
a public class, has a docstring of its own or overrides one that has.
"""
from __future__ import annotations

import importlib
import types
from dataclasses import dataclass
from typing import Iterable, Sequence

import griffe

# The packages with a reference page each, in this order in the site's navigation.
GROUPS = [
    "actors",
    "actors.runtime",
    "actors.rpc",
    "actors.distributed",
    "actors.launch",
    "actors.debug",
    "store",
    "store.elastic",
    "store.etcd",
    "engine",
    "engine.autograd",
    "engine.ops",
    "engine.nn",
    "engine.nn.functional",
    "engine.nn.init",
    "engine.nn.utils",
    "engine.nn.parallel",
    "engine.optim",
    "engine.optim.lr_scheduler",
    "engine.dist_autograd",
    "engine.ft",
]
PACKAGES = ["actors", "store", "engine"]


class InheritDocstrings(griffe.Extension):
    """Give a method that overrides a documented one, with no docstring of its own, its base's.

    Python's `inspect.getdoc` does the same, so `help(TCPStore.set)` and the
    reference say the same thing.
    """

    def on_package(self, *, pkg: griffe.Module, **kwargs: object) -> None:
        """Fill in the inherited docstrings of every class in the package."""
        for cls in _classes(pkg):
            for name, member in cls.members.items():
                if member.is_alias or _has_docstring(member):
                    continue
                inherited = _inherited_docstring(cls, name)
                if inherited is not None:
                    member.docstring = griffe.Docstring(inherited.value, parent=member)


@dataclass(frozen=True)
class Entry:
    """One public name of a page: where it is defined, and the page that documents it."""

    name: str
    path: str
    owner: str


def load(packages: Sequence[str], search_paths: Sequence[str]) -> griffe.ModulesCollection:
    """Load `packages` from source as the reference renders them, inherited docstrings filled in."""
    loader = griffe.GriffeLoader(search_paths=list(search_paths),
                                 extensions=griffe.load_extensions(InheritDocstrings))
    for package in packages:
        loader.load(package)
    loader.resolve_aliases(external=False)
    return loader.modules_collection


def public_api(modules: Sequence[str],
               collection: griffe.ModulesCollection) -> dict[str, list[Entry]]:
    """Each module's public names in `__all__` order, each with its definition and owning page."""
    exported = {module: list(importlib.import_module(module).__dict__.get("__all__", ()))
                for module in modules}
    paths = {module: [_definition(module, name, modules, collection) for name in names]
             for module, names in exported.items()}
    exporters: dict[str, list[str]] = {}
    for module in modules:
        for path in paths[module]:
            exporters.setdefault(path, []).append(module)
    return {module: [Entry(name, path, _owner(path, exporters[path]))
                     for name, path in zip(exported[module], paths[module])]
            for module in modules}


def missing_docstrings(api: dict[str, list[Entry]],
                       collection: griffe.ModulesCollection) -> list[str]:
    """The paths of the public objects and public class members that have no docstring."""
    missing = []
    for path in sorted({entry.path for entries in api.values() for entry in entries}):
        obj = _target(collection[path])
        missing += [o.path for o in [obj, *_public_members(obj)] if not _has_docstring(o)]
    return missing


def page(module: str, entries: Iterable[Entry]) -> str:
    """The Markdown of `module`'s page: its docstring, its own names, links to the others."""
    lines = [f"# `{module}`", "", f"::: {module}", "    options:",
             "      members: false", "      show_root_heading: false", ""]
    elsewhere = []
    for entry in entries:
        if entry.owner == module:
            lines += [f"::: {entry.path}", "    options:", "      heading_level: 2",
                      "      show_root_heading: true", "      show_root_full_path: false",
                      f"      toc_label: {entry.name}", ""]
        else:
            elsewhere.append(entry)
    if elsewhere:
        lines += ["## Exported from other packages", ""]
        lines += [f"- [`{e.name}`][{e.path}]: in [`{e.owner}`]({_page_file(e.owner)})"
                  for e in elsewhere]
        lines.append("")
    return "\n".join(lines)


def page_file(module: str) -> str:
    """Where `module`'s page lives in the site, e.g. ``api/engine.nn.md``."""
    return f"api/{_page_file(module)}"


def _page_file(module: str) -> str:
    return f"{module}.md"


def _definition(module: str, name: str, modules: Sequence[str],
                collection: griffe.ModulesCollection) -> str:
    """The path where `module.name` is defined: a class or function by its own module and name,
    anything else through the import that brought it into a module of `modules`."""
    value = getattr(importlib.import_module(module), name)
    if isinstance(value, types.ModuleType):
        return value.__name__
    qualified = f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
    try:
        return _target(collection[qualified]).path
    except KeyError:
        pass
    for candidate in [module, *modules]:
        static = collection[candidate].members.get(name)
        if static is not None and getattr(importlib.import_module(candidate), name, None) is value:
            return _target(static).path
    raise LookupError(f"cannot find where {module}.{name} is defined")


def _owner(path: str, exporters: list[str]) -> str:
    """The most specific exporting module that contains `path`, else the first exporter."""
    containing = [m for m in exporters if path == m or path.startswith(m + ".")]
    return max(containing, key=len) if containing else exporters[0]


def _target(obj: griffe.Object | griffe.Alias) -> griffe.Object:
    return obj.final_target if obj.is_alias else obj


def _has_docstring(obj: griffe.Object | griffe.Alias) -> bool:
    return bool(obj.docstring and obj.docstring.value.strip())


def _public_members(obj: griffe.Object) -> list[griffe.Object]:
    """What the reference shows under a class: its own public methods, properties and classes."""
    if not obj.is_class:
        return []
    return [member for name, member in obj.members.items()
            if not name.startswith("_") and not member.is_alias
            and (member.is_function or member.is_class or "property" in member.labels)]


def _inherited_docstring(cls: griffe.Class, name: str) -> griffe.Docstring | None:
    try:
        bases = cls.mro()
    except ValueError:  # a base outside the loaded packages
        return None
    for base in bases:
        member = base.members.get(name)
        if member is not None and _has_docstring(_target(member)):
            return _target(member).docstring
    return None


def _classes(obj: griffe.Object) -> Iterable[griffe.Class]:
    for member in obj.members.values():
        if member.is_alias:
            continue
        if member.is_class:
            yield member
        if member.is_module or member.is_class:
            yield from _classes(member)
