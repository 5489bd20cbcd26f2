"""W6: elastic rendezvous wall time for N = 2, 4, 8, 16 processes, and failure detection.

Side by side in one run: our `store.elastic` handler over our TCPStore, and torch's
dynamic rendezvous over its C10d backend and TCPStore when torch is importable.
Each node is its own OS process; the store is hosted by this process.

- `rdzv_s`: from the moment all N processes call next_rendezvous (the last call)
  until the last one returns; min = max = N.
- `start_s`: from starting the N processes until the last one has its rank
  (process start, imports, connection and rendezvous).
- `drop_s`: 3 nodes (min 2, max 3, default settings); one is SIGKILLed and the
  survivors re-join at once, as agents whose workers failed would; seconds until
  the stored state no longer lists the killed node.
- `survivors_s`: seconds from the kill until both survivors finished a new round.

Prints one JSON line. Usage:
``python benchmarks/bench_rendezvous.py [--runs R] [--sizes 2,4,8,16] [--no-failure]``.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._procs import ratio  # noqa: E402

LINE_TIMEOUT = 120.0


# ---- the node process ---------------------------------------------------------------

def _child(impl: str, port: int, min_nodes: int, max_nodes: int, run_id: str) -> None:
    """One rendezvous node: 'ready', then each stdin line 'go' runs one round and prints it."""
    if impl == "ours":
        from store import TCPStore
        from store.elastic import DynamicRendezvousHandler, StoreRendezvousBackend

        store = TCPStore("127.0.0.1", port, timeout=120)
        backend = StoreRendezvousBackend(store, run_id)
        handler = DynamicRendezvousHandler.from_backend(run_id, store, backend, min_nodes,
                                                        max_nodes)
    else:
        from datetime import timedelta

        from torch.distributed import TCPStore
        from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import (
            C10dRendezvousBackend)
        from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
            DynamicRendezvousHandler)

        store = TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=120))
        backend = C10dRendezvousBackend(store, run_id)
        handler = DynamicRendezvousHandler.from_backend(run_id, store, backend, min_nodes,
                                                        max_nodes)
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


# ---- the driver ---------------------------------------------------------------------

class Node:
    """A node process and a thread that queues its output lines."""

    def __init__(self, impl: str, port: int, min_nodes: int, max_nodes: int, run_id: str):
        env = dict(os.environ, ACTORGRAD_LOG_LEVEL="warning", PYTHONPATH=ROOT)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_rendezvous", "--child", impl, str(port),
             str(min_nodes), str(max_nodes), run_id],
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
    """The store both implementations' nodes talk to, hosted in this process."""

    def __init__(self, impl: str):
        self.impl = impl
        if impl == "ours":
            from store import TCPStore

            self.store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                                  timeout=60)
            self.port = self.store.port
        else:
            from datetime import timedelta

            from torch.distributed import TCPStore

            self.store = TCPStore("127.0.0.1", 0, 1, True, timeout=timedelta(seconds=60),
                                  wait_for_workers=False)
            self.port = self.store.port

    def listed_pids(self, run_id: str) -> set:
        """PIDs of the nodes the stored state lists anywhere."""
        if self.impl == "ours":
            from store.elastic.state import decode_state

            state = decode_state(self.store.get(f"elastic/rdzv/{run_id}/state"))
        else:
            import base64
            import pickle

            state = pickle.loads(base64.b64decode(self.store.get("torch.rendezvous." + run_id)))
        nodes = set(state.participants) | set(state.wait_list) | set(state.last_heartbeats)
        return {node.pid for node in nodes}

    def close(self) -> None:
        if self.impl == "ours":
            self.store.close()


def _round(nodes: List[Node]) -> List[Dict[str, Any]]:
    for node in nodes:
        node.send("go")
    return [json.loads(node.line()) for node in nodes]


def measure_rendezvous(impl: str, n: int, run: int) -> Dict[str, float]:
    host = Host(impl)
    run_id = f"bench-{impl}-{n}-{run}"
    began = time.time()
    nodes = [Node(impl, host.port, n, n, run_id) for _ in range(n)]
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
        host.close()


def measure_failure(impl: str, run: int) -> Dict[str, float]:
    host = Host(impl)
    run_id = f"bench-fail-{impl}-{run}"
    nodes = [Node(impl, host.port, 2, 3, run_id) for _ in range(3)]
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
        host.close()


def _median(runs: int, fn: Any, *args: Any) -> Dict[str, float]:
    samples = [fn(*args, run) for run in range(runs)]
    return {key: round(statistics.median(s[key] for s in samples), 4) for key in samples[0]}


def _torch_available() -> bool:
    try:
        import torch.distributed.elastic.rendezvous.dynamic_rendezvous  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means no comparison
        return False
    return True


def main(argv: Optional[List[str]] = None) -> None:
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="2,4,8,16")
    parser.add_argument("--no-failure", action="store_true", help="skip the kill scenario")
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    impls = ["ours"] + ([] if args.no_torch or not _torch_available() else ["torch"])
    result: Dict[str, Any] = {"workload": "W6 elastic rendezvous", "runs": args.runs}
    for impl in impls:
        result[impl] = {f"n{n}": _median(args.runs, measure_rendezvous, impl, n) for n in sizes}
        if not args.no_failure:
            result[impl]["failure"] = _median(args.runs, measure_failure, impl)
    if "torch" in result:
        ours, theirs = result["ours"], result["torch"]
        result["ratio_torch_over_ours"] = {
            **{f"n{n}_rdzv": ratio(theirs[f"n{n}"]["rdzv_s"], ours[f"n{n}"]["rdzv_s"])
               for n in sizes},
            **{f"n{n}_start": ratio(theirs[f"n{n}"]["start_s"], ours[f"n{n}"]["start_s"])
               for n in sizes},
            **({k: ratio(theirs["failure"][k], ours["failure"][k])
                for k in ("drop_s", "survivors_s")} if not args.no_failure else {}),
        }
    print(json.dumps(result))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    else:
        main()
