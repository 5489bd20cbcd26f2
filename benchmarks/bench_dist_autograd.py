"""W4 and W4b: the design note's two-worker example, forward + backward + get_gradients.

W4 uses 3x3 tensors (overhead-bound), W4b 256x256 with a matmul on the remote side.
Side by side in one run with torch's distributed autograd when torch is importable.
Also reports, for actorgrad, how an iteration splits between the forward RPC, the
backward pass and the context release, and how many messages it sends.
Prints one JSON line. Usage: ``python benchmarks/bench_dist_autograd.py [--iters N]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Dict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import _counting  # noqa: E402
from benchmarks._procs import (actorgrad_worker, free_port, ratio,  # noqa: E402
                               server_process, torch_worker)






def ours(iters: int) -> Dict[str, Any]:
    import actors
    import engine
    from engine import dist_autograd

    port = free_port()
    figures: Dict[str, Any] = {}
    with server_process(actorgrad_worker, port, True):
        actors.init_rpc("worker0", 0, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=60)
        try:
            for name, size, op in (("w4", 3, engine.add), ("w4b", 256, engine.matmul)):
                total, forward, backward, release = [], [], [], []
                for i in range(iters + 20):
                    t1 = engine.rand(size, size, requires_grad=True)
                    t2 = engine.rand(size, size, requires_grad=True)
                    t4 = engine.rand(size, size, requires_grad=True)
                    start = time.perf_counter()
                    with dist_autograd.context() as context_id:
                        t3 = actors.rpc_sync("worker1", op, args=(t1, t2))
                        after_forward = time.perf_counter()
                        loss = engine.mul(t3, t4).sum()
                        dist_autograd.backward(context_id, [loss])
                        dist_autograd.get_gradients(context_id)
                        after_backward = time.perf_counter()
                    end = time.perf_counter()
                    if i >= 20:
                        total.append(end - start)
                        forward.append(after_forward - start)
                        backward.append(after_backward - after_forward)
                        release.append(end - after_backward)
                _counting.install()
                there = actors.rpc_sync("worker1", _counting.messages_sent)
                here = _counting.messages_sent()
                with dist_autograd.context() as context_id:
                    t3 = actors.rpc_sync("worker1", op, args=(t1, t2))
                    dist_autograd.backward(context_id, [engine.mul(t3, t4).sum()])
                here = _counting.messages_sent() - here
                # less one: the reply to the first count, counted on worker1 after it
                messages = here + actors.rpc_sync("worker1", _counting.messages_sent) - there - 1
                ms = lambda xs: round(statistics.median(xs) * 1e3, 3)  # noqa: E731
                figures[name] = {"ms_per_iter": ms(total), "forward_rpc_ms": ms(forward),
                                 "backward_ms": ms(backward), "release_ms": ms(release),
                                 "messages_per_iter": messages}
        finally:
            actors.shutdown()
    return figures


def torch_dist(iters: int) -> Dict[str, Any]:
    import torch
    import torch.distributed.autograd as dist_autograd
    import torch.distributed.rpc as rpc

    port = free_port()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    figures: Dict[str, Any] = {}
    with server_process(torch_worker, port):
        rpc.init_rpc("worker0", rank=0, world_size=2)
        try:
            for name, size, op in (("w4", 3, torch.add), ("w4b", 256, torch.matmul)):
                total = []
                for i in range(iters + 20):
                    t1 = torch.rand(size, size, requires_grad=True)
                    t2 = torch.rand(size, size, requires_grad=True)
                    t4 = torch.rand(size, size, requires_grad=True)
                    start = time.perf_counter()
                    with dist_autograd.context() as context_id:
                        t3 = rpc.rpc_sync("worker1", op, args=(t1, t2))
                        loss = torch.mul(t3, t4).sum()
                        dist_autograd.backward(context_id, [loss])
                        dist_autograd.get_gradients(context_id)
                    if i >= 20:
                        total.append(time.perf_counter() - start)
                figures[name] = {"ms_per_iter": round(statistics.median(total) * 1e3, 3)}
        finally:
            rpc.shutdown()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iters", type=int, default=300)
    args = parser.parse_args()
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    result: Dict[str, Any] = {"workloads": "W4,W4b", "iters": args.iters,
                              "actorgrad": ours(args.iters)}
    try:
        import torch.distributed.autograd  # noqa: F401
    except ImportError:
        result["torch"] = None
    else:
        result["torch"] = torch_dist(args.iters)
        result["ratios"] = {
            w: ratio(result["actorgrad"][w]["ms_per_iter"], result["torch"][w]["ms_per_iter"])
            for w in ("w4", "w4b")}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
