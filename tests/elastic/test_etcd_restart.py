"""An etcd member restart in the middle of a rendezvous: the nodes retry, the round completes."""
import pytest

from tests.elastic.conftest import ETCD_LEASE_TTL, Cluster
from tests.store.etcd_server import running_etcd

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]  # not in the quick set


@pytest.mark.parametrize("kill", [False, True], ids=["stopped", "killed"])
def test_a_rendezvous_completes_across_an_etcd_restart(tmp_path, kill):
    with running_etcd(tmp_path / "data") as server:
        cluster = Cluster(("etcd", server.endpoint, "/rdzv-restart", ETCD_LEASE_TTL),
                          "restart", ETCD_LEASE_TTL + 1.0)
        try:
            early = cluster.start(2, 3, 3)
            cluster.probe.wait_for(lambda s: len(s.participants) == 2, 30)

            server.stop(kill=kill)
            server.start()
            late = cluster.start(1, 3, 3)

            reports = cluster.collect(3, 60)
            assert all(r[0] == "joined" for r in reports), reports
            assert sorted(r[2] for r in reports) == [0, 1, 2]
            assert {r[3] for r in reports} == {3}
            assert {r[1] for r in reports} == {p.pid for p in early + late}
            state = cluster.probe.state()
            assert {n.pid for n in state.participants} == {p.pid for p in early + late}
        finally:
            cluster.stop()
            cluster.store.close()
