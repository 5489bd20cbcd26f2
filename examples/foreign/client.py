"""A plain pyzmq client of actorgrad (no actorgrad import): what the C client does, in Python.

It speaks the wire protocol of docs/PROTOCOL.md: a DEALER socket, a 16-byte
header, a JSON body and raw buffer frames, so it works against a worker and
store in safe mode (--no-pickle). Usage: ``python client.py STORE_HOST STORE_PORT``.
"""
import itertools
import json
import struct
import sys

import numpy as np
import zmq

HEADER = struct.Struct("<2sBBHHQ")  # magic, version, flags, kind, nbufs, req_id
RESPONSE, ERROR, JSON = 0x01, 0x02, 0x08
STORE_SET, STORE_GET, RPC_CALL_NAMED = 0x0100, 0x0101, 0x0204
TIMEOUT_MS = 10_000

_req_ids = itertools.count(1)


def request(sock, kind, document, buffers=()):
    """Send one JSON request; return (document, buffer frames) of its reply."""
    req_id = next(_req_ids)
    header = HEADER.pack(b"AG", 1, JSON, kind, len(buffers), req_id)
    sock.send_multipart([header, json.dumps(document).encode(), *buffers])
    if not sock.poll(TIMEOUT_MS):
        raise TimeoutError(f"no reply to request {req_id}")
    header, body, *frames = sock.recv_multipart()
    magic, _, flags, _, _, echoed = HEADER.unpack(header)
    assert magic == b"AG" and flags & RESPONSE and echoed == req_id
    reply = json.loads(body)
    if flags & ERROR:
        raise RuntimeError(f"{reply['type']}: {reply['message']}")
    return reply, frames


def array_arg(array, index):
    """The JSON marker of `array`, sent as buffer frame `index`."""
    return {"$array": index, "dtype": array.dtype.str, "shape": list(array.shape)}


def array_from(marker, frames):
    """The array a reply's ``$array`` marker describes."""
    raw = frames[marker["$array"]]
    return np.frombuffer(raw, dtype=marker["dtype"]).reshape(marker["shape"])


def main(host, port):
    ctx = zmq.Context.instance()
    store = ctx.socket(zmq.DEALER)
    store.connect(f"tcp://{host}:{port}")

    request(store, STORE_SET, {"key": "foreign/python", "value": {"$buf": 0}},
            [b"hello from pyzmq"])
    reply, frames = request(store, STORE_GET, {"key": "foreign/python", "timeout": 5})
    assert frames[reply["$buf"]] == b"hello from pyzmq"
    print("store: set and got back 'hello from pyzmq'")
    reply, frames = request(store, STORE_GET, {"key": "rpc/addresses/0", "timeout": 30})
    address = frames[reply["$buf"]].decode()
    print(f"worker: {address}")

    worker = ctx.socket(zmq.DEALER)
    worker.connect(address)
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.5], dtype=np.float32)
    reply, frames = request(worker, RPC_CALL_NAMED,
                            {"fn": "scale", "args": [array_arg(values, 0), 2.5]}, [values])
    scaled = array_from(reply, frames)
    assert scaled.dtype == np.float32 and np.array_equal(scaled, values * 2.5)
    print(f"scale: {scaled.tolist()}")
    matrix = np.arange(6, dtype=np.float64).reshape(2, 3)
    reply, _ = request(worker, RPC_CALL_NAMED, {"fn": "stats", "args": [array_arg(matrix, 0)]},
                       [matrix])
    print(f"stats: {reply}")
    try:
        request(worker, RPC_CALL_NAMED, {"fn": "nope", "args": []})
        raise AssertionError("calling an unknown name did not fail")
    except RuntimeError as exc:
        print(f"unknown name: {str(exc)[:80]}...")
    for sock in (worker, store):
        sock.close(0)
    print("pyzmq client: all checks passed")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
