"""Fault tolerance in place (engine.ft) against restarting everything, and the store's
quorum round against torch's TCPStore barrier. Prints one JSON line.

- kill → the survivors' next committed step, 4 ranks, ~1M parameters: in place
  (``--restart-policy failed``) and restart-all from a checkpoint (the launcher's
  default policy, DistributedDataParallel), the same kill beside it;
- a restarted worker: from its process being ready (model and wrappers built) to its
  first committed step, having received the state from a live member;
- the quorum's cost on a step: median step time of engine.ft against plain DDP, 4 ranks
  (``--step-ranks 2,4`` also at 2), beside plain DDP with a barrier after each step
  (one more point per step where every rank waits for all, as the commit vote is);
- a barrier of 64 processes: our quorum round (one request per member, one release)
  against torch's TCPStore (add then wait), and our add-then-wait.

Usage: ``python benchmarks/bench_ft.py [--barrier 64] [--steps 150] [--step-ranks 4]``.
Every process of the job shares this host's cores (a 2-core VM here): figures are
from one run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._procs import ratio, server_process  # noqa: E402
from benchmarks._store_crowds import barrier  # noqa: E402
from benchmarks.bench_store import _our_server, _torch_server  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "benchmarks", "_ft_worker.py")
KILL_AT = 20


def launch(*args: str, policy: str = "all", ranks: int = 4) -> List[Tuple[str, ...]]:
    """Run the worker under the launcher at `ranks` ranks; its COMMIT, KILL, READY and
    PHASES lines, split."""
    env = dict(os.environ, ACTORGRAD_LOG_LEVEL="error",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "actors.launch", "--standalone",
                          "--nproc-per-node", str(ranks), "--max-restarts", "1", "--restart-policy",
                          policy, WORKER, *args], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"the launched job failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    lines = []
    for line in out.stdout.splitlines():
        fields = line.split(": ", 1)[-1].split()
        if fields and fields[0] in ("COMMIT", "KILL", "READY", "PHASES"):
            lines.append(tuple(fields))
    return lines


def kill_to_commit(lines: List[Tuple[str, ...]], kill_at: int = KILL_AT) -> float:
    """Seconds from the kill to the first commit of a later step by another rank."""
    killed = float(next(f[1] for f in lines if f[0] == "KILL"))
    return min(float(f[3]) for f in lines if f[0] == "COMMIT" and f[1] != "2"
               and int(f[2]) > kill_at and float(f[3]) > killed) - killed


def ready_to_commit(lines: List[Tuple[str, ...]]) -> float:
    """Seconds from the restarted rank 2 being ready to its first committed step."""
    ready = float([f for f in lines if f[0] == "READY" and f[1] == "2"][-1][2])
    return min(float(f[3]) for f in lines
               if f[0] == "COMMIT" and f[1] == "2" and float(f[3]) > ready) - ready


def step_time(lines: List[Tuple[str, ...]], skip: int = 10) -> float:
    """Median seconds between rank 0's committed steps, after the first `skip`."""
    times = [float(f[3]) for f in lines if f[0] == "COMMIT" and f[1] == "0"][skip:]
    return statistics.median(b - a for a, b in zip(times, times[1:]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--barrier", type=int, default=64)
    parser.add_argument("--step-ranks", default="4",
                        help="rank counts for the healthy step's comparison, e.g. 2,4")
    args = parser.parse_args()
    result: Dict[str, Any] = {}
    in_place = launch("ft", "--steps", str(args.steps), "--kill-at", str(KILL_AT),
                      policy="failed")
    result["kill_to_commit_in_place_s"] = round(kill_to_commit(in_place), 3)
    result["joiner_ready_to_commit_s"] = round(ready_to_commit(in_place), 3)
    with tempfile.TemporaryDirectory() as folder:
        restart_all = launch("ddp", "--steps", "40", "--kill-at", str(KILL_AT), "--checkpoint",
                             os.path.join(folder, "ckpt.npz"))
    result["kill_to_commit_restart_all_s"] = round(kill_to_commit(restart_all), 3)
    for ranks in (int(n) for n in args.step_ranks.split(",")):
        runs = {mode: launch(mode, "--steps", "70", ranks=ranks)
                for mode in ("ft", "ddp", "ddp-barrier")}
        ft_step, ddp_step, barrier_step = (step_time(lines) for lines in runs.values())
        at = "" if ranks == 4 else f"_{ranks}_ranks"
        for mode, lines in runs.items():  # forward, backward, optimizer step (rank 0)
            phases = next((f for f in lines if f[0] == "PHASES"), None)
            if phases is None:
                raise RuntimeError(f"rank 0 of {mode} at {ranks} ranks reported no PHASES")
            result[f"{mode.replace('-', '_')}_phases{at}_ms"] = [float(f) for f in phases[1:]]
        result.update({f"ft_step{at}_ms": round(ft_step * 1e3, 2),
                       f"ddp_step{at}_ms": round(ddp_step * 1e3, 2),
                       f"ddp_barrier_step{at}_ms": round(barrier_step * 1e3, 2),
                       f"quorum_overhead{at}_pct": round((ft_step / ddp_step - 1) * 100, 1),
                       f"barrier_overhead{at}_pct": round((barrier_step / ddp_step - 1) * 100,
                                                          1)})
    if args.barrier:
        size = args.barrier
        with server_process(_our_server) as port:
            result[f"barrier_{size}_quorum_ms"] = barrier("quorum", port, size)
        with server_process(_our_server) as port:
            result[f"barrier_{size}_add_wait_ms"] = barrier("ours", port, size)
        try:
            import torch  # noqa: F401
        except ImportError:
            pass
        else:
            with server_process(_torch_server) as port:
                result[f"barrier_{size}_torch_ms"] = barrier("torch", port, size)
            result[f"barrier_{size}_quorum_vs_torch"] = ratio(
                result[f"barrier_{size}_quorum_ms"], result[f"barrier_{size}_torch_ms"])
    result["kill_in_place_vs_restart_all"] = ratio(result["kill_to_commit_in_place_s"],
                                                   result["kill_to_commit_restart_all_s"])
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
