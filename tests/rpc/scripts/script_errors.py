"""A script that raises its own exception class on a callee running the same script.

`python script_errors.py`: worker1 is a second process running this script, as under
a launcher, and the driver catches what worker1 raises by its own class. Prints one
JSON line.
"""
import json
import os
import socket
import subprocess
import sys

os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))

import actors  # noqa: E402


class ScriptError(Exception):
    """An exception class of the script."""


def fail() -> None:
    raise ScriptError("raised by the callee")


def caught(call) -> str:
    """Which class the exception from `call()` is caught as."""
    try:
        call()
    except ScriptError:
        return "ScriptError"
    except Exception as exc:  # noqa: BLE001 - reported to the test
        return f"{type(exc).__module__}.{type(exc).__qualname__} (not the script's class)"
    return "nothing raised"


def main() -> dict:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    peer = subprocess.Popen([sys.executable, __file__, str(port)])
    try:
        actors.init_rpc("driver", 0, 2, init_method=f"tcp://127.0.0.1:{port}")
        result = {"raised": [caught(lambda: actors.rpc_sync("worker1", fail)),
                             caught(lambda: actors.rpc_async("worker1", fail).wait()),
                             caught(lambda: actors.remote("worker1", fail).to_here())]}
        actors.shutdown()
        peer.wait(60)
        return result
    finally:
        peer.kill()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        actors.init_rpc("worker1", 1, 2, init_method=f"tcp://127.0.0.1:{sys.argv[1]}")
        actors.shutdown()
    else:
        print(json.dumps(main()), flush=True)
