"""The documentation site builds with warnings as errors, and its docstring guard works.

`mkdocs build --strict` (mkdocs.yml) fails on a public name without a docstring
(docs/api_reference.py), a broken cross-reference in a docstring, and a broken link or
anchor between the pages.
"""
import importlib
import importlib.util
import os
import pydoc
import subprocess
import sys
import textwrap

import pytest

from tests.doc_blocks import ROOT

pytestmark = pytest.mark.timeout(120)


def _api_reference():
    """docs/api_reference.py, which mkdocs loads by path (docs/ is no package)."""
    name = "docs_api_reference"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "api_reference.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclass looks its module up there
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_every_public_name_is_listed_by_dir_and_help():
    """Names loaded on first use were missing from dir(), so neither completion nor
    help(actors) showed init_rpc, rpc_sync or any other name of the RPC API."""
    for package in _api_reference().GROUPS:
        module = importlib.import_module(package)
        assert set(getattr(module, "__all__", ())) <= set(dir(module)), package
    text = pydoc.render_doc(importlib.import_module("actors"), renderer=pydoc.plaintext)
    assert "init_rpc(name:" in text and "rpc_sync(to:" in text


@pytest.mark.slow
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
        timeout=100)
    assert result.returncode == 0, result.stderr
    assert (site / "index.html").is_file()
    assert (site / "docs" / "STORES" / "index.html").is_file()
    store_page = (site / "api" / "store" / "index.html").read_text()
    assert "store.tcp_store.TCPStore.compare_set" in store_page  # an anchor per documented name


def test_the_guard_names_each_public_object_without_a_docstring(tmp_path, monkeypatch):
    package = tmp_path / "undocumented_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent('''\
        """A package with gaps in its docstrings."""
        from .parts import Base, Child, documented, undocumented

        LIMIT = 3

        __all__ = ["Base", "Child", "documented", "undocumented", "LIMIT"]
        '''))
    (package / "parts.py").write_text(textwrap.dedent('''\
        """Where the names are defined."""


        def documented():
            """Has one."""


        def undocumented():
            pass


        class Base:
            """Has one."""

            def run(self):
                """Has one."""

            def stop(self):
                pass

            def _private(self):
                pass


        class Child(Base):
            def run(self):
                pass
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    api_reference = _api_reference()
    collection = api_reference.load(["undocumented_pkg"], [str(tmp_path)])
    api = api_reference.public_api(["undocumented_pkg"], collection)

    missing = api_reference.missing_docstrings(api, collection)

    # Child.run inherits Base.run's docstring, as inspect.getdoc gives it; Child.stop is
    # Base.stop, reported once.
    assert missing == ["undocumented_pkg.LIMIT", "undocumented_pkg.parts.Base.stop",
                       "undocumented_pkg.parts.Child", "undocumented_pkg.parts.undocumented"]
