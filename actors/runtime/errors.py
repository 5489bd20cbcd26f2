"""Errors of the actor runtime: protocol faults, lost peers, timeouts and remote failures."""
from __future__ import annotations

from typing import Optional


class ActorError(RuntimeError):
    """Base class of runtime failures that are not one of the builtin categories below."""


class ActorStoppedError(ActorError):
    """The actor was stopped (or never started) while the operation was pending."""


class ProtocolError(ValueError):
    """A message does not follow the wire protocol (docs/PROTOCOL.md)."""


class UnknownKindError(ProtocolError):
    """A message names a kind that the receiving actor has no handler for."""


class SafeModeError(ProtocolError):
    """A pickled body reached a process in safe mode, which loads only JSON bodies."""


class PeerLostError(ConnectionError, RuntimeError):
    """The peer at `address` went away (or could not be reached) while a request was pending.

    A RuntimeError too, as torch raises for a lost RPC peer."""

    def __init__(self, address: str, reason: str = "connection lost"):
        self.address = address
        self.reason = reason
        super().__init__(f"peer {address}: {reason}")

    def __reduce__(self):
        return type(self), (self.address, self.reason)


class RequestTimeoutError(TimeoutError, RuntimeError):
    """A request got no reply within its timeout (a RuntimeError too, as torch's RPC
    timeouts are)."""


class AddressInUseError(OSError):
    """The address an actor was asked to bind is taken by another socket."""

    def __init__(self, address: str):
        self.address = address
        super().__init__(f"address {address} is already in use")

    def __reduce__(self):
        return type(self), (self.address,)


class RemoteError(RuntimeError):
    """An exception raised by a peer whose original type could not be rebuilt here, or
    is no Exception (a SystemExit, a KeyboardInterrupt: not this process's to act on).

    `remote_type` is the qualified name of the original exception type and
    `remote_traceback` the traceback text formatted on the peer.
    """

    def __init__(self, remote_type: str, message: str, remote_traceback: Optional[str] = None):
        self.remote_type = remote_type
        self.remote_traceback = remote_traceback
        super().__init__(f"{remote_type}: {message}")

    def __reduce__(self):
        return type(self), (self.remote_type, str(self.args[0]).split(": ", 1)[-1],
                            self.remote_traceback)
