"""The etcd v3 calls the store needs, over etcd's JSON gateway (the `etcd3gw` client).

Keys and values are bytes here; the gateway's base64 is this module's business.
A request that etcd cannot have applied (the connection was refused, or etcd had
no leader) is retried until the gateway's `retry_for` seconds pass, so a member
restart costs a pause, not an error; a request that may have been applied is
retried only if repeating it is harmless (`idempotent`). Every other failure to
reach etcd is a StoreConnectionError naming the endpoint. A write larger than etcd
takes is a ValueTooLargeError, found before it is sent when it exceeds the gateway's
`max_request_bytes`, or from etcd's answer when the server's limit is lower.
"""
from __future__ import annotations

import base64
import json
import socket
import threading
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from actors.runtime.process.log import get_logger
from actors.runtime.concurrency.threads import start_thread
from store.errors import StoreConnectionError

from .limits import MAX_REQUEST_BYTES, ValueTooLargeError, put_length, too_large_limit

log = get_logger(__name__)

# key, old value, new value (None: deleted), the revision of the change
Event = Tuple[bytes, Optional[bytes], Optional[bytes], int]


class UncertainWriteError(StoreConnectionError):
    """The connection failed during a conditional write that etcd may have applied."""


class LeaseNotFoundError(StoreConnectionError):
    """etcd no longer has the lease a request named: it expired or was revoked."""


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
    """One etcd endpoint (``host:port``); safe to share between threads.

    `timeout` bounds each request; `retry_for` bounds the retries of one call;
    `max_request_bytes` is the server's --max-request-bytes, which writes must fit.
    """

    def __init__(self, endpoint: str, timeout: float, retry_for: float = 30.0,
                 max_request_bytes: int = MAX_REQUEST_BYTES):
        host, _, port = endpoint.replace("http://", "").rstrip("/").rpartition(":")
        self.endpoint = endpoint
        self.host, self.port = host or "127.0.0.1", int(port)
        self.timeout, self.retry_for = timeout, retry_for
        self.max_request_bytes = max_request_bytes
        self._client = self.new_client()
        # The newest revision any answer carried: a watch registered now may start after it.
        self.revision_seen = 0

    def new_client(self) -> Any:
        """An etcd3gw client of its own (one HTTP connection pool)."""
        import etcd3gw

        return etcd3gw.Etcd3Client(host=self.host, port=self.port, timeout=self.timeout)

    def _post(self, path: str, body: dict, idempotent: bool = True,
              retry_for: Optional[float] = None) -> dict:
        from etcd3gw import exceptions

        deadline = time.monotonic() + (self.retry_for if retry_for is None else retry_for)
        delay = RETRY_FIRST_DELAY
        while True:
            try:
                reply = self._client.post(self._client.get_url(path), json=body)
                self._saw(reply)
                return reply
            except (exceptions.ConnectionFailedError,
                    exceptions.ConnectionTimeoutError) as exc:
                if not (idempotent or not_applied(exc)):
                    raise UncertainWriteError(
                        f"etcd at {self.endpoint} failed during {path}, which it may or "
                        f"may not have applied: {describe(exc)}") from None
                if time.monotonic() + delay > deadline:
                    raise StoreConnectionError(
                        f"etcd at {self.endpoint} unreachable: {describe(exc)}") from None
                log.info("etcd_request_retried", endpoint=self.endpoint, path=path,
                         error=describe(exc))
            except exceptions.Etcd3Exception as exc:
                limit = too_large_limit(_answer(exc))
                if limit is not None:
                    raise ValueTooLargeError(
                        f"etcd at {self.endpoint} refused {path} as larger than it takes "
                        f"(--max-request-bytes{limit}): {describe(exc)}") from None
                error_type = LeaseNotFoundError if lease_not_found(exc) else StoreConnectionError
                raise error_type(
                    f"etcd at {self.endpoint} refused {path}: {describe(exc)}") from None
            time.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_DELAY)

    def _saw(self, reply: dict) -> None:
        revision = int(reply.get("header", {}).get("revision", 0))
        if revision > self.revision_seen:
            self.revision_seen = revision  # a racy max is fine: any seen revision will do

    def range(self, key: bytes, end: Optional[bytes] = None, *, limit: int = 0,
              count_only: bool = False, keys_only: bool = False,
              oldest_first: bool = False, retry_for: Optional[float] = None
              ) -> Tuple[List[KeyValue], int, int]:
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
        reply = self._post("/kv/range", body, retry_for=retry_for)
        return ([_kv(raw) for raw in reply.get("kvs", [])], int(reply.get("count", 0)),
                int(reply["header"]["revision"]))

    def put(self, key: bytes, value: bytes, lease: int = 0) -> None:
        self._check_size({key: len(key) + len(value)})  # before encoding a value of any size
        self._post("/kv/put", put_op(key, value, lease)["request_put"])

    def delete(self, key: bytes, end: Optional[bytes] = None) -> int:
        body: Dict[str, Any] = {"key": encode(key)}
        if end is not None:
            body["range_end"] = encode(end)
        return int(self._post("/kv/deleterange", body).get("deleted", 0))

    def txn(self, compare: List[dict], success: List[dict],
            failure: Optional[List[dict]] = None) -> Tuple[bool, List[List[KeyValue]], int]:
        """Run a transaction: ``(succeeded, the key-values each range request read,
        revision)``. A conditional one is not repeated once etcd may have applied it."""
        self._check_size({decode(op["request_put"]["key"]): put_length(op["request_put"])
                          for op in success + (failure or []) if "request_put" in op})
        reply = self._post("/kv/txn", {"compare": compare, "success": success,
                                       "failure": failure or []}, idempotent=not compare)
        reads = [[_kv(raw) for raw in response["response_range"].get("kvs", [])]
                 for response in reply.get("responses", []) if "response_range" in response]
        return (bool(reply.get("succeeded", False)), reads,
                int(reply["header"]["revision"]))

    def _check_size(self, written: Dict[bytes, int]) -> None:
        """ValueTooLargeError, before sending, if the keys and values of one request
        (`written`: key -> bytes of key and value) exceed `max_request_bytes`. etcd adds
        a few bytes of framing and refuses what then exceeds its limit; `_post` reports
        that alike."""
        size = sum(written.values())
        if size > self.max_request_bytes:
            raise ValueTooLargeError(
                f"etcd at {self.endpoint} takes requests of at most "
                f"{self.max_request_bytes} bytes ({self.max_request_bytes / 2**20:g} MiB, "
                f"its --max-request-bytes): writing {_names(list(written))} would send "
                f"{size} bytes")

    def grant(self, ttl: int) -> int:
        return int(self._post("/lease/grant", {"TTL": str(ttl)})["ID"])

    def keep_alive(self, lease: int) -> int:
        """Refresh `lease`; its remaining TTL. LeaseNotFoundError once it has ended (etcd
        answers either with a TTL of 0 or with "lease not found")."""
        reply = self._post("/lease/keepalive", {"ID": str(lease)})
        ttl = int(reply.get("result", {}).get("TTL", 0))
        if ttl <= 0:
            raise LeaseNotFoundError(f"etcd at {self.endpoint}: lease {lease} has ended")
        return ttl

    def revoke(self, lease: int, retry_for: Optional[float] = None) -> None:
        self._post("/lease/revoke", {"ID": str(lease)}, retry_for=retry_for)

    def watch(self, key: bytes, end: Optional[bytes], start_revision: int,
              on_event: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``on_event((key, old, new, revision))`` for each change from `start_revision` on (on
        the watch's own thread, across etcd restarts); returns the function that stops
        the watch."""
        return WatchStream(self, key, end, start_revision, on_event).stop


RETRY_FIRST_DELAY = 0.05  # seconds; doubled after each failed attempt
RETRY_MAX_DELAY = 1.0


# etcd's answers that it gives before proposing a request to its log. Others ("server
# stopped", "leader changed", timeouts) can come after the proposal, which may yet apply.
_REFUSED_BEFORE_PROPOSING = frozenset({
    "etcdserver: no leader", "etcdserver: not capable", "etcdserver: unhealthy cluster",
    "etcdserver: too many requests"})


def not_applied(exc: Exception) -> bool:
    """Whether etcd surely did not apply the request that failed with `exc`: the
    connection was never made, or etcd refused the request before proposing it."""
    text = describe(exc)
    if "Failed to establish a new connection" in text or "Connection refused" in text:
        return True
    return _answer(exc) in _REFUSED_BEFORE_PROPOSING


def _names(keys: List[bytes]) -> str:
    shown = [key.decode(errors="replace") for key in keys[:3]]
    return f"{shown}{' and more' if len(keys) > 3 else ''}"


def lease_not_found(exc: Exception) -> bool:
    return _answer(exc) == "etcdserver: requested lease not found"


def describe(exc: Exception) -> str:
    """What went wrong, in etcd's words when it answered: etcd3gw keeps the HTTP reason in
    the exception's `args` and the answer's body, or the connection's error, in
    `detail_text`."""
    parts = [str(arg) for arg in exc.args if arg]
    detail = getattr(exc, "detail_text", None)
    if detail:
        parts.append((_answer(exc) or str(detail))[:500])
    return " ".join(parts) or type(exc).__name__


def _answer(exc: Exception) -> Optional[str]:
    """etcd's error message, when `exc` carries an answer of etcd's (a JSON body)."""
    try:
        answer = json.loads(getattr(exc, "detail_text", None) or "")
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    message = answer.get("error") or answer.get("message")
    return str(message) if message else None


class WatchStream:
    """A watch of [key, end) on its own thread and connection, from `start_revision` on.

    When etcd drops the stream (a restart), it reconnects and resumes after the last
    revision it delivered, so no change is missed; if etcd has compacted that
    history away, it resumes from the oldest revision etcd still has and logs it.
    etcd3gw's own watcher does neither, and closes its client's whole connection
    pool to stop; this is the one gateway call the store makes by hand.
    """

    def __init__(self, gateway: Gateway, key: bytes, end: Optional[bytes],
                 start_revision: int, on_event: Callable[[Event], None]):
        self._gateway, self._on_event = gateway, on_event
        self._request: Dict[str, Any] = {"key": encode(key), "prev_kv": True}
        if end is not None:
            self._request["range_end"] = encode(end)
        self._next_revision = start_revision
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None
        self._thread = start_thread(self._run, name="actorgrad-etcd-watch",
                                    owner="store.etcd.gateway.WatchStream",
                                    purpose="reads one etcd watch stream, resumes it if cut")

    def stop(self) -> None:
        """End the stream now; never blocks on the network."""
        self._stopped.set()
        with self._lock:
            response, self._response = self._response, None
        if response is not None:
            _shut_down(response)

    def _run(self) -> None:
        delay = RETRY_FIRST_DELAY
        while not self._stopped.is_set():
            try:
                self._stream()
                delay = RETRY_FIRST_DELAY
            except Exception as exc:  # noqa: BLE001 - requests' many connection errors
                if self._stopped.is_set():
                    break
                log.info("etcd_watch_interrupted", endpoint=self._gateway.endpoint,
                         error=describe(exc))
            if self._stopped.wait(delay):
                break
            delay = min(delay * 2, RETRY_MAX_DELAY)

    def _stream(self) -> None:
        client = self._gateway.new_client()
        request = dict(self._request, start_revision=str(self._next_revision))
        response = client.session.post(client.get_url("/watch"),
                                       json={"create_request": request}, stream=True,
                                       timeout=(self._gateway.timeout, None))
        with self._lock:
            if self._stopped.is_set():
                _shut_down(response)
                return
            self._response = response
        try:
            for line in response.iter_lines():
                if self._stopped.is_set():
                    return
                if line:
                    self._handle(json.loads(line).get("result", {}))
        finally:
            with self._lock:
                self._response = None
            response.close()

    def _handle(self, result: Dict[str, Any]) -> None:
        compacted = int(result.get("compact_revision", 0))
        if compacted:
            log.warning("etcd_watch_history_compacted", endpoint=self._gateway.endpoint,
                        wanted=self._next_revision, resumed_at=compacted)
            self._next_revision = compacted
            raise ConnectionError("watch canceled: history compacted")
        for event in result.get("events", []):
            kv = event["kv"]
            revision = int(kv.get("mod_revision", 0))
            self._next_revision = revision + 1
            old = event.get("prev_kv")
            new = None if event.get("type") == "DELETE" else decode(kv.get("value"))
            self._on_event((decode(kv["key"]), None if old is None else decode(old.get("value")),
                            new, revision))


def _shut_down(response: Any) -> None:
    """Break a streaming response's blocking read from another thread."""
    try:
        sock = socket.fromfd(response.raw._fp.fileno(), socket.AF_INET, socket.SOCK_STREAM)
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
    except (AttributeError, OSError, ValueError):
        pass  # already closed
    response.close()
