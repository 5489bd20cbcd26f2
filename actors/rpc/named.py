"""Named functions: what a client without pickle (another language, a safe-mode peer) calls.

`expose(name)(fn)` registers `fn` under `name` in this process. Every RPC worker of
the process serves `Kind.RPC_CALL_NAMED` requests whose body, in the JSON codec, is
``{"fn": name, "args": [...], "kwargs": {...}}``; numpy arrays travel as raw buffer
frames in requests and replies (`actors.runtime.protocol.json_codec`), so the function gets
arrays built on top of the received frames (not copied: do not write to them). The
reply is the function's value, in the request's codec; an exception becomes an
error reply. `ExposedClient` is the same client in Python.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from actors.runtime import Kind, Message, ProtocolError
from actors.runtime.protocol.bounded import quote
from actors.runtime.io.channel import Channel
from actors.runtime.protocol.remote_errors import register_error_type

_exposed: Dict[str, Callable[..., Any]] = {}


@register_error_type
class UnknownFunctionError(LookupError):
    """A named call names no exposed function."""


def expose(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator that makes its function callable by `name` with `RPC_CALL_NAMED`.

    The function is returned unchanged. ValueError if `name` already names another
    function; TypeError if `name` is not a non-empty str.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"an exposed function's name is a non-empty str, got {name!r}")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise TypeError(f"expose({name!r}) needs a callable, got {type(fn).__name__}")
        if _exposed.get(name, fn) is not fn:
            raise ValueError(f"{name!r} is already exposed as {_exposed[name].__qualname__}")
        _exposed[name] = fn
        return fn

    return register


def exposed_names() -> List[str]:
    """The names this process serves, sorted."""
    return sorted(_exposed)


def serve_named_call(msg: Message) -> Any:
    """Run the call a `RPC_CALL_NAMED` request names; its value is the reply.

    ProtocolError for a body of the wrong shape, UnknownFunctionError for a name
    nothing is exposed as; whatever the function raises goes back as it is.
    """
    body = msg.payload
    if not isinstance(body, dict):
        raise ProtocolError(f"a named call's body is a map, got {type(body).__name__}")
    name, args, kwargs = body.get("fn"), body.get("args", []), body.get("kwargs", {})
    if not isinstance(name, str):
        raise ProtocolError(f"a named call's \"fn\" is the function's name (a string), "
                            f"got {type(name).__name__}")
    if not isinstance(args, list):
        raise ProtocolError(f"a named call's \"args\" is a list, got {type(args).__name__}")
    if not isinstance(kwargs, dict):
        raise ProtocolError(f"a named call's \"kwargs\" is a map, got {type(kwargs).__name__}")
    fn = _exposed.get(name)
    if fn is None:
        raise UnknownFunctionError(f"no function is exposed as {quote(name)}; exposed: "
                                   f"{exposed_names()}")
    return fn(*args, **kwargs)


class ExposedClient:
    """Calls the functions a worker exposes, by name, in the JSON codec (no pickle).

    `address` is the worker's mailbox endpoint (`WorkerInfo.address`), the one
    ``python -m actors.worker`` prints as it starts (``worker: worker0 (rank 0 of 1)
    serves at tcp://...``); the store's port (``--master-port``) is another socket,
    which answers a named call with `UnknownKindError`. Calls block
    the calling thread; many threads may call at once. `close()` (or dropping the
    client) releases its sockets.
    """

    def __init__(self, address: str, *, timeout: Optional[float] = 60.0,
                 connect_timeout: float = 10.0):
        self.address = address
        self.timeout = timeout
        self._channel = Channel(address, connect_timeout=connect_timeout)

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """`name(*args, **kwargs)` on the worker; raises what the function raised there."""
        return self._channel.call(Kind.RPC_CALL_NAMED,
                                  {"fn": name, "args": list(args), "kwargs": kwargs},
                                  self.timeout, json=True)

    def close(self) -> None:
        """Close the client's connections; later calls raise `ActorStoppedError`."""
        self._channel.close()

    def __enter__(self) -> "ExposedClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
