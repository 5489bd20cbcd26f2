"""Store clients in spawned processes, for the etcd tests."""
import threading

from store.errors import StoreError
from store.etcd import EtcdStore


def hold_ephemeral(endpoint, prefix, ttl, ready):
    """Set an ephemeral key and wait to be killed."""
    store = EtcdStore(endpoint, prefix, timeout=10, ephemeral_ttl=ttl)
    store.set_ephemeral("alive", "yes")
    ready.put("set")
    threading.Event().wait(600)  # until the test kills this process


def renew_ephemeral(endpoint, prefix, ttl, ready):
    """Set an ephemeral key again and again (as a rendezvous node announces itself),
    until killed."""
    store = EtcdStore(endpoint, prefix, timeout=10, ephemeral_ttl=ttl)
    store.set_ephemeral("alive", "yes")
    ready.put("set")
    period = threading.Event()
    while not period.wait(ttl / 8):
        try:
            store.set_ephemeral("alive", "yes")
        except StoreError:
            pass  # the test watches the key itself


def rpc_rank(endpoint, prefix, rank, results):
    import actors

    actors.init_rpc(f"w{rank}", rank, 2, init_method=f"etcd://{endpoint}{prefix}", timeout=60)
    try:
        results.put(actors.rpc_sync(f"w{1 - rank}", sum, args=([rank, 10],)))
    finally:
        actors.shutdown()


def process_group_rank(endpoint, prefix, rank, results):
    import numpy as np

    import actors.distributed as dist

    dist.init_process_group(init_method=f"etcd://{endpoint}{prefix}", rank=rank,
                            world_size=2, timeout=60)
    try:
        array = np.array([rank + 1.0])
        dist.all_reduce(array)
        results.put(float(array[0]))
    finally:
        dist.destroy_process_group()
