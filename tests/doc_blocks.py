"""The fenced code blocks of README.md and docs/*.md, and how each one is run.

A block's language and its first line say what the doc tests do with it (the rules
are in docs/TESTING.md, "Code in the docs"):

- ``python``: saved as ``snippet.py`` in an empty folder and run with ``python``;
- ``bash``: run with ``bash -e`` in an empty folder;
- a first line ``# run with: COMMAND``: the block is saved under the ``.py`` name that
  COMMAND gives (``snippet.py`` if none) and COMMAND runs in bash;
- a first line ``# fragment: WHY`` or ``# not run: WHY`` (``// fragment: WHY`` in C):
  shown to the reader as such and not run;
- ``text`` and ``json``: program output, diagrams and formats, never run.

A fence without a language is an error, so every new block gets a decision. The
ports the docs use (29500, 29400, 2379) become free ports when a block runs, so the
tests never collide with anything else on the machine.
"""
from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass
from typing import Dict, List, Optional

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = ("python", "bash")
NEVER_RUN = ("text", "json")
SHOWN_ONLY = ("c",)  # other languages: must say `fragment` on their first line
DOC_PORTS = ("29500", "29400", "2379")
_SKIP = re.compile(r"^(#|//) (fragment|not run)\b")
_RUN_WITH = re.compile(r"^# run with: (.+)$")
_LAUNCHER = re.compile(r"\bactorrun\b")


@dataclass
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence
    language: str
    body: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def first_line(self) -> str:
        return self.body.split("\n", 1)[0]

    @property
    def skipped(self) -> bool:
        """Marked for the reader as a fragment or as not run."""
        return self.language in NEVER_RUN or bool(_SKIP.match(self.first_line))

    @property
    def run_with(self) -> Optional[str]:
        match = _RUN_WITH.match(self.first_line)
        return match[1] if match else None

    def script(self, ports: Dict[str, str]) -> tuple:
        """(file name, file text, bash command) to run this block with the given ports."""
        text = _ports(self.body, ports)
        if self.language == "bash":
            return "snippet.sh", text, "bash -e snippet.sh"
        command = self.run_with or "python snippet.py"
        names = re.findall(r"[\w./-]+\.py\b", command)
        name = names[0] if names else "snippet.py"
        command = _LAUNCHER.sub("python -m actors.launch", _ports(command, ports))
        return name, text, command


def _ports(text: str, ports: Dict[str, str]) -> str:
    for doc_port, port in ports.items():
        text = re.sub(rf"(?<!\d){doc_port}(?!\d)", port, text)
    return text


def blocks() -> List[Block]:
    """Every fenced block of every page, in page order."""
    found = []
    for path in PAGES:
        lines = path.read_text().split("\n")
        index = 0
        while index < len(lines):
            opening = re.match(r"^```(\S*)", lines[index])
            if opening is None:
                index += 1
                continue
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
            found.append(Block(str(path.relative_to(ROOT)), index + 1, opening[1],
                               "\n".join(lines[index + 1:end]) + "\n"))
            index = end + 1
    return found
