"""An etcd member restart under live EtcdStore clients: they pause and retry, nothing is lost."""
import threading

import pytest

from store.etcd import EtcdStore
from tests.store.etcd_server import running_etcd
from tests.waiting import wait_until

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]  # not in the quick set


@pytest.mark.parametrize("kill", [False, True], ids=["stopped", "killed"])
def test_clients_ride_through_a_restart_of_etcd(tmp_path, kill):
    with running_etcd(tmp_path / "data") as server:
        store = EtcdStore(server.endpoint, "/restart", timeout=30, ephemeral_ttl=5)
        watcher = EtcdStore(server.endpoint, "/restart", timeout=30)
        try:
            store.set("before", "kept")
            store.set_ephemeral("session", "alive")
            assert store.add("count", 5) == 5
            seen = []
            watcher.watch_key("after", lambda old, new: seen.append(new))
            waited = {}
            blocked = threading.Thread(target=lambda: waited.update(v=watcher.get("after")))
            blocked.start()

            server.stop(kill=kill)
            # Calls made while etcd is down wait for it (connection refused: never applied).
            during = threading.Thread(target=lambda: store.add("count", 1))
            during.start()
            server.start()

            during.join(30)
            assert not during.is_alive()
            store.set("after", "new")
            blocked.join(30)
            assert waited == {"v": b"new"}  # the blocked get's watch resumed after the restart
            assert wait_until(lambda: seen == [b"new"], 10), seen
            assert store.get("before") == b"kept"
            assert store.add("count", 0) == 6  # exactly one add while etcd was away
            assert store.get("session") == b"alive"  # the lease outlived the restart
        finally:
            store.close()
            watcher.close()
