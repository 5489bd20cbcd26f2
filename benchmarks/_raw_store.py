"""The floor of a store wake-up over ZeroMQ: a raw pyzmq key-value server that parks
a wait until its key is set, and a client with `set`, `get` and `wait`.

The server is one Python thread on a ROUTER; a request is ``[op, key, value]`` (op
``set`` or ``get``) and a reply one frame, the value. A `get` of a key not set yet is
parked and answered by the `set` that sets it, as a store's `wait` is. No codec, no
headers, no timeouts, no checks: what a wake-up costs over ZeroMQ between Python
processes when nothing else is done, measured by the same loop as the stores'
(`bench_store.wake_latency`).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Dict, List, Sequence


def raw_store_server(ready: Any) -> None:
    """Serve until killed; put the port on `ready` first."""
    import zmq

    router = zmq.Context.instance().socket(zmq.ROUTER)
    ready.put(router.bind_to_random_port("tcp://127.0.0.1"))
    values: Dict[bytes, bytes] = {}
    parked: Dict[bytes, List[bytes]] = defaultdict(list)
    while True:
        identity, op, key, value = router.recv_multipart()
        if op == b"set":
            values[key] = value
            for waiter in parked.pop(key, ()):
                router.send_multipart([waiter, value])
            router.send_multipart([identity, b""])
        elif key in values:
            router.send_multipart([identity, values[key]])
        else:
            parked[key].append(identity)


class RawStoreClient:
    """One DEALER to `raw_store_server`, with the store calls the wake-up loop makes."""

    def __init__(self, port: int):
        import zmq

        self._dealer = zmq.Context.instance().socket(zmq.DEALER)
        self._dealer.connect(f"tcp://127.0.0.1:{port}")

    def set(self, key: str, value: bytes) -> None:
        self._dealer.send_multipart([b"set", key.encode(), value])
        self._dealer.recv()

    def get(self, key: str) -> bytes:
        self._dealer.send_multipart([b"get", key.encode(), b""])
        return self._dealer.recv()

    def wait(self, keys: Sequence[str]) -> None:
        for key in keys:
            self.get(key)
