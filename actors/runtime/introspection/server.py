"""`IntrospectionServer`: a ROUTER that answers STATUS, STACKS and RECORDER on an I/O thread.

An actor's mailbox may be read by its worker threads (the RPC agent's are), which
can all be busy or blocked when someone asks what they are doing. This socket is
watched by the actor's I/O thread, which answers at once from the state the
process keeps for it (`status.process_status`, `stacks.thread_stacks`).

Requests and answers use the project's envelope (docs/PROTOCOL.md) in the JSON
codec only: no pickle is ever loaded here, so safe mode is kept, and the socket
has the process's security (CURVE when configured), as every mailbox has. Bad
input gets an error answer; nothing a peer sends can stop the actor.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List

import zmq

from ..errors import ProtocolError, UnknownKindError
from ..process.log import get_logger
from ..protocol import ERROR, JSON, PUSH, RESPONSE, Kind, envelope, kind_name
from ..io.context import process_context
from ..io.sockets import NOBLOCK, close_releasing, new_socket, recv_frames, send_frames
from .recorder import TRAFFIC, recording
from .stacks import thread_stacks
from .status import endpoints, identity, process_status

log = get_logger(__name__)

# Requests answered per wake-up, so that a flood cannot hold the I/O thread.
_BATCH = 16


def _recorder(_: Any) -> Dict[str, Any]:
    return recording("asked", identity(), TRAFFIC.entries(), endpoints())


ANSWERS: Dict[int, Callable[[Any], Any]] = {
    Kind.STATUS: lambda _: process_status(),
    Kind.STACKS: lambda _: {**identity(), "threads": thread_stacks()},
    Kind.RECORDER: _recorder,
    Kind.CLOCK: lambda _: {"monotonic_ns": time.monotonic_ns()},
}


class IntrospectionServer:
    """A bound ROUTER at ``tcp://host:*`` (`address` tells the port); `on_ready` answers
    what waits, on the thread that watches `socket`; `close` on that thread too."""

    def __init__(self, host: str, heartbeat_ms: int, heartbeat_timeout_ms: int):
        sock = new_socket(process_context(), zmq.ROUTER, heartbeat_ms, heartbeat_timeout_ms,
                          server=True)
        try:
            sock.bind(f"tcp://{host}:*")
        except zmq.ZMQError:
            sock.close(0)
            raise
        self.socket = sock
        self.address: str = sock.getsockopt(zmq.LAST_ENDPOINT).decode()

    def on_ready(self, events: int) -> None:
        for _ in range(_BATCH):
            try:
                frames = recv_frames(self.socket, zmq.NOBLOCK)
            except zmq.Again:
                return
            answer = self.answer(frames[1:])
            if answer is not None:
                try:
                    send_frames(self.socket, [frames[0], *answer], NOBLOCK)
                except zmq.ZMQError as error:  # the asker went away
                    log.info("introspection_answer_undeliverable", error=str(error))

    @staticmethod
    def answer(frames: List[Any]) -> Any:
        """The frames answering request `frames`, or None for a message needing none."""
        header = envelope.peek_header(frames)
        kind = Kind.PROTOCOL_ERROR if header is None else header.kind
        req_id = 0 if header is None else header.req_id
        try:
            header = envelope.read_header(frames)
            if header.flags & (RESPONSE | PUSH | ERROR):
                return None
            if not header.flags & JSON:
                raise ProtocolError("introspection requests are JSON only (Flag.JSON)")
            handler = ANSWERS.get(header.kind)
            if handler is None:
                raise UnknownKindError(f"{kind_name(header.kind)} is not an introspection kind")
            payload = envelope.read_payload(header, frames)  # not counted: the job's
            # traffic is what an observer asks about, not its own questions
            return envelope.encode(header.kind, req_id, handler(payload), RESPONSE | JSON)
        except Exception as error:  # noqa: BLE001 - bad input is answered, never raised
            log.warning("bad_introspection_request", kind=kind_name(kind), error=str(error))
            return envelope.encode_error(kind, req_id, error, True)

    def close(self) -> None:
        close_releasing(self.socket, self.address)
