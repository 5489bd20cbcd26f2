"""Opening a DEALER to a peer, the one way the mailbox and the channel both do it."""
from __future__ import annotations

from typing import Tuple

import zmq

# The monitor reports when the handshake with the peer is done and when it drops.
MONITOR_EVENTS = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED


def open_dealer(ctx: zmq.Context, address: str, heartbeat_ms: int,
                heartbeat_timeout_ms: int) -> Tuple[zmq.Socket, zmq.Socket]:
    """A DEALER connected to `address` with ZMTP heartbeats, and its monitor socket.

    Unbounded queues (the caller bounds what it sends) and no linger on close. If
    `connect` refuses the address, both sockets are closed and the error raised.
    """
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.setsockopt(zmq.SNDHWM, 0)
    dealer.setsockopt(zmq.RCVHWM, 0)
    dealer.setsockopt(zmq.HEARTBEAT_IVL, heartbeat_ms)
    dealer.setsockopt(zmq.HEARTBEAT_TIMEOUT, heartbeat_timeout_ms)
    monitor = dealer.get_monitor_socket(MONITOR_EVENTS)
    try:
        dealer.connect(address)
    except zmq.ZMQError:
        dealer.disable_monitor()
        monitor.close(0)
        dealer.close(0)
        raise
    return dealer, monitor
