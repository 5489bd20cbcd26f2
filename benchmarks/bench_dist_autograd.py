"""W4, W4b and PS: distributed autograd's iteration, forward + backward, in FAST or SMART mode.

W4 and W4b are the design note's two-worker example (forward RPC, backward,
`get_gradients`): W4 uses 3x3 tensors (overhead-bound), W4b 256x256 with a matmul on
the remote side. PS is a step of `examples/parameter_server.py` (forward on the
server, loss here, backward, `DistributedOptimizer.step`). Side by side in one run
with torch's distributed autograd (W4, W4b) when torch is importable. Also reports,
for actorgrad, how an iteration splits between the forward RPC, the backward pass
and the context release, how many messages it sends, and how many one backward pass
of W4 sends. With ``--mode both`` the two modes alternate iteration by iteration and
``smart_over_fast`` gives SMART's time over FAST's. Prints one JSON line. Usage:
``python benchmarks/bench_dist_autograd.py [--iters N] [--mode fast|smart|both]
[--no-torch]``.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import _counting  # noqa: E402
from benchmarks._procs import (actorgrad_worker, free_port, ratio,  # noqa: E402
                               server_process, torch_worker)

WORKLOADS = ("w4", "w4b", "ps")


def design_note(size: int, op: Any) -> Callable[[str], Tuple[float, ...]]:
    """W4 (3x3, add) or W4b (256x256, matmul): one iteration in a mode, timed."""
    import actors
    import engine
    from engine import dist_autograd

    def iteration(mode: str) -> Tuple[float, ...]:
        t1, t2, t4 = (engine.rand(size, size, requires_grad=True) for _ in range(3))
        start = time.perf_counter()
        with dist_autograd.context() as context_id:
            t3 = actors.rpc_sync("worker1", op, args=(t1, t2))
            after_forward = time.perf_counter()
            dist_autograd.backward(context_id, [engine.mul(t3, t4).sum()], mode=mode)
            dist_autograd.get_gradients(context_id)
            after_backward = time.perf_counter()
        return start, after_forward, after_backward, time.perf_counter()

    return iteration


def parameter_server_step() -> Callable[[str], Tuple[float, ...]]:
    """PS: a step of `examples/parameter_server.py` (its 64-64-10 MLP on worker1, a
    batch of 32): forward over RPC, cross-entropy here, backward, optimizer step."""
    import numpy as np

    import actors
    import engine
    from engine import dist_autograd, optim
    from engine.nn import functional as F
    from engine.optim import DistributedOptimizer
    from examples.parameter_server import ParameterServer, server_forward, server_parameters

    server = actors.remote("worker1", ParameterServer)
    optimizer = DistributedOptimizer(
        optim.SGD, actors.rpc_sync("worker1", server_parameters, args=(server,)),
        lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)

    def iteration(mode: str) -> Tuple[float, ...]:
        images = engine.tensor(rng.uniform(0, 16, (32, 64)))
        labels = rng.integers(0, 10, 32)
        start = time.perf_counter()
        with dist_autograd.context() as context_id:
            logits = actors.rpc_sync("worker1", server_forward, args=(server, images))
            after_forward = time.perf_counter()
            dist_autograd.backward(context_id, [F.cross_entropy(logits, labels)], mode=mode)
            optimizer.step(context_id)
            after_backward = time.perf_counter()
        return start, after_forward, after_backward, time.perf_counter()

    return iteration


def messages_of(run: Callable[[], Any]) -> int:
    """Messages both processes send while `run()` runs (less the counting calls')."""
    import actors

    there = actors.rpc_sync("worker1", _counting.messages_sent)
    here = _counting.messages_sent()
    run()
    here = _counting.messages_sent() - here
    # less one: the reply to the first count, counted on worker1 after it
    return here + actors.rpc_sync("worker1", _counting.messages_sent) - there - 1


def backward_messages(mode: str) -> int:
    """Messages of one backward pass of W4's graph in `mode`."""
    import actors
    import engine
    from engine import dist_autograd

    t1, t2, t4 = (engine.rand(3, 3, requires_grad=True) for _ in range(3))
    with dist_autograd.context() as context_id:
        t3 = actors.rpc_sync("worker1", engine.add, args=(t1, t2))
        loss = engine.mul(t3, t4).sum()
        return messages_of(lambda: dist_autograd.backward(context_id, [loss], mode=mode))


def ours(iters: int, modes: Sequence[str]) -> Dict[str, Any]:
    """Each workload's figures per mode; modes alternate iteration by iteration."""
    import actors
    import engine

    port = free_port()
    figures: Dict[str, Any] = {}
    with server_process(actorgrad_worker, port, True):
        actors.init_rpc("worker0", 0, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=60)
        _counting.install()
        try:
            for name, iteration in (("w4", design_note(3, engine.add)),
                                    ("w4b", design_note(256, engine.matmul)),
                                    ("ps", parameter_server_step())):
                times: Dict[str, List[Tuple[float, ...]]] = {mode: [] for mode in modes}
                for i in range(iters + 20):
                    for mode in (modes if i % 2 else modes[::-1]):
                        stamps = iteration(mode)
                        if i >= 20:
                            times[mode].append(stamps)
                figures[name] = {mode: _summary(times[mode], messages_of(
                    functools.partial(iteration, mode))) for mode in modes}
            figures["w4_backward_messages"] = {mode: backward_messages(mode) for mode in modes}
        finally:
            actors.shutdown()
    return figures


def _summary(stamps: List[Tuple[float, ...]], messages: int) -> Dict[str, Any]:
    ms = lambda xs: round(statistics.median(xs) * 1e3, 3)  # noqa: E731
    return {"ms_per_iter": ms([end - start for start, _, _, end in stamps]),
            "forward_rpc_ms": ms([fwd - start for start, fwd, _, _ in stamps]),
            "backward_ms": ms([bwd - fwd for _, fwd, bwd, _ in stamps]),
            "release_ms": ms([end - bwd for _, _, bwd, end in stamps]),
            "messages_per_iter": messages}


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
    parser.add_argument("--mode", choices=["fast", "smart", "both"], default="fast",
                        help="the backward mode; both: alternate them iteration by "
                             "iteration and report SMART's time over FAST's")
    parser.add_argument("--no-torch", action="store_true", help="skip torch's side")
    args = parser.parse_args()
    os.environ.setdefault("ACTORGRAD_LOG_LEVEL", "warning")
    modes = ["fast", "smart"] if args.mode == "both" else [args.mode]
    figures = ours(args.iters, modes)
    result: Dict[str, Any] = {"workloads": "W4,W4b,PS", "iters": args.iters,
                              "mode": args.mode}
    if args.mode == "both":
        result["smart_over_fast"] = {
            w: ratio(figures[w]["smart"]["ms_per_iter"], figures[w]["fast"]["ms_per_iter"])
            for w in WORKLOADS}
    else:  # one mode: the figures as before, one level up
        figures.update({w: figures[w][args.mode] for w in WORKLOADS})
    result["actorgrad"] = figures
    torch_importable = True
    try:
        import torch.distributed.autograd  # noqa: F401
    except ImportError:
        torch_importable = False
    if args.no_torch or not torch_importable:
        result["torch"] = None
    else:
        result["torch"] = torch_dist(args.iters)
        result["ratios"] = {
            w: ratio(_per_iter(figures[w]), result["torch"][w]["ms_per_iter"])
            for w in ("w4", "w4b")}
    print(json.dumps(result))


def _per_iter(figures: Dict[str, Any]) -> float:
    """FAST mode's time of a workload, whichever way its figures are laid out."""
    return figures["fast"]["ms_per_iter"] if "fast" in figures else figures["ms_per_iter"]


if __name__ == "__main__":
    main()
