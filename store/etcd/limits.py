"""etcd's limit on the size of one request, and how etcd words a refusal of it."""
from __future__ import annotations

import re
from typing import Dict, Optional

from store.errors import StoreError

MAX_REQUEST_BYTES = 3 << 19
"""etcd's default --max-request-bytes (1.5 MiB): what one write of a key and its value
may carry, and what an `EtcdStore` checks writes against unless told otherwise."""
# etcd's gRPC server reads messages up to this much over --max-request-bytes; past
# that it answers "received message larger than max (N vs. limit + overhead)".
GRPC_OVERHEAD_BYTES = 512 << 10
_OVER_GRPC_MAX = re.compile(r"received message larger than max \(\d+ vs\. (\d+)\)")


class ValueTooLargeError(StoreError, ValueError):
    """A write larger than etcd takes in one request. Not a ConnectionError: sending it
    again cannot help."""


def too_large_limit(answer: Optional[str]) -> Optional[str]:
    """When etcd's `answer` refuses a request as too large: the limit it reveals
    (`` of N bytes``), or "" when it reveals none; otherwise None."""
    if answer == "etcdserver: request is too large":
        return ""
    named = _OVER_GRPC_MAX.search(answer or "")
    if named is None:
        return None
    return f" of {int(named.group(1)) - GRPC_OVERHEAD_BYTES} bytes"


def put_length(request: Dict[str, str]) -> int:
    """The bytes of key and value that a put request (`gateway.put_op`'s, in base64)
    carries."""
    return sum(len(text) // 4 * 3 - text[-2:].count("=")
               for text in (request["key"], request.get("value", "")))
