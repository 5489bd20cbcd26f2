"""The actor runtime: mailbox loop, wire protocol, serialization, scheduler and futures.

This layer imports nothing from `store`, `engine` or the rpc services.

Every process has one ZeroMQ context (`context.py`). Who owns each socket:

=====================  ==========================  ======================  =====================
socket                 owner (module)              who sends               who receives
=====================  ==========================  ======================  =====================
actor ROUTER (mailbox) `Router` (router.py),       any thread answering a  the actor's reader: the
                       under its lock              request, via            I/O thread, or with
                                                   `Router.send`           ``workers_receive`` the
                                                                           leading worker
                                                                           (leaders.py), via
                                                                           `Router.take`
ROUTER disconnect      I/O thread (mailbox.py)     libzmq                  I/O thread
monitor
DEALER to a peer       I/O thread (mailbox.py);    I/O thread (other       I/O thread
actor, one per peer    other threads hand it       threads: `call_soon`)
                       frames with `call_soon`
its monitor            I/O thread                  libzmq                  I/O thread
`Channel` DEALER, one  the calling thread          that thread             that thread
per thread and peer    (channel.py)
its monitor            the calling thread          libzmq                  that thread
attached socket        I/O thread                  I/O thread (handlers    I/O thread; handlers
(`Actor.attach`)       (attachments.py)            and other threads:      run on the pool
                                                   `Attachment.send`)
ZAP handler's socket   pyzmq's authenticator       its thread              its thread
                       thread (security.py)
=====================  ==========================  ======================  =====================

Threads per actor: one I/O thread and its worker pool; per process, libzmq's I/O
and reaper threads of the one context, and with CURVE the ZAP handler's thread.
Nothing else touches a socket. Resource owners (`Actor`, `Channel`) release their
threads and sockets when closed or dropped; their finalizers only ask, and never
block.
"""
from .actor import Actor, ActorCore
from .envelope import Message
from .errors import (ActorError, ActorStoppedError, AddressInUseError, PeerLostError,
                     ProtocolError, RemoteError, RequestTimeoutError, SafeModeError,
                     UnknownKindError)
from .futures import Future, FutureTimeoutError, InvalidStateError, wait_all
from .protocol import PROTOCOL_VERSION, Flag, Kind
from .scheduler import WorkerPool

__all__ = [
    "Actor", "ActorCore", "Message", "Future", "FutureTimeoutError", "InvalidStateError",
    "wait_all", "Kind", "Flag", "PROTOCOL_VERSION", "WorkerPool", "ActorError",
    "ActorStoppedError", "AddressInUseError", "PeerLostError", "ProtocolError", "RemoteError",
    "RequestTimeoutError", "SafeModeError", "UnknownKindError",
]
