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

Nothing else touches a socket. Resource owners (`Actor`, `Channel`) release their
threads and sockets when closed or dropped; their finalizers only ask, and never
block.

Every thread the project starts goes through `threads.start_thread` (or
`new_thread`), and `threads.running_threads()` lists those alive: the registry is
the live list, this table the map. Periodic work that has a loop to join runs as a
timer of that loop, not on a thread of its own: the dist-autograd release flush is
a timer of the RPC worker's I/O loop (`actors.run_on_pool_later`).

============================  ======================================  ==============================
thread name                   owner                                   purpose
============================  ======================================  ==============================
``{actor}-io``                actors.runtime.mailbox.Mailbox          owns the actor's sockets, runs
                                                                      its timers
``{actor}-worker-{i}``        actors.runtime.scheduler.WorkerPool     runs handlers and pool tasks
                                                                      (with workers_receive, reads
                                                                      requests too)
``pg-{group}-ops``            actors.distributed.group.ProcessGroup   runs the group's queued
                                                                      collectives in order
``pg-irecv``                  actors.distributed.api.irecv            waits for one irecv's message
``rank{r}-stdout``,           actors.launch.workers.Worker            copies a worker's output with
``rank{r}-stderr``                                                    a rank prefix
``actorgrad-{store}-watch``   store.watch.WatchDispatcher             calls a store's watch
                                                                      callbacks in order
``actorgrad-filestore-poll``  store.file_store.FileStore              stats the file (10 ms) for
                                                                      watched keys' changes
``actorgrad-etcd-watch``      store.etcd.gateway.WatchStream          reads one etcd watch stream,
                                                                      resumes it if cut
``actorgrad-etcd-lease``      store.etcd.store._Session               keeps the ephemeral keys'
                                                                      lease alive
``rdzv-keep-alive-{node}``    store.elastic.handler.                  sends the node's rendezvous
                              DynamicRendezvousHandler                keep-alives
pyzmq's ZAP thread            actors.runtime.security (started by     with CURVE: answers ZAP
                              pyzmq, `register_foreign`)              requests
============================  ======================================  ==============================

Not in the registry, as the project neither starts nor stops them: libzmq's I/O and
reaper threads of the one context (not Python threads), and pyzmq's garbage
collector thread, which pyzmq starts on the first zero-copy send and keeps until exit.
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
