"""Init-method rendezvous: turn `env://`, `tcp://`, `file://` or `etcd://` into (store, rank,
world_size).

As in torch's `torch.distributed.rendezvous`, `rendezvous(url, rank, world_size)`
returns an iterator whose first item is the triple; asking for a second one raises,
because these methods cannot re-rendezvous. Precedence, as in torch: explicit
`rank`/`world_size` arguments override the URL query, which overrides the
`RANK`/`WORLD_SIZE` environment variables (env:// only). Handlers check their input
when `rendezvous()` is called and create the store on the first `next()`.
"""
from __future__ import annotations

import functools
import os
from typing import Callable, Dict, Iterator, Optional, Tuple
from urllib.parse import parse_qsl, unquote, urlencode, urlparse



from actors.runtime.process.log import get_logger
from store.base import DEFAULT_TIMEOUT, Store
from store.errors import RendezvousHandlerError, StoreError
from store.file_store import FileStore

log = get_logger(__name__)

RendezvousResult = Tuple[Store, int, int]
RendezvousHandler = Callable[..., Iterator[RendezvousResult]]

_HANDLERS: Dict[str, RendezvousHandler] = {}


def register_rendezvous_handler(scheme: str, handler: RendezvousHandler) -> None:
    """Make `rendezvous()` call `handler(url, **kwargs)` for URLs of `scheme://`.

    The handler returns an iterator (typically a generator) yielding
    `(store, rank, world_size)`. A scheme can be registered once.
    """
    if not isinstance(scheme, str) or not scheme:
        raise TypeError(f"scheme must be a non-empty str, got {scheme!r}")
    if not callable(handler):
        raise TypeError(f"handler must be callable, got {type(handler).__name__}")
    if scheme in _HANDLERS:
        raise RendezvousHandlerError(f"a rendezvous handler for {scheme}:// is already registered")
    _HANDLERS[scheme] = handler


def rendezvous(
    url: str, rank: int = -1, world_size: int = -1, **kwargs
) -> Iterator[RendezvousResult]:
    """Find the handler of `url`'s scheme and return its iterator of (store, rank, world_size).

    Extra keyword arguments (e.g. `timeout`, `wait_for_workers`) go to the handler.
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be str, got {type(url).__name__}")
    parsed = urlparse(url)
    handler = _HANDLERS.get(parsed.scheme)
    if handler is None:
        known = ", ".join(f"{s}://" for s in sorted(_HANDLERS))
        scheme = parsed.scheme or "(no scheme)"
        raise RendezvousHandlerError(
            f"no rendezvous handler for {scheme}:// in {url!r}; known: {known}"
        )
    if rank != -1 or world_size != -1:
        query = dict(parse_qsl(parsed.query, keep_blank_values=True))
        if rank != -1:
            query["rank"] = str(_check_int("rank", rank))
        if world_size != -1:
            query["world_size"] = str(_check_int("world_size", world_size))
        # Rebuilt by hand: urlunparse would turn "env://?..." into "env:?..." (no netloc).
        head = url.split("#", 1)[0].split("?", 1)[0]
        url = f"{head}?{urlencode(query)}"
    return handler(url, **kwargs)


# -- argument checks ---------------------------------------------------------------------


def _check_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be int, got {type(value).__name__}")
    return value


def _parse_int(name: str, text: str, source: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise RendezvousHandlerError(
            f"{name} must be an integer, got {text!r} from {source}"
        ) from None


def _query(url: str) -> Dict[str, str]:
    return dict(parse_qsl(urlparse(url).query, keep_blank_values=True))


def _env(name: str) -> str:
    value = os.environ.get(name)
    if value is None or value == "":
        raise RendezvousHandlerError(
            f"environment variable {name} expected, but not set (needed by env:// rendezvous)"
        )
    return value


def _rank_and_world(url: str, query: Dict[str, str], from_env: bool) -> Tuple[int, int]:
    """rank and world_size from the query, else (env:// only) from RANK / WORLD_SIZE."""
    values = []
    for name, var in (("rank", "RANK"), ("world_size", "WORLD_SIZE")):
        if name in query:
            values.append(_parse_int(name, query[name], f"the query of {url!r}"))
        elif from_env:
            values.append(_parse_int(name, _env(var), f"environment variable {var}"))
        else:
            raise RendezvousHandlerError(f"{name} parameter missing in {url!r}")
    rank, world_size = values
    if world_size < 1:
        raise RendezvousHandlerError(f"world_size must be >= 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise RendezvousHandlerError(f"rank must be in [0, {world_size}), got {rank}")
    return rank, world_size


def _yield_once(scheme: str, make_store: Callable[[], Store], rank: int, world_size: int):
    store = make_store()
    log.info("rendezvous_done", scheme=scheme, rank=rank, world_size=world_size)
    yield store, rank, world_size
    raise StoreError(f"unable to perform re-rendezvous using {scheme}:// method")


def _tcp_store(
    host: str, port: int, rank: int, world_size: int, kwargs: dict
) -> Callable[[], Store]:
    timeout = kwargs.get("timeout", DEFAULT_TIMEOUT)
    wait_for_workers = kwargs.get("wait_for_workers", True)

    def make() -> Store:
        from store.tcp_store import TCPStore  # lazily: it pulls in the actor runtime

        # Rank 0 hosts the server actor, as torch's rank 0 starts the TCPStore daemon.
        return TCPStore(
            host, port, world_size, is_master=(rank == 0), timeout=timeout,
            wait_for_workers=wait_for_workers, multi_tenant=True,
        )

    return make


# -- the built-in handlers -----------------------------------------------------------------


def _env_rendezvous_handler(url: str, **kwargs) -> Iterator[RendezvousResult]:
    """env://[?rank=R&world_size=W] with MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE."""
    rank, world_size = _rank_and_world(url, _query(url), from_env=True)
    host = _env("MASTER_ADDR")
    port = _parse_int("MASTER_PORT", _env("MASTER_PORT"), "environment variable MASTER_PORT")
    make = _tcp_store(host, port, rank, world_size, kwargs)
    return _yield_once("env", make, rank, world_size)


def _tcp_rendezvous_handler(url: str, **kwargs) -> Iterator[RendezvousResult]:
    """tcp://host:port?rank=R&world_size=W; rank 0 hosts the TCPStore server."""
    parsed = urlparse(url)
    try:
        port: Optional[int] = parsed.port
    except ValueError:
        raise RendezvousHandlerError(f"bad port in {url!r}") from None
    if not parsed.hostname or port is None:
        raise RendezvousHandlerError(f"tcp:// rendezvous needs host:port, got {url!r}")
    rank, world_size = _rank_and_world(url, _query(url), from_env=False)
    make = _tcp_store(parsed.hostname, port, rank, world_size, kwargs)
    return _yield_once("tcp", make, rank, world_size)


def _file_rendezvous_handler(url: str, **kwargs) -> Iterator[RendezvousResult]:
    """file:///path?rank=R&world_size=W: a FileStore on `path`, deleted by the last closer."""
    path = unquote(urlparse(url).path)
    if not path:
        raise RendezvousHandlerError(f"file:// rendezvous needs a path, got {url!r}")
    rank, world_size = _rank_and_world(url, _query(url), from_env=False)
    timeout = kwargs.get("timeout", DEFAULT_TIMEOUT)
    make = functools.partial(FileStore, path, world_size, timeout=timeout)
    return _yield_once("file", make, rank, world_size)


def _etcd_rendezvous_handler(url: str, **kwargs) -> Iterator[RendezvousResult]:
    """etcd://host:port/prefix?rank=R&world_size=W: an EtcdStore on the keys under prefix."""
    parsed = urlparse(url)
    try:
        port = parsed.port
    except ValueError:
        raise RendezvousHandlerError(f"bad port in {url!r}") from None
    if not parsed.hostname or port is None:
        raise RendezvousHandlerError(f"etcd:// rendezvous needs host:port, got {url!r}")
    rank, world_size = _rank_and_world(url, _query(url), from_env=False)
    prefix = unquote(parsed.path).rstrip("/") or "/actorgrad"
    timeout = kwargs.get("timeout", DEFAULT_TIMEOUT)

    def make() -> Store:
        from store.etcd import EtcdStore  # lazily: it needs the etcd client package

        return EtcdStore(f"{parsed.hostname}:{port}", prefix, timeout=timeout)

    return _yield_once("etcd", make, rank, world_size)


register_rendezvous_handler("env", _env_rendezvous_handler)
register_rendezvous_handler("tcp", _tcp_rendezvous_handler)
register_rendezvous_handler("file", _file_rendezvous_handler)
register_rendezvous_handler("etcd", _etcd_rendezvous_handler)
