"""mkdocs hooks that make README.md, docs/*.md and the API reference one site.

The site mirrors the repository's layout: README.md is the home page (mkdocs
serves a README as its folder's index), the pages stay under ``docs/``, and the
repository files the pages link to (the examples) are copied beside them, so every
relative link means the same on GitHub and in the site, and mkdocs checks them all.
The API reference pages are generated under ``api/`` from `api_reference`, and a
public name without a docstring is a warning, which ``mkdocs build --strict`` fails on.
"""
from __future__ import annotations

import logging
import posixpath
import re
import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel

import api_reference

log = logging.getLogger("mkdocs.plugins.actorgrad")

ROOT = Path(__file__).resolve().parents[1]
# A Markdown link or image target: ](target) up to a space, a '#' or the ')'.
LINK = re.compile(r"\]\(([^)\s#]+)")


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Add the API reference pages to the navigation, one per public package."""
    if str(ROOT) not in sys.path:  # document this tree's packages, not another installed copy
        sys.path.insert(0, str(ROOT))
    config.nav.append({"API reference": [{module: api_reference.page_file(module)}
                                         for module in api_reference.GROUPS]})
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """The site's files: README.md, docs/*.md, the generated reference and the linked files."""
    site = Files([_file("README.md", config), *(_file(f"docs/{page.name}", config)
                                                 for page in sorted((ROOT / "docs").glob("*.md")))])
    modules = api_reference.GROUPS
    collection = api_reference.load(api_reference.PACKAGES, [str(ROOT)])
    api = api_reference.public_api(modules, collection)
    for path in api_reference.missing_docstrings(api, collection):
        log.warning("public name without a docstring: %s", path)
    for module in modules:
        site.append(File.generated(config, api_reference.page_file(module),
                                   content=api_reference.page(module, api[module])))
    for path in _linked_repository_files(site):
        inclusion = InclusionLevel.NOT_IN_NAV if path.endswith(".md") else InclusionLevel.UNDEFINED
        site.append(_file(path, config, inclusion))
    return site


def _file(path: str, config: MkDocsConfig,
          inclusion: InclusionLevel = InclusionLevel.UNDEFINED) -> File:
    return File(path, str(ROOT), config.site_dir, config.use_directory_urls, inclusion=inclusion)


def _linked_repository_files(site: Files) -> list[str]:
    """Files outside the pages that pages link to (and that those link to, for Markdown)."""
    known = {file.src_uri for file in site}
    queue = [file.src_uri for file in site if file.abs_src_path]
    found = []
    while queue:
        page = queue.pop()
        for target in LINK.findall((ROOT / page).read_text(encoding="utf-8")):
            if "://" in target or target.startswith(("/", "mailto:")):
                continue
            path = posixpath.normpath(posixpath.join(posixpath.dirname(page), target))
            if path in known or path.startswith("..") or not (ROOT / path).is_file():
                continue  # a missing target is left for mkdocs to report
            known.add(path)
            found.append(path)
            if path.endswith(".md"):
                queue.append(path)
    return sorted(found)
