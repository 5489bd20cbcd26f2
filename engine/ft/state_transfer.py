"""A replica's state, and its move from a live member to one behind, point to point.

`ReplicaState` says what the state is: the user's `state_dict` / `load_state_dict`
pair when given, else the registered module's and optimizer's. The state and the
manager's own (its step and batch count) are pickled once into a byte array and sent
over the step's process group: its length, then its bytes, on a tag of its own, so it
never mixes with the group's collectives. No file is written. A sender that dies
mid-transfer makes the receiver's `recv` raise RankLostError: the step fails and the
receiver asks again at the next one.
"""
from __future__ import annotations

import hashlib
import pickle
from typing import Any, Callable, Optional, Tuple

import numpy as np

import actors.distributed as dist

TAG = 7301  # p2p tag of state transfers


class ReplicaState:
    """What every replica must share: taken from a live member, loaded by one behind."""

    def __init__(self, state_dict: Optional[Callable[[], Any]] = None,
                 load_state_dict: Optional[Callable[[Any], None]] = None):
        self._give, self._take = state_dict, load_state_dict
        self.module: Any = None
        self.optimizer: Any = None

    def get(self) -> Any:
        if self._give is not None:
            return self._give()
        return {"model": None if self.module is None else self.module.state_dict(),
                "optimizer": None if self.optimizer is None else self.optimizer.state_dict()}

    def load(self, state: Any) -> None:
        if self._take is not None:
            self._take(state)
            return
        if self.module is not None:
            self.module.load_state_dict(state["model"])
        if self.optimizer is not None:
            self.optimizer.load_state_dict(state["optimizer"])


def pack(state: Any, progress: Any) -> np.ndarray:
    """`state` and the manager's `progress` (its step) as one byte array (a copy: the live
    state may change later)."""
    return np.frombuffer(pickle.dumps((progress, state), protocol=pickle.HIGHEST_PROTOCOL),
                         np.uint8)


def send_state(group: dist.ProcessGroup, dst: int, payload: np.ndarray) -> None:
    """Send a packed state to group rank `dst` of `group`."""
    dist.send(np.array([payload.size], np.int64), dst, group=group, tag=TAG)
    dist.send(payload, dst, group=group, tag=TAG)


def digest(payload: np.ndarray) -> str:
    """A packed state's digest: equal states packed alike have equal digests."""
    return hashlib.sha256(payload).hexdigest()


def recv_state(group: dist.ProcessGroup, src: int) -> Tuple[Any, Any, str]:
    """(progress, state, digest of what was sent) sent by group rank `src` of `group`."""
    size = np.zeros(1, np.int64)
    dist.recv(size, src, group=group, tag=TAG)
    payload = np.empty(int(size[0]), np.uint8)
    dist.recv(payload, src, group=group, tag=TAG)
    progress, state = pickle.loads(payload.tobytes())
    return progress, state, digest(payload)
