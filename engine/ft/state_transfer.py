"""Moving a live member's state to a member that is behind, point to point.

The state (whatever the manager's `state_dict` returns, and the step number) is
pickled once into a byte array and sent over the step's process group: its length,
then its bytes, on a tag of its own, so it never mixes with the group's collectives.
No file is written. A sender that dies mid-transfer makes the receiver's `recv`
raise RankLostError: the step fails and the receiver asks again at the next one.
"""
from __future__ import annotations

import pickle
from typing import Any, Tuple

import numpy as np

import actors.distributed as dist

TAG = 7301  # p2p tag of state transfers


def pack(state: Any, step: int) -> np.ndarray:
    """`state` and `step` as one byte array (a copy: the live state may change later)."""
    return np.frombuffer(pickle.dumps((step, state), protocol=pickle.HIGHEST_PROTOCOL),
                         np.uint8)


def send_state(group: dist.ProcessGroup, dst: int, payload: np.ndarray) -> None:
    """Send a packed state to group rank `dst` of `group`."""
    dist.send(np.array([payload.size], np.int64), dst, group=group, tag=TAG)
    dist.send(payload, dst, group=group, tag=TAG)


def recv_state(group: dist.ProcessGroup, src: int) -> Tuple[int, Any]:
    """(step, state) sent by group rank `src` of `group`."""
    size = np.zeros(1, np.int64)
    dist.recv(size, src, group=group, tag=TAG)
    payload = np.empty(int(size[0]), np.uint8)
    dist.recv(payload, src, group=group, tag=TAG)
    return pickle.loads(payload.tobytes())
