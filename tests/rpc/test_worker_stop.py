"""A ``--serve-forever`` worker stopped by SIGTERM finishes the calls it is serving."""
import pathlib
import signal
import threading

import pytest

from tests.rpc.named_worker import client, serving_process
from tests.waiting import raised_by, wait_until

pytestmark = pytest.mark.timeout(120)


def test_sigterm_finishes_the_calls_being_served_and_refuses_new_ones(tmp_path):
    release = tmp_path / "release"
    with serving_process(tmp_path) as (address, _port, worker):
        held, late = client(address), client(address)
        replies = []
        caller = threading.Thread(target=lambda: replies.append(held.call("hold", str(release))))
        caller.start()
        assert wait_until(pathlib.Path(f"{release}.started").exists, 30)
        worker.send_signal(signal.SIGTERM)
        log = next(tmp_path.glob("worker-*.log"))
        # logged once new calls are refused
        assert wait_until(lambda: "actor_finishing_calls" in log.read_text(), 30)
        refused = raised_by(late.call, "count")
        release.write_text("")
        caller.join(30)
        assert replies == ["done"]
        assert worker.wait(30) == 0
        assert "stopping" in str(refused), refused
        held.close()
        late.close()


def test_a_call_longer_than_the_graceful_timeout_is_cut_short_and_named(tmp_path):
    release = tmp_path / "never"
    with serving_process(tmp_path, "--graceful-timeout", "0.2") as (address, _port, worker):
        held = client(address)
        outcome = []
        # It gives up after 1.5 s, long after the worker stopped serving: its thread ends
        # then, and the process exits without waiting out the pool's 5 s join.
        caller = threading.Thread(target=lambda: outcome.append(raised_by(held.call, "hold",
                                                                          str(release), 1.5)))
        caller.start()
        assert wait_until(pathlib.Path(f"{release}.started").exists, 30)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
        caller.join(30)
        assert outcome and "stopped before the call finished" in str(outcome[0]), outcome
        log = next(tmp_path.glob("worker-*.log")).read_text()
        assert "worker_calls_cut_short" in log and "calls=['hold']" in log, log
        held.close()


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_a_bad_graceful_timeout_is_a_usage_error(value, capsys):
    from actors.worker import parse_args

    with pytest.raises(SystemExit) as exit_:
        parse_args(["--rank", "0", "--world-size", "1", "--serve-forever",
                    "--graceful-timeout", value])
    assert exit_.value.code == 2
    assert "--graceful-timeout must be" in capsys.readouterr().err


def test_a_graceful_timeout_without_serve_forever_is_a_usage_error(capsys):
    from actors.worker import parse_args

    with pytest.raises(SystemExit) as exit_:
        parse_args(["--rank", "0", "--world-size", "1", "--graceful-timeout", "5"])
    assert exit_.value.code == 2
    assert "--graceful-timeout needs --serve-forever" in capsys.readouterr().err
    assert parse_args(["--rank", "0", "--world-size", "1"]).graceful_timeout == 10.0
