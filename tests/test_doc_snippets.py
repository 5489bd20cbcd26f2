"""Every code block in README.md and docs/*.md runs as written, or says it is not run.

tests/doc_blocks.py has the rules; docs/TESTING.md explains them to the reader.
"""
import os
import subprocess
import sys

import pytest

from tests.doc_blocks import NEVER_RUN, RUNNABLE, SHOWN_ONLY, ROOT, DOC_PORTS, blocks
from tests.net import free_port

pytestmark = pytest.mark.timeout(90)

BLOCKS = blocks()
RUN = [block for block in BLOCKS if block.language in RUNNABLE and not block.skipped]
BLOCK_TIMEOUT = 75


def test_every_block_says_what_it_is():
    unmarked = [block.id for block in BLOCKS
                if block.language not in RUNNABLE + NEVER_RUN + SHOWN_ONLY
                or (block.language in SHOWN_ONLY and not block.skipped)]
    assert not unmarked, f"blocks without a language or a fragment mark: {unmarked}"


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN, ids=[block.id for block in RUN])
def test_a_block_runs_as_written(tmp_path, block):
    name, text, command = block.script({port: str(free_port()) for port in DOC_PORTS})
    (tmp_path / name).write_text(text)
    bin_dir = tmp_path.parent / f"{tmp_path.name}-bin"  # `python` is this interpreter
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = dict(os.environ, PYTHONPATH=str(ROOT), ACTORGRAD_LOG_LEVEL="warning",
               PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    log = tmp_path.parent / f"{tmp_path.name}.out"  # a file: a server left running keeps a pipe
    with open(log, "w") as out:
        process = subprocess.Popen(["bash", "-c", command], cwd=tmp_path, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        process.wait(BLOCK_TIMEOUT)
    finally:
        try:
            os.killpg(process.pid, 9)  # anything the block left running in the background
        except ProcessLookupError:
            pass
        process.wait(10)
    output = log.read_text()
    assert process.returncode == 0, f"{block.id} failed ({command}):\n{output}"
    assert "Traceback" not in output, f"{block.id}:\n{output}"
