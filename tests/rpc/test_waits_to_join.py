"""A rank that waits long for the others to join an RPC world or a process group names
the ranks still missing, then joins normally when they come."""
from __future__ import annotations

import os

import pytest

from store.agreement import joining_text, ranks_text
from tests.net import free_port
from tests.subprocesses import running
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(90)

JOIN = {
    "rpc": "import actors; actors.init_rpc('w{rank}', {rank}, 2, "
           "init_method='tcp://127.0.0.1:{port}', timeout=30); print('joined', flush=True); "
           "actors.shutdown()",
    "pg": "import actors.distributed as dist; dist.init_process_group("
          "init_method='tcp://127.0.0.1:{port}', rank={rank}, world_size=2, timeout=30); "
          "print('joined', flush=True); dist.destroy_process_group()",
}
WAITING = {"rpc": "init_rpc of 'w0': waiting for rank 1 of 2 to join for ",
           "pg": "init_process_group of rank 0: waiting for rank 1 of 2 to join for "}


def test_the_text_names_the_missing_ranks():
    assert joining_text("init_rpc", [0, 2], 4) == "init_rpc: waiting for ranks 1, 3 of 4 to join"
    assert ranks_text([5, 0, 1, 2, 3, 7, 8]) == "ranks 0-3, 5, 7, 8"
    assert ranks_text([2]) == "rank 2"


def start(kind, rank, port, log_path, after):
    env = {**os.environ, "ACTORGRAD_WAIT_WARN_AFTER": after, "ACTORGRAD_WAIT_WARN_EVERY": "0.3"}
    return running(["-c", JOIN[kind].format(rank=rank, port=port)], log_path, env)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["rpc", "pg"])
def test_a_rank_alone_names_the_rank_it_waits_for_then_joins(kind, tmp_path):
    port, first_log, second_log = free_port(), tmp_path / "rank0.log", tmp_path / "rank1.log"
    with start(kind, 0, port, first_log, "0.2") as first:
        assert wait_until(lambda: WAITING[kind] in first_log.read_text(), timeout=30), \
            first_log.read_text()
        with start(kind, 1, port, second_log, "0.2") as second:
            assert second.wait(30) == 0, second_log.read_text()
        assert first.wait(30) == 0, first_log.read_text()
    assert "joined" in first_log.read_text() and "joined" in second_log.read_text()
    assert "level='warning'" in first_log.read_text()


@pytest.mark.slow
def test_ranks_that_join_together_say_nothing_of_waiting(tmp_path):
    port, logs = free_port(), [tmp_path / "rank0.log", tmp_path / "rank1.log"]
    with start("rpc", 0, port, logs[0], "8") as first, \
            start("rpc", 1, port, logs[1], "8") as second:
        assert first.wait(30) == 0 and second.wait(30) == 0
    assert all("waiting for" not in log.read_text() for log in logs)
