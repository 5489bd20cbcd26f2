"""Where a Manager finds its job under the launcher: the session every node agrees on."""
import pytest

from engine.ft import job

pytestmark = pytest.mark.timeout(10)


def test_the_session_is_the_run_id_and_the_rendezvous_round_not_a_nodes_restart_count(
        monkeypatch):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "train")
    monkeypatch.setenv("ACTORGRAD_RDZV_ROUND", "3")
    sessions = set()
    for restarts in ("0", "1"):  # the node that failed, and one that restarted for free
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", restarts)
        sessions.add(job.session())
    assert sessions == {"train/3"}


def test_without_the_launcher_a_session_must_be_given(monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    with pytest.raises(ValueError, match="session"):
        job.session()
