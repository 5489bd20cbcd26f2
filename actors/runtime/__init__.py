"""The actor runtime: mailbox loop, wire protocol, serialization, scheduler and futures.

This layer imports nothing from `store`, `engine` or the rpc services.
"""
from .actor import Actor
from .envelope import Message
from .errors import (ActorError, ActorStoppedError, AddressInUseError, PeerLostError,
                     ProtocolError, RemoteError, RequestTimeoutError, UnknownKindError)
from .futures import Future, FutureTimeoutError, InvalidStateError, wait_all
from .protocol import PROTOCOL_VERSION, Flag, Kind
from .scheduler import CountedTask, WorkerPool

__all__ = [
    "Actor", "Message", "Future", "FutureTimeoutError", "InvalidStateError", "wait_all",
    "Kind", "Flag", "PROTOCOL_VERSION", "CountedTask", "WorkerPool", "ActorError",
    "ActorStoppedError", "AddressInUseError", "PeerLostError", "ProtocolError", "RemoteError",
    "RequestTimeoutError", "UnknownKindError",
]
