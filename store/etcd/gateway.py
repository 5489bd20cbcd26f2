"""The etcd v3 calls the store needs, over etcd's JSON gateway (the `etcd3gw` client).

Keys and values are bytes here; the gateway's base64 is this module's business.
Every failure to reach etcd is a StoreConnectionError naming the endpoint.
"""
from __future__ import annotations

import base64
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from store.errors import StoreConnectionError

Event = Tuple[bytes, Optional[bytes], Optional[bytes]]  # key, old value, new value


class KeyValue(NamedTuple):
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int


def encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode(text: Optional[str]) -> bytes:
    return base64.b64decode(text) if text else b""


def prefix_end(prefix: bytes) -> bytes:
    """The end of the key range that starts with `prefix` (etcd's ``range_end``)."""
    data = bytearray(prefix)
    while data and data[-1] == 0xFF:
        data.pop()
    if not data:
        return b"\0"
    data[-1] += 1
    return bytes(data)


def _kv(raw: Dict[str, Any]) -> KeyValue:
    return KeyValue(decode(raw.get("key")), decode(raw.get("value")),
                    int(raw.get("create_revision", 0)), int(raw.get("mod_revision", 0)))


# Request builders for transactions (`txn`): plain dicts in the gateway's JSON.
def put_op(key: bytes, value: bytes, lease: int = 0) -> dict:
    request: Dict[str, Any] = {"key": encode(key), "value": encode(value)}
    if lease:
        request["lease"] = str(lease)
    return {"request_put": request}


def range_op(key: bytes, end: Optional[bytes] = None) -> dict:
    request: Dict[str, Any] = {"key": encode(key)}
    if end is not None:
        request["range_end"] = encode(end)
    return {"request_range": request}


def delete_op(key: bytes) -> dict:
    return {"request_delete_range": {"key": encode(key)}}


def same_revision(key: bytes, mod_revision: int) -> dict:
    """The key was last written at `mod_revision` (0: it does not exist)."""
    if mod_revision == 0:
        return {"key": encode(key), "target": "CREATE", "result": "EQUAL",
                "create_revision": "0"}
    return {"key": encode(key), "target": "MOD", "result": "EQUAL",
            "mod_revision": str(mod_revision)}


class Gateway:
    """One etcd endpoint (``host:port``); safe to share between threads."""

    def __init__(self, endpoint: str, timeout: float):
        import etcd3gw

        host, _, port = endpoint.replace("http://", "").rstrip("/").rpartition(":")
        self.endpoint = endpoint
        self._client = etcd3gw.Etcd3Client(host=host or "127.0.0.1", port=int(port),
                                           timeout=timeout)

    def _post(self, path: str, body: dict) -> dict:
        from etcd3gw import exceptions

        try:
            return self._client.post(self._client.get_url(path), json=body)
        except (exceptions.ConnectionFailedError, exceptions.ConnectionTimeoutError) as exc:
            raise StoreConnectionError(f"etcd at {self.endpoint} unreachable: {exc}") from None
        except exceptions.Etcd3Exception as exc:
            raise StoreConnectionError(f"etcd at {self.endpoint} refused {path}: {exc}") from None

    def range(self, key: bytes, end: Optional[bytes] = None, *, limit: int = 0,
              count_only: bool = False, keys_only: bool = False,
              oldest_first: bool = False) -> Tuple[List[KeyValue], int, int]:
        """``(key-values, count, revision)`` of `key`, or of the range [key, end)."""
        body: Dict[str, Any] = {"key": encode(key)}
        if end is not None:
            body["range_end"] = encode(end)
        if limit:
            body["limit"] = str(limit)
        if count_only:
            body["count_only"] = True
        if keys_only:
            body["keys_only"] = True
        if oldest_first:
            body.update(sort_target="CREATE", sort_order="ASCEND")
        reply = self._post("/kv/range", body)
        return ([_kv(raw) for raw in reply.get("kvs", [])], int(reply.get("count", 0)),
                int(reply["header"]["revision"]))

    def put(self, key: bytes, value: bytes, lease: int = 0) -> None:
        self._post("/kv/put", put_op(key, value, lease)["request_put"])

    def delete(self, key: bytes, end: Optional[bytes] = None) -> int:
        body: Dict[str, Any] = {"key": encode(key)}
        if end is not None:
            body["range_end"] = encode(end)
        return int(self._post("/kv/deleterange", body).get("deleted", 0))

    def txn(self, compare: List[dict], success: List[dict],
            failure: Optional[List[dict]] = None) -> Tuple[bool, List[List[KeyValue]], int]:
        """Run a transaction: ``(succeeded, the key-values each range request read,
        revision)``."""
        reply = self._post("/kv/txn", {"compare": compare, "success": success,
                                       "failure": failure or []})
        reads = [[_kv(raw) for raw in response["response_range"].get("kvs", [])]
                 for response in reply.get("responses", []) if "response_range" in response]
        return (bool(reply.get("succeeded", False)), reads,
                int(reply["header"]["revision"]))

    def grant(self, ttl: int) -> int:
        return int(self._post("/lease/grant", {"TTL": str(ttl)})["ID"])

    def keep_alive(self, lease: int) -> int:
        """Refresh `lease`; its remaining TTL (0 once it has expired)."""
        reply = self._post("/lease/keepalive", {"ID": str(lease)})
        return int(reply.get("result", {}).get("TTL", 0))

    def revoke(self, lease: int) -> None:
        self._post("/lease/revoke", {"ID": str(lease)})

    def watch(self, key: bytes, end: Optional[bytes], start_revision: int,
              on_event: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``on_event((key, old, new))`` for each change from `start_revision` on (on
        the watch's own thread); returns the function that stops the watch."""
        from etcd3gw import watch

        def deliver(event: dict) -> None:
            kv = event["kv"]
            old = event.get("prev_kv")
            new = None if event.get("type") == "DELETE" else kv.get("value", b"")
            on_event((kv["key"], None if old is None else decode(old.get("value")), new))

        try:
            watcher = watch.Watcher(self._client, key, deliver, start_revision=start_revision,
                                    prev_kv=True,
                                    range_end=None if end is None else end.decode("latin-1"))
        except Exception as exc:  # noqa: BLE001 - requests' connection errors
            raise StoreConnectionError(f"etcd at {self.endpoint}: cannot watch: {exc}") from None
        return watcher.stop
