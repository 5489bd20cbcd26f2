"""Handlers by backend name: torch's `RendezvousParameters` and handler registry.

`get_rendezvous_handler(RendezvousParameters("c10d", "host:29400", run_id, 2, 4))`
gives a `DynamicRendezvousHandler` whose state and round stores live in a TCPStore
at the endpoint, hosted by the first process that can bind it. Backends: "c10d"
(the state in a store; `store_type=file` keeps it in a FileStore at the endpoint
path), "store", its alias, and "static" (fixed membership: the option `rank` is this
node's rank among `max_nodes`, and rank 0 hosts the store), and "etcd" (torch's
name "etcd-v2" too: the state and round stores in etcd at the endpoint, under the
option `key_prefix`, default "/actorgrad"). Other backends are added
with `rendezvous_handler_registry.register(name, creator)`.
"""
from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any, Callable, Dict, Optional, Tuple, Union

from actors.runtime import AddressInUseError
from actors.runtime.io.ports import bindable
from actors.runtime.process.log import get_logger
from store.base import Store
from store.elastic.backend import C10dRendezvousBackend, StoreRendezvousBackend
from store.elastic.errors import RendezvousConnectionError
from store.elastic.handler import DynamicRendezvousHandler
from store.elastic.settings import RendezvousTimeout
from store.elastic.static import StaticRendezvousHandler
from store.errors import StoreError

log = get_logger(__name__)

DEFAULT_PORT = 29400
ETCD_DEFAULT_PORT = 2379
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


class RendezvousParameters:
    """What a backend needs to build a handler: backend name, endpoint, run id, sizes, options.

    Options (`**kwargs`) are backend-specific; the "c10d" backend reads
    `join_timeout`, `last_call_timeout`, `close_timeout`, `heartbeat_timeout`,
    `keep_alive_interval`, `keep_alive_max_attempt`, `read_timeout`, `is_host` and
    `store_type`; the "etcd" backend `key_prefix` and `lease_ttl` (seconds in which
    a killed node's liveness key vanishes) besides the timeouts. Raises ValueError
    for an empty backend or impossible sizes.
    """

    def __init__(self, backend: str, endpoint: str, run_id: str, min_nodes: int,
                 max_nodes: int, local_addr: Optional[str] = None, **kwargs: Any):
        if not backend:
            raise ValueError("the rendezvous backend name must be a non-empty string")
        if min_nodes < 1:
            raise ValueError(f"min_nodes ({min_nodes}) must be at least 1")
        if max_nodes < min_nodes:
            raise ValueError(f"max_nodes ({max_nodes}) must be at least min_nodes ({min_nodes})")
        self.backend = backend
        self.endpoint = endpoint
        self.run_id = run_id
        self.min_nodes = min_nodes
        self.max_nodes = max_nodes
        self.local_addr = local_addr
        self.config: Dict[str, Any] = kwargs

    def get(self, key: str, default: Any = None) -> Any:
        """The backend option `key` (from ``--rdzv-conf`` or keyword arguments), or `default`."""
        return self.config.get(key, default)

    def get_as_bool(self, key: str, default: Optional[bool] = None) -> Optional[bool]:
        """The option as a bool: True/False, 1/0 or "true"/"yes"/"1"... ; ValueError otherwise."""
        value = self.get(key, default)
        if value is None or isinstance(value, bool):
            return value
        text = str(value).lower()
        if text in ("1", "true", "t", "yes", "y"):
            return True
        if text in ("0", "false", "f", "no", "n"):
            return False
        raise ValueError(f"the rendezvous option {key!r} is not a boolean: {value!r}")

    def get_as_int(self, key: str, default: Optional[int] = None) -> Optional[int]:
        """The option `key` as an int, or `default` when absent; ValueError when it is not an
        integer."""
        value = self.get(key, default)
        if value is None:
            return None
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ValueError(f"the rendezvous option {key!r} is not an integer: {value!r}") \
                from None

    def __repr__(self) -> str:
        return (f"RendezvousParameters(backend={self.backend!r}, endpoint={self.endpoint!r}, "
                f"run_id={self.run_id!r}, min_nodes={self.min_nodes}, "
                f"max_nodes={self.max_nodes})")


RendezvousHandler = Union[DynamicRendezvousHandler, StaticRendezvousHandler]
HandlerCreator = Callable[[RendezvousParameters], RendezvousHandler]


class RendezvousHandlerRegistry:
    """Backend name -> the function that builds its handler from `RendezvousParameters`."""

    def __init__(self) -> None:
        self._creators: Dict[str, HandlerCreator] = {}

    def register(self, backend: str, creator: HandlerCreator) -> None:
        """Add `backend`; ValueError if the name is empty or taken by another creator."""
        if not backend:
            raise ValueError("the rendezvous backend name must be a non-empty string")
        current = self._creators.get(backend)
        if current is not None and current != creator:
            raise ValueError(f"the rendezvous backend {backend!r} is already registered "
                             f"with {current!r}")
        self._creators[backend] = creator

    def create_handler(self, params: RendezvousParameters) -> RendezvousHandler:
        """The handler for `params.backend`; ValueError naming the known backends otherwise."""
        creator = self._creators.get(params.backend)
        if creator is None:
            raise ValueError(f"the rendezvous backend {params.backend!r} is not registered "
                             f"(registered: {sorted(self._creators)}); call register first")
        handler = creator(params)
        if handler.get_backend() != params.backend:
            raise RuntimeError(f"the creator of backend {params.backend!r} made a handler "
                               f"of backend {handler.get_backend()!r}")
        return handler


rendezvous_handler_registry = RendezvousHandlerRegistry()
"""The registry the launcher builds its handler from: `c10d` (alias `store`), `static`,
`etcd` and `etcd-v2`, as torch's `rendezvous_handler_registry`."""


def get_rendezvous_handler(params: RendezvousParameters) -> RendezvousHandler:
    """A handler from the global registry (torch's `registry.get_rendezvous_handler`)."""
    return rendezvous_handler_registry.create_handler(params)


def create_handler(store: Store, backend: StoreRendezvousBackend,
                   params: RendezvousParameters) -> DynamicRendezvousHandler:
    """A handler over `store` and `backend` with the timeouts and keep-alive of `params`."""
    timeout = RendezvousTimeout(*(_seconds(params, f"{phase}_timeout")
                                  for phase in ("join", "last_call", "close", "heartbeat")))
    return DynamicRendezvousHandler.from_backend(
        params.run_id, store, backend, params.min_nodes, params.max_nodes, params.local_addr,
        timeout, keep_alive_interval=_seconds(params, "keep_alive_interval") or 5,
        keep_alive_max_attempt=params.get_as_int("keep_alive_max_attempt", 3))


def parse_rendezvous_endpoint(endpoint: Optional[str],
                              default_port: Optional[int] = DEFAULT_PORT
                              ) -> Tuple[str, Optional[int]]:
    """`HOST[:PORT]` or `[IPv6][:PORT]` as (host, port); empty means localhost; ValueError else.

    The port is `default_port` when none is given (None: the caller decides later).
    """
    text = (endpoint or "").strip()
    if not text:
        return "localhost", default_port
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    try:
        port = int(port_text) if port_text else default_port
    except ValueError:
        raise ValueError(f"the port of rendezvous endpoint {endpoint!r} is not a number") \
            from None
    if not host or (port is not None and not 0 <= port < 65536):
        raise ValueError(f"rendezvous endpoint must be HOST:PORT, got {endpoint!r}")
    return host, port


def open_rendezvous_store(host: str, port: int, timeout: float,
                          is_host: Optional[bool] = None) -> Store:
    """Host the TCPStore at host:port, or connect to it where another process hosts it.

    With `is_host` None, a process on the endpoint's own machine tries to host and
    connects if the port is taken; a process elsewhere connects.
    """
    from store.tcp_store import TCPStore

    hosting = _is_this_machine(host) if is_host is None else is_host
    if hosting:
        try:
            return TCPStore(host, port, is_master=True, wait_for_workers=False,
                            timeout=timeout)
        except AddressInUseError:
            if is_host:
                raise
    return TCPStore(host, port, timeout=timeout)


def _create_c10d_handler(params: RendezvousParameters) -> DynamicRendezvousHandler:
    store = _open_store(params)
    backend_type = C10dRendezvousBackend if params.backend == "c10d" else StoreRendezvousBackend
    return create_handler(store, backend_type(store, params.run_id), params)


def _create_etcd_handler(params: RendezvousParameters) -> DynamicRendezvousHandler:
    from store.elastic.etcd_backend import EtcdRendezvousBackend
    from store.etcd import EtcdStore
    from store.etcd.store import EPHEMERAL_TTL

    host, port = parse_rendezvous_endpoint(params.endpoint, ETCD_DEFAULT_PORT)
    read_timeout = _read_timeout(params)
    try:
        store = EtcdStore(f"{host}:{port}", str(params.get("key_prefix", "/actorgrad")),
                          read_timeout, ephemeral_ttl=params.get_as_int("lease_ttl", EPHEMERAL_TTL))
    except StoreError as exc:
        raise RendezvousConnectionError(f"cannot reach etcd at {host}:{port}: {exc}") from exc
    backend = EtcdRendezvousBackend(store, params.run_id, name=params.backend)
    return create_handler(store, backend, params)


def _create_static_handler(params: RendezvousParameters) -> StaticRendezvousHandler:
    rank = params.get_as_int("rank")
    if rank is None:
        raise ValueError("the static rendezvous needs the option rank (this node's rank)")
    if params.min_nodes != params.max_nodes:
        raise ValueError(f"the static rendezvous needs a fixed number of nodes, got "
                         f"{params.min_nodes}:{params.max_nodes}")
    store = _open_store(params, is_host=rank == 0)
    return StaticRendezvousHandler(store, params.run_id, rank, params.max_nodes,
                                   _seconds(params, "join_timeout") or 600.0,
                                   params.local_addr)


def _open_store(params: RendezvousParameters, is_host: Optional[bool] = None) -> Store:
    store_type = str(params.get("store_type", "tcp")).lower()
    if store_type == "file":
        from store.file_store import FileStore

        if not params.endpoint:
            raise ValueError("the file store needs the endpoint to be a file path")
        return FileStore(params.endpoint)
    if store_type != "tcp":
        raise ValueError(f"store_type must be 'tcp' or 'file', got {store_type!r}")
    host, port = parse_rendezvous_endpoint(params.endpoint)
    read_timeout = _read_timeout(params)
    try:
        if is_host is None:
            is_host = params.get_as_bool("is_host")
        return open_rendezvous_store(host, port, read_timeout, is_host)
    except (StoreError, OSError) as exc:
        raise RendezvousConnectionError(
            f"cannot reach the rendezvous store at {host}:{port}: {exc}") from exc


def _read_timeout(params: RendezvousParameters) -> int:
    read_timeout = params.get_as_int("read_timeout", 60)
    if read_timeout <= 0:
        raise ValueError(f"read_timeout must be positive, got {read_timeout}")
    return read_timeout


def _seconds(params: RendezvousParameters, key: str) -> Optional[float]:
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"the rendezvous option {key!r} must be seconds, got {value!r}") \
            from None


def _is_this_machine(host: str) -> bool:
    """Whether `host` names this machine: a local name, or an address of one of its
    interfaces (not only the one its host name resolves to)."""
    if host in _LOCAL_HOSTS or host in (socket.gethostname(), socket.getfqdn()):
        return True
    try:
        address = socket.gethostbyname(host)
    except OSError:
        return False
    return address.startswith("127.") or address == _own_address() or bindable(address, 0)


def _own_address() -> Optional[str]:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return None


rendezvous_handler_registry.register("c10d", _create_c10d_handler)
rendezvous_handler_registry.register("store", _create_c10d_handler)
rendezvous_handler_registry.register("static", _create_static_handler)
rendezvous_handler_registry.register("etcd", _create_etcd_handler)
rendezvous_handler_registry.register("etcd-v2", _create_etcd_handler)
