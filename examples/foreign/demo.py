"""Foreign clients against a safe-mode worker: a C program and plain pyzmq, no pickle anywhere.

Starts ``python -m actors.worker --no-pickle --serve-forever --import
examples.foreign.functions`` (a world of one worker that hosts the store), then
runs the clients against its store: ``client.py`` and, compiled with gcc against
libzmq's headers, ``client.c``. Usage::

    python examples/foreign/demo.py [--clients python,c]
"""
import argparse
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
START_TIMEOUT = 60.0


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_worker(port, log_path):
    """The safe-mode worker, once its store answers; its log goes to `log_path`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "actors.worker", "--rank", "0", "--world-size", "1",
               "--master-port", str(port), "--no-pickle", "--serve-forever",
               "--import", "examples.foreign.functions"]
    log = open(log_path, "w")
    worker = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT
    while " serves at " not in pathlib.Path(log_path).read_text():  # its start line
        if worker.poll() is not None or time.monotonic() > deadline:
            worker.kill()
            raise SystemExit(f"the worker did not start:\n{pathlib.Path(log_path).read_text()}")
        time.sleep(0.05)
    return worker


def build_c_client(out_dir):
    """The compiled C client, or None with the reason printed."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        print("C client: no C compiler found")
        return None
    binary = pathlib.Path(out_dir) / "client"
    built = subprocess.run([compiler, "-O2", "-Wall", "-o", str(binary), str(HERE / "client.c"),
                            "-lzmq"], capture_output=True, text=True)
    if built.returncode != 0:
        print(f"C client: cannot build (libzmq headers missing?):\n{built.stderr}")
        return None
    return binary


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="python,c", help="which clients to run")
    clients = parser.parse_args().clients.split(",")
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"starting a safe-mode worker; its store listens on 127.0.0.1:{port}")
        worker = start_worker(port, os.path.join(tmp, "worker.log"))
        failed = False
        try:
            runs = []
            if "python" in clients:
                runs.append(("pyzmq", [sys.executable, str(HERE / "client.py")]))
            if "c" in clients:
                binary = build_c_client(tmp)
                failed = binary is None
                if binary is not None:
                    runs.append(("C", [str(binary)]))
            for name, command in runs:
                print(f"--- {name} client")
                done = subprocess.run([*command, "127.0.0.1", str(port)], timeout=60)
                failed = failed or done.returncode != 0
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(20)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(10)
        print(f"worker left with exit code {worker.returncode}")
    return 1 if failed or worker.returncode != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
