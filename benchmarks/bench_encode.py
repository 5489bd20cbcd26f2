"""What encoding a message body costs the sending thread, per kind of payload.

`actors.runtime.protocol.serialization.dumps` first decides whether the standard
pickler can take the payload (`_plainness`), then pickles it. This times `dumps` of
the payloads the hot paths send: an RPC call of a function defined in the running
script (as users write them) and of a module's function, both to a worker that runs
the same script; a reply; a store operation; a call with an array and a nested dict.
For each: nanoseconds per `dumps` (best of `--rounds` rounds of `--count` calls: the
cost without the host's interruptions) and the Python bytecodes it runs (counted with
`sys.settrace`, the same on every host). Run it from each tree to compare two trees.
Prints one JSON line. Usage: ``python benchmarks/bench_encode.py [--count N] [--rounds R]``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable, Dict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from actors.runtime.protocol import serialization  # noqa: E402
from actors.runtime.protocol.script_refs import same_script_receiver  # noqa: E402
from benchmarks._procs import echo  # noqa: E402


def script_function(x: Any) -> Any:
    return x


def payloads() -> Dict[str, Any]:
    """What the hot paths encode, by name; a call is ``(fn, args, kwargs, rank, meta)``."""
    return {
        "call_script_function": (script_function, (1,), {}, 0, {}),
        "call_module_function": (echo, (1,), {}, 0, {}),
        "reply": (1, {}),
        "store_op": ("set", "key", b"value"),
        "call_with_array_and_dict": (script_function, (np.zeros(4),), {"k": [1, "a"]}, 0,
                                     {"meta": {"context": 1}}),
    }


def bytecodes(call: Callable[[], Any]) -> int:
    counted = [0]

    def trace(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            counted[0] += 1
        return trace

    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(None)
    return counted[0]


def best_ns(call: Callable[[], Any], count: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(count):
            call()
        best = min(best, (time.perf_counter_ns() - start) / count)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20_000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds; the best counts")
    args = parser.parse_args()
    result: Dict[str, Any] = {"workload": "encode", "count": args.count, "rounds": args.rounds}
    with same_script_receiver(True):
        for name, payload in payloads().items():
            def encode(payload: Any = payload) -> Any:
                return serialization.dumps(payload)

            encode()  # what is learnt once per function is learnt before counting
            result[f"{name}_ns"] = round(best_ns(encode, args.count, args.rounds), 1)
            result[f"{name}_bytecodes"] = bytecodes(encode)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
