"""The actor runtime: the map of the message path.

This layer imports nothing from `store`, `engine` or the rpc services. Its parts:

```text
==================  ==========================================================================
``actor/``          `ActorCore` / `Actor`: set-up and lifecycle (``core``), the requests it
                    sends and their futures (``calling``), the requests it serves by kind
                    (``serving``), the handle a user holds (``handle``)
``errors.py``       the runtime's exceptions
``protocol/``       the wire format: header, kinds and flags (``__init__``), frames
                    (``envelope``; `Encoded`: one payload encoded once for many
                    replies), the pickle and JSON codecs and their input limits,
                    error payloads, the script's definitions by name, large buffers
                    through same-host shared memory (``shared_buffers``)
``io/``             sockets and I/O: the one ZeroMQ context, the mailbox's I/O thread and its
                    timers, the ROUTER and the turns at reading it, the peer table,
                    per-thread channels, attached sockets, CURVE
``concurrency/``    futures, worker pools and the leader that reads the mailbox, the
                    blocking hand-off, request deadlines, the thread registry
``process/``        logs, allocator and BLAS tuning, the exit flush, long waits that say so
``introspection/``  message counts and the flight recorder, the STATUS / STACKS answers, the
                    introspection socket, SIGUSR1
==================  ==========================================================================
```

**Timeouts.** Everywhere in the runtime a timeout is None (wait without limit) or
seconds from now; 0 or less has already passed. The rpc layer maps torch's 0 ("no
timeout") to None at its boundary.

**Sockets.** Every process has one ZeroMQ context (`io/context.py`). Who owns each socket:

```text
=====================  ==========================  ======================  =====================
socket                 owner (module)              who sends               who receives
=====================  ==========================  ======================  =====================
actor ROUTER (mailbox) `Router` (io/router.py),    any thread answering a  the actor's reader: the
                       under its lock              request, via            I/O thread, or a thread
                                                   `Router.send`           waiting for a message,
                                                                           in its turn (io/
                                                                           router_turns.py); with
                                                                           ``workers_receive`` the
                                                                           leading worker
                                                                           (concurrency/
                                                                           leaders.py); via
                                                                           `Router.take`
ROUTER disconnect      I/O thread (io/mailbox.py)  libzmq                  I/O thread
monitor
DEALER to a peer       I/O thread                  I/O thread; other       I/O thread, under its
actor, one per peer    (io/mailbox.py), under its  threads their one-way   lock
                       lock                        messages, under its
                                                   lock (requests:
                                                   `call_soon`)
its monitor            I/O thread                  libzmq                  I/O thread
`Channel` DEALER, one  the calling thread          that thread             that thread
per thread and peer    (io/channel.py)
its monitor            the calling thread          libzmq                  that thread
attached socket        I/O thread                  I/O thread (handlers    I/O thread; handlers
(`Actor.attach`)       (io/attachments.py)         and other threads:      run on the pool
                                                   `Attachment.send`)
introspection ROUTER   I/O thread (introspection/  I/O thread              I/O thread (answers
`serve_introspection`  server.py)                                          STATUS, STACKS, ...)
ZAP handler's socket   pyzmq's authenticator       its thread              its thread
                       thread (io/security.py)
=====================  ==========================  ======================  =====================
```

**Peers.** What an actor knows of the peers it sends to lives in one `PeerTable`
(`io/peers.py`), on the I/O thread: each connection's state and why a peer was lost,
the pending requests with their deadlines, the heartbeat settings (and the count of
messages sent to each peer, which a thread sending one-way keeps under the DEALER's
lock). The monitors feed
it, and so does an owner that learnt of a loss another way (`ActorCore.report_lost`:
the RPC agent, when a thread's own `Channel` to a worker drops or a caller's
connection closes); the first report decides, and the loss is announced once. Where
the I/O thread reads the mailbox (process-group transports, the store server), the
requests already waiting in it are handed up first.

Nothing else touches a socket. Resource owners (`Actor`, `Channel`) release their
threads and sockets when closed or dropped; their finalizers only ask, and never
block.

**Hot paths.** A hop is a hand-off of a message from one thread to another (libzmq's
I/O threads included); raw pyzmq, a DEALER in one process and a ROUTER echo loop in
another, takes 6 for a round trip. docs/PERFORMANCE.md has the µs per hop measured.

```text
==========================  ====  =============================================================
path                        hops  how
==========================  ====  =============================================================
``rpc_sync`` round trip     6     the caller sends and waits on its own `Channel` DEALER; the
                                  callee's leading worker reads the ROUTER and runs the
                                  function on its own thread
``rpc_async`` round trip    8     +1: the caller hands the request to its I/O thread; +1: the
                                  reply completes the future on that thread and wakes the waiter
collective message          3     the calling thread sends on the peer's DEALER itself; the
(one way)                         thread waiting for it reads it from the ROUTER in its turn;
                                  4 when the I/O thread holds the reading (no collective for
                                  5 ms): it puts the message in the inbox and wakes the
                                  waiting thread; raw: 3
store op (TCPStore)         6     as ``rpc_sync``: the client's `Channel`, handled inline by the
                                  server's I/O thread
store wake-up               6     the setter's op is handled by the server's I/O thread, which
(set → waiting ``wait``)          answers the waiter's pending request in the same step
==========================  ====  =============================================================
```

**Threads.** Every thread the project starts goes through
`concurrency.threads.start_thread` (or `new_thread`), and `running_threads()` lists
those alive: the registry is the live list, this table the map. Periodic work that has
a loop to join runs as a timer of that loop, not on a thread of its own: the
dist-autograd release flush is a timer of the RPC worker's I/O loop
(`actors.run_on_pool_later`).

```text
==============================  =====================================  ==========================
thread name                     owner                                  purpose
==============================  =====================================  ==========================
``{actor}-io``                  actors.runtime.io.mailbox.Mailbox      owns the actor's sockets,
                                                                       runs its timers
``{actor}-worker-{i}``          actors.runtime.concurrency.scheduler.  runs handlers and pool
                                WorkerPool                             tasks (with
                                                                       workers_receive, reads
                                                                       requests too)
``actorgrad-recorder-dump``     actors.runtime.introspection.dumps.    writes flight-recorder
                                DumpWriter                             files; ends when none is
                                                                       left
``pg-{group}-ops``              actors.distributed.group.ProcessGroup  runs the group's queued
                                                                       collectives in order
``pg-irecv``                    actors.distributed.p2p.irecv           waits for one irecv's
                                                                       message
``rank{r}-stdout``,             actors.launch.workers.Worker           copies a worker's output
``rank{r}-stderr``                                                     with a rank prefix
``actorgrad-{store}-watch``     store.watch.WatchDispatcher            calls a store's watch
                                                                       callbacks in order
``actorgrad-filestore-poll``    store.file_store.FileStore             stats the file (10 ms)
                                                                       for watched keys
``actorgrad-etcd-watch``        store.etcd.gateway.WatchStream         reads one etcd watch
                                                                       stream, resumes it
``actorgrad-etcd-lease``        store.etcd.session.Session             keeps the ephemeral
                                                                       keys' lease alive
``rdzv-keep-alive-{node}``      store.elastic.handler.                 sends the node's
                                DynamicRendezvousHandler               rendezvous keep-alives
pyzmq's ZAP thread              actors.runtime.io.security (started    with CURVE: answers ZAP
                                by pyzmq, `register_foreign`)          requests
==============================  =====================================  ==========================
```

Not in the registry, as the project neither starts nor stops them: libzmq's I/O and
reaper threads of the one context (not Python threads), and pyzmq's garbage
collector thread, which pyzmq starts on the first zero-copy send and keeps until exit.
"""
from .actor import Actor, ActorCore
from .protocol.envelope import Encoded, Message
from .errors import (ActorError, ActorStoppedError, AddressInUseError, PeerLostError,
                     ProtocolError, RemoteError, RequestTimeoutError, SafeModeError,
                     UnknownKindError)
from .concurrency.futures import Future, FutureTimeoutError, InvalidStateError, wait_all
from .protocol import PROTOCOL_VERSION, Flag, Kind
from .concurrency.scheduler import WorkerPool

__all__ = [
    "Actor", "ActorCore", "Encoded", "Message", "Future", "FutureTimeoutError", "InvalidStateError",
    "wait_all", "Kind", "Flag", "PROTOCOL_VERSION", "WorkerPool", "ActorError",
    "ActorStoppedError", "AddressInUseError", "PeerLostError", "ProtocolError", "RemoteError",
    "RequestTimeoutError", "SafeModeError", "UnknownKindError",
]
