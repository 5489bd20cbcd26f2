"""The docs name only the backends, flags and environment variables the code defines,
and the code defines none that the docs leave out."""
import builtins
import importlib
import inspect
import os
import pathlib
import re

import pytest

from actors.launch.agent import ElasticAgent
from actors.launch.config import build_parser, parse_args
from engine.ft import Manager
from store.elastic import RendezvousInfo, RendezvousStoreInfo
from store.hash_store import HashStore
from store.elastic.registry import rendezvous_handler_registry

pytestmark = pytest.mark.timeout(30)

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE = [path for folder in ("actors", "store", "engine", "examples", "benchmarks", "tests")
        for path in (ROOT / folder).rglob("*.py")]
PACKAGE = [path for path in CODE if path.relative_to(ROOT).parts[0] in
           ("actors", "store", "engine")]
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")
ENV = re.compile(r"\bACTORGRAD_[A-Z_]+\b")
# Pages that quote other programs' flags: the benchmarks' notes.
FLAG_DOCS = [path for path in DOCS if path.name not in ("PERFORMANCE.md", "DECISIONS.md")]


def _text(paths) -> str:
    return "\n".join(path.read_text() for path in paths)


def _section(page: str, start: str, end: str) -> str:
    text = (ROOT / "docs" / page).read_text()
    return text[text.index(start):text.index(end, text.index(start))]


def _launcher_usage() -> str:
    return _section("ELASTIC.md", "python -m actors.launch [--nnodes", "```")


def _not_here() -> str:
    """The sentences of PORTING.md that say something is not here."""
    text = (ROOT / "docs" / "PORTING.md").read_text()
    sentences = re.split(r"(?<=\.)\s+|\n\s*\n", text)
    return " ".join(s for s in sentences if re.search(r"\bnot here\b", s, re.IGNORECASE))


def test_the_documented_rendezvous_backends_are_the_registered_ones():
    registered = set(rendezvous_handler_registry._creators)
    documented = set(re.search(r"--rdzv-backend ([\w|-]+)", _launcher_usage())[1].split("|"))
    choices = {a for a in build_parser()._actions if "--rdzv-backend" in a.option_strings}
    assert documented == registered == set(choices.pop().choices)
    assert not any(f'"{name}"' in _not_here() or f"`{name}`" in _not_here()
                   for name in registered), _not_here()


def test_the_launcher_usage_in_the_docs_lists_every_option_and_no_other():
    parser_flags = {a.option_strings[0] if a.option_strings[0].startswith("--") else
                    a.option_strings[-1] for a in build_parser()._actions if a.option_strings}
    documented = set(FLAG.findall(_launcher_usage())) | {"--help", "--module"}
    assert documented == parser_flags
    assert not set(FLAG.findall(_not_here())) & parser_flags, _not_here()


def test_every_flag_the_docs_name_is_defined_by_our_commands_or_examples():
    defined = set(FLAG.findall(_text(CODE))) | {"--help"}
    absent = set(FLAG.findall(_not_here()))
    unknown = set(FLAG.findall(_text(FLAG_DOCS))) - defined - absent
    assert not unknown, f"the docs name flags no code defines: {sorted(unknown)}"


def test_the_environment_variables_the_docs_name_are_the_ones_the_code_reads():
    documented, read = set(ENV.findall(_text(DOCS))), set(ENV.findall(_text(PACKAGE)))
    assert documented - set(ENV.findall(_text(CODE))) == set(), "documented but read nowhere"
    assert read - documented == set(), "read by the package but documented nowhere"


def test_the_variables_the_launcher_gives_its_workers_are_the_documented_ones(monkeypatch):
    agent = ElasticAgent.__new__(ElasticAgent)  # only its environment-building part
    agent._config = parse_args(["--nproc-per-node", "2", __file__])
    agent._config.set_omp_threads = True
    agent._restarts_left = agent._config.max_restarts
    agent._log_dir = "/logs/run"  # as with --log-dir
    monkeypatch.setattr(os, "environ", {})  # what the launcher adds, not what it inherits
    envs = agent._worker_envs(RendezvousInfo(HashStore(), 0, 1),
                              RendezvousStoreInfo("127.0.0.1", 1))
    monkeypatch.undo()
    given = {name for env in envs for name in env}
    paragraph = _section("ELASTIC.md", "**Start K workers**", "3. **Monitor**")
    documented = {name for name in re.findall(r"`([A-Z][A-Z_]{2,})(?:[ =`])", paragraph)}
    assert given == documented


def test_every_class_of_the_porting_guides_error_table_is_public_with_its_bases():
    """Each class the table names is exported by a package a torch script imports
    (`actors`, `actors.distributed`, `store`, `engine.ft`), and is each "also a"."""
    table = _section("PORTING.md", "| failure | class | also a |", "\n\n")
    packages = [importlib.import_module(name) for name in
                ("actors", "actors.distributed", "store", "engine.ft")]

    def public(name: str) -> type:
        short = name.rsplit(".", 1)[-1]
        found = [getattr(p, short) for p in packages if short in getattr(p, "__all__", ())]
        found += [getattr(builtins, short)] if hasattr(builtins, short) else []
        assert found, f"PORTING.md's error table names {name}, which no package exports"
        return found[0]

    rows = [line.split("|")[2:4] for line in table.splitlines()[2:]]
    assert len(rows) >= 10
    for cls_cell, bases_cell in rows:
        cls = public(re.search(r"`([\w.]+)`", cls_cell)[1])
        for base in re.findall(r"\(an? `([\w.]+)`\)", cls_cell) + re.findall(
                r"`([\w.]+)`", bases_cell):
            assert issubclass(cls, public(base)), (cls, base)


def test_the_porting_guides_ft_manager_signature_names_every_parameter():
    written = re.search(r"`ft\.Manager\(([^`]*)\)`", (ROOT / "docs" / "PORTING.md").read_text())[1]
    documented = [part.split("=")[0].strip() for part in written.split(",")]
    assert documented == list(inspect.signature(Manager).parameters)
