"""torch.distributed's point-to-point functions on numpy arrays: `send`, `recv`,
`isend`, `irecv`. `src` and `dst` are global ranks."""
from __future__ import annotations

import time
from typing import Any, Optional

from actors.runtime.concurrency.threads import start_thread

from .arguments import Group, array_of, group_rank, member, written
from .group import Work


def send(tensor: Any, dst: int, group: Group = None, tag: int = 0) -> None:
    """Send to global rank `dst`; returns once the message is handed to the transport."""
    array = array_of(tensor)
    pg = member(group)
    peer = group_rank(pg, dst, "dst")
    if peer == pg.rank:
        raise ValueError("send: dst is this rank")
    pg.transport.inbox.check(pg.ranks)
    pg.transport.send(dst, (pg.id, "p2p", tag), ("send", array.dtype.str, array.shape), array)


def recv(tensor: Any, src: Optional[int] = None, group: Group = None, tag: int = 0) -> int:
    """Receive into `tensor` from global rank `src` (any rank when None); the sender's rank."""
    array = array_of(tensor)
    written("recv", "tensor", array)
    pg = member(group)
    peers = [p for p in range(pg.size) if p != pg.rank] if src is None else \
        [group_rank(pg, src, "src")]
    senders = tuple(pg.ranks[p] for p in peers)
    key, (call, data) = pg.transport.inbox.take_first(
        tuple((pg.id, "p2p", tag, s) for s in senders), senders, pg.ranks,
        time.monotonic() + pg.timeout,
        lambda: f"recv(src={src}, tag={tag}) on rank {pg.transport.rank}")
    sender = key[-1]
    with pg.transport.lend(data) as data:
        if data.shape != array.shape or data.dtype != array.dtype:
            raise ValueError(f"recv: rank {sender} sent {data.dtype}{list(data.shape)} but "
                             f"rank {pg.transport.rank} receives into "
                             f"{array.dtype}{list(array.shape)}")
        array[...] = data
    return sender


def isend(tensor: Any, dst: int, group: Group = None, tag: int = 0) -> Work:
    """`send` that returns a `Work`: the message is handed over before it returns, as `send` does.

    An error of the send is raised by the Work's `wait` or `result`, not by this call.
    """
    from actors.runtime import Future

    future = Future()
    try:
        send(tensor, dst, group, tag)
    except BaseException as exc:  # noqa: BLE001 - the Work raises it
        future.set_exception(exc)
    else:
        future.set_result(None)
    return Work(future)


def irecv(tensor: Any, src: Optional[int] = None, group: Group = None, tag: int = 0) -> Work:
    """`recv` on a thread of its own; the Work's result is the sender's rank."""
    from actors.runtime import Future

    future = Future()

    def receive() -> None:
        try:
            future.set_result(recv(tensor, src, group, tag))
        except BaseException as exc:  # noqa: BLE001 - the Work raises it
            future.set_exception(exc)

    start_thread(receive, name="pg-irecv", owner="actors.distributed.p2p.irecv",
                 purpose="waits for one irecv's message")
    return Work(future)
