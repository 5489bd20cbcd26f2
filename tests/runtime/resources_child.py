"""The child side of test_resources.py: one scenario in a fresh process, counted.

    python -m tests.runtime.resources_child SCENARIO COUNT
    python -m tests.runtime.resources_child census      (RANK, WORLD_SIZE, MASTER_* set)

A scenario makes its objects, uses them once and either closes them (`close=True`)
or drops them (garbage, never closed). `measure` warms the process up with one
closed round (the process's ZeroMQ context and its I/O threads start lazily and
stay), counts the OS threads and open fds, runs COUNT dropped rounds, collects
garbage and then waits, with a deadline, until the counts are back at the baseline
and every server port of the dropped rounds can be bound again. It prints one
line, ``RESULT {json}``, that the test reads.

`census` is one rank of a world: an RPC world, a process group and a TCPStore pair
with a watch, all busy at once. It reports the live threads the thread registry
does not list, then ends everything and reports the registry once it is back at
the state it had before.
"""
from __future__ import annotations

import gc
import json
import operator
import os
import sys
import threading
import time
import uuid
from typing import Callable, Dict, Iterable, List, Optional

import actors
import numpy as np

from actors.runtime import Actor, Kind, UnknownKindError
from actors.runtime.io.channel import Channel
from actors.runtime.concurrency.threads import running_threads
from store import TCPStore
from tests.leftovers import open_fds, os_threads
from tests.net import bindable, free_port
from tests.waiting import wait_until

RESULT_PREFIX = "RESULT "
ETCD_VARIABLE = "ACTORGRAD_TEST_ETCD"  # host:port of the etcd server the etcd scenarios use
RELEASE_TIMEOUT = 10.0  # for the threads and fds, then again for the ports
CALL_TIMEOUT = 10.0

# One round: (close, address of a long-lived host actor) -> the round's server port, if any.
Round = Callable[[bool, str], Optional[int]]


def _ping(address: str) -> Channel:
    """A connected Channel to `address` that has had one PING answered."""
    channel = Channel(address, connect_timeout=5.0)
    channel.connect()
    assert channel.call(Kind.PING, "ping", timeout=CALL_TIMEOUT) == "ping"
    return channel


def tcp_store_pair(close: bool, host: str) -> int:
    """A TCPStore master and a client; one set seen by one get."""
    master = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=CALL_TIMEOUT)
    client = TCPStore("127.0.0.1", master.port, timeout=CALL_TIMEOUT)
    client.set("key", "value")
    assert master.get("key") == b"value"
    if close:
        client.close()
        master.close()
    return master.port


def actor(close: bool, host: str) -> int:
    """A bound, started actor that answered one PING through a channel, which is closed."""
    served = Actor("tcp://127.0.0.1:0", name="dropped", num_worker_threads=2).start()
    _ping(served.address).close()
    if close:
        served.stop()
    return served.port


def channel(close: bool, host: str) -> None:
    """A channel to the long-lived host actor, connected and used once."""
    opened = _ping(host)
    if close:
        opened.close()
    return None


def exposed_client(close: bool, host: str) -> None:
    """A named-call client that made one JSON call (the host answers it with an error)."""
    client = actors.ExposedClient(host, timeout=CALL_TIMEOUT)
    try:
        client.call("anything", np.ones(300))
    except UnknownKindError:
        pass
    if close:
        client.close()
    return None


def attached_sockets(close: bool, host: str) -> int:
    """An actor with a bound PULL it made and a PUSH it made, one message through both."""
    import zmq

    served = Actor("tcp://127.0.0.1:0", name="attaching", num_worker_threads=2).start()
    done = []
    inbound = served.attach("tcp://127.0.0.1:0", lambda frames: done.append(1),
                            socket_type=zmq.PULL, bind=True)
    feeder = Actor(None, name="feeder", num_worker_threads=1).start()
    out = feeder.attach(inbound.endpoint, socket_type=zmq.PUSH)
    out.send([b"one"])
    assert wait_until(lambda: done == [1], CALL_TIMEOUT)
    if close:
        feeder.stop()
        served.stop()
    return int(inbound.endpoint.rsplit(":", 1)[1])


def rpc_world(close: bool, host: str) -> int:
    """An RPC world of one worker: init_rpc, one rpc_sync, shutdown (its close either way)."""
    port = free_port()
    actors.init_rpc("w0", rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{port}",
                    timeout=CALL_TIMEOUT)
    assert actors.rpc_sync("w0", operator.add, args=(1, 2)) == 3
    actors.shutdown()
    return port


def process_group(close: bool, host: str) -> int:
    """A process group of one beside an RPC world of one on the same env:// store:
    init both, one all_reduce and one rpc_sync, destroy and shut down (their close)."""
    import numpy as np

    import actors.distributed as dist

    port = free_port()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0",
                      WORLD_SIZE="1")
    dist.init_process_group(timeout=CALL_TIMEOUT)
    actors.init_rpc("w0", timeout=CALL_TIMEOUT)
    array = np.arange(3.0)
    dist.all_reduce(array)
    assert array.tolist() == [0.0, 1.0, 2.0]
    assert actors.rpc_sync("w0", operator.add, args=(1, 2)) == 3
    dist.destroy_process_group()
    actors.shutdown()
    return port


def rendezvous_handler(close: bool, host: str) -> int:
    """A handler from the registry (c10d, hosting its TCPStore) that joined a round of one
    and read the round's bootstrap address; shut down, or dropped while heart-beating."""
    from store.elastic import RendezvousParameters, get_rendezvous_handler

    port = free_port()
    handler = get_rendezvous_handler(RendezvousParameters(
        "c10d", f"127.0.0.1:{port}", "resources", 1, 1, local_addr="127.0.0.1",
        is_host=True, last_call_timeout=0.1, keep_alive_interval=0.05))
    assert handler.next_rendezvous().bootstrap_store_info.master_addr == "127.0.0.1"
    if close:
        handler.shutdown()
    return port


def etcd_store(close: bool, host: str) -> None:
    """An EtcdStore (of the server at $ACTORGRAD_TEST_ETCD) with a watch whose callback
    refers back to it, an ephemeral key on its lease, one set seen by one get."""
    from store.etcd import EtcdStore

    store = EtcdStore(os.environ[ETCD_VARIABLE], f"/resources/{uuid.uuid4().hex}", timeout=10,
                      ephemeral_ttl=3)
    store.watch_key("watched", lambda old, new: store.num_keys())
    store.set_ephemeral("alive", "1")
    store.set("watched", "1")
    assert store.get("watched") == b"1"
    if close:
        store.close()


def etcd_rendezvous_handler(close: bool, host: str) -> None:
    """A handler from the registry ("etcd") that joined a round of one; shut down, or
    dropped while heart-beating."""
    from store.elastic import RendezvousParameters, get_rendezvous_handler

    handler = get_rendezvous_handler(RendezvousParameters(
        "etcd", os.environ[ETCD_VARIABLE], "resources", 1, 1, local_addr="127.0.0.1",
        key_prefix=f"/resources/{uuid.uuid4().hex}", last_call_timeout=0.1,
        keep_alive_interval=0.05))
    assert handler.next_rendezvous().rank == 0
    if close:
        handler.shutdown()


SCENARIOS: Dict[str, Round] = {
    "tcp_store_pair": tcp_store_pair,
    "actor": actor,
    "channel": channel,
    "exposed_client": exposed_client,
    "attached_sockets": attached_sockets,
    "rpc_world": rpc_world,
    "process_group": process_group,
    "rendezvous_handler": rendezvous_handler,
    "etcd_store": etcd_store,
    "etcd_rendezvous_handler": etcd_rendezvous_handler,
}


def unbindable_after_wait(ports: Iterable[int]) -> List[int]:
    """The ports that still cannot be bound once RELEASE_TIMEOUT has passed (or none)."""
    remaining = sorted(set(ports))

    def all_bindable() -> bool:
        remaining[:] = [port for port in remaining if not bindable(port)]
        return not remaining

    wait_until(all_bindable, RELEASE_TIMEOUT)
    return remaining


def measure(scenario: str, count: int) -> dict:
    """Counts before and after `count` dropped rounds of `scenario` (see the module doc)."""
    one_round = SCENARIOS[scenario]
    host = Actor("tcp://127.0.0.1:0", name="host", num_worker_threads=2).start()
    one_round(True, host.address)  # warm-up: what starts lazily and is meant to stay
    gc.collect()
    threads_before, fds_before = os_threads(), open_fds()

    started = time.monotonic()
    ports = [one_round(False, host.address) for _ in range(count)]
    dropped_at = time.monotonic()

    def released_all() -> bool:
        # Collected on each look: a callback still in flight (a watch event queued for
        # delivery) keeps its owner alive through one collection, not after it ran.
        gc.collect()
        return os_threads() <= threads_before and open_fds() <= fds_before

    released = wait_until(released_all, RELEASE_TIMEOUT)
    released_at = time.monotonic()
    threads_after, fds_after = os_threads(), open_fds()
    unbindable = unbindable_after_wait(port for port in ports if port is not None)
    return {
        "scenario": scenario, "count": count,
        "threads_before": threads_before, "threads_after": threads_after,
        "fds_before": fds_before, "fds_after": fds_after,
        "released": released, "ports_checked": sum(port is not None for port in ports),
        "unbindable_ports": unbindable,
        "seconds_for_rounds": round(dropped_at - started, 3),
        "seconds_to_release": round(released_at - dropped_at, 3),
    }


def read_result(text: str) -> Optional[dict]:
    """The result a child printed into `text`, once its line is complete."""
    for line in text.splitlines(keepends=True):
        if line.startswith(RESULT_PREFIX) and line.endswith("\n"):
            return json.loads(line[len(RESULT_PREFIX):])
    return None


def double(tensor):
    """A remote function for the census's distributed backward."""
    return tensor * 2


def unregistered_threads() -> List[str]:
    """Live Python threads other than the main one that the registry does not list,
    pyzmq's garbage collector apart (a library thread, see actors/runtime/__init__.py)."""
    from zmq.utils.garbage import GarbageCollectorThread

    listed = {record.ident for record in running_threads()}
    return sorted(thread.name for thread in threading.enumerate()
                  if thread is not threading.main_thread() and thread.ident not in listed
                  and not isinstance(thread, GarbageCollectorThread))


def unregistered_after_wait() -> List[str]:
    """The threads still unlisted once RELEASE_TIMEOUT has passed (or none): `threading`
    enumerates a starting thread a moment before it counts as alive."""
    missing = unregistered_threads()

    def all_listed() -> bool:
        missing[:] = unregistered_threads()
        return not missing

    wait_until(all_listed, RELEASE_TIMEOUT)
    return missing


def registered() -> List[str]:
    return sorted(f"{r.name} ({r.owner}: {r.purpose})" for r in running_threads())


def census() -> dict:
    """Every kind of thread busy at once, the registry compared with what runs, then all
    ended (see the module doc)."""
    import actors.distributed as dist
    import engine
    from engine import dist_autograd

    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    other = (rank + 1) % world_size
    before = registered()
    # Longer than a census that waits out RELEASE_TIMEOUT while the irecv waits.
    world_timeout = 3 * RELEASE_TIMEOUT
    dist.init_process_group(timeout=world_timeout)
    actors.init_rpc(f"w{rank}", timeout=world_timeout)
    master = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=CALL_TIMEOUT)
    client = TCPStore("127.0.0.1", master.port, timeout=CALL_TIMEOUT)
    seen = []
    client.watch_key("key", lambda old, new: seen.append(new))
    client.set("key", "value")
    assert wait_until(lambda: seen == [b"value"], CALL_TIMEOUT)

    array = np.ones(3)
    dist.all_reduce(array, async_op=True).wait()
    with dist_autograd.context() as context_id:
        loss = actors.rpc_sync(f"w{other}", double,
                               args=(engine.ones(3, requires_grad=True),)).sum()
        dist_autograd.backward(context_id, [loss])
    # Rank 1 counts while its irecv waits: rank 0 sends once told that it has counted.
    received = dist.irecv(np.zeros(3), src=0) if rank == 1 else None
    missing = unregistered_after_wait()
    during = registered()
    counted = np.zeros(1)
    if rank == 0:
        dist.recv(counted, src=1, tag=1)
        dist.send(np.arange(3.0), dst=1)
    else:
        dist.send(counted, dst=0, tag=1)
        received.wait()

    client.close()
    master.close()
    dist.destroy_process_group()
    actors.shutdown(timeout=world_timeout)
    released = wait_until(lambda: registered() == before, RELEASE_TIMEOUT)
    return {"rank": rank, "unregistered": missing, "registered": during,
            "before": before, "after": registered(), "released": released}


def main(argv: List[str]) -> int:
    if argv[0] == "census":
        result = census()
    else:
        result = measure(argv[0], int(argv[1]))
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
