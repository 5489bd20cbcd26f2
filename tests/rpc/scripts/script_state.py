"""A script whose functions keep state in the script's module, called over RPC.

`python script_state.py same`: worker1 is a spawned child running this script, so
the script's functions resolve there by name and share its module state.
`python script_state.py other`: worker1 is `python -m actors.worker`, another
program, so the functions travel by value. Prints one JSON line.
"""
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import threading

os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))

import actors  # noqa: E402

counter = 0
counter_lock = threading.Lock()


def bump() -> int:
    global counter
    with counter_lock:
        counter += 1
        return counter


def bump_unlocked() -> int:
    global counter
    counter += 1
    return counter


class Tally:
    """A class of the script: instances made remotely are of the callee's own class."""

    made = 0

    def __init__(self):
        Tally.made += 1

    def count(self) -> int:
        return Tally.made


def bump_the_caller(caller: str) -> int:
    """Runs on worker1 and calls back: worker1 sends a function of the script to the driver."""
    return actors.rpc_sync(caller, bump)


def serve(port: int) -> None:
    actors.init_rpc("worker1", 1, 2, init_method=f"tcp://127.0.0.1:{port}")
    actors.shutdown()


def main(mode: str, guarded=None) -> dict:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    if mode == "same":
        peer = mp.get_context("spawn").Process(target=serve, args=(port,))
        peer.start()
        stop = peer.kill
        join = peer.join
    else:
        peer = subprocess.Popen([sys.executable, "-m", "actors.worker", "--rank", "1",
                                 "--world-size", "2", "--master-port", str(port)])
        stop = peer.kill
        join = peer.wait
    try:
        actors.init_rpc("driver", 0, 2, init_method=f"tcp://127.0.0.1:{port}")
        result = {
            "bumps": [actors.rpc_sync("worker1", bump_unlocked) for _ in range(3)],
            "tallies": [actors.remote("worker1", Tally).rpc_sync().count() for _ in range(2)],
            "callbacks": [actors.rpc_sync("worker1", bump_the_caller, args=("driver",))
                          for _ in range(2)] if mode == "same" else [],
            "guarded": [actors.rpc_sync("worker1", guarded, args=(i,)) for i in range(2)],
        }
        try:
            result["locked"] = [actors.rpc_sync("worker1", bump) for _ in range(3)]
        except Exception as exc:  # noqa: BLE001 - reported to the test
            result["locked"] = f"{type(exc).__name__}: {exc}"
        actors.shutdown()
        join(60)
        return result
    finally:
        stop()


if __name__ == "__main__":
    def double_here(x: int) -> int:
        """Defined only where the script runs as __main__: a spawned child lacks it."""
        return 2 * x

    print(json.dumps(main(sys.argv[1], double_here)), flush=True)
