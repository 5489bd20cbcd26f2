"""Where the shared state lives: the two-call backend surface and its Store version.

A backend stores opaque state bytes versioned by a token: `get_state()` returns
(state, token) or None when there is no state yet; `set_state(state, token)` writes
only if the stored version is still `token` (None: no state yet) and returns
(current state, its token, whether ours was written).
"""
from __future__ import annotations

import abc
from typing import Any, Callable, Optional, Tuple

from store.base import Store, check_key
from store.errors import StoreError
from store.elastic.errors import RendezvousConnectionError, RendezvousStateError

Token = Any


class RendezvousBackend(abc.ABC):
    """Compare-and-set storage of the rendezvous state."""

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The backend's name (e.g. "store")."""

    @abc.abstractmethod
    def get_state(self) -> Optional[Tuple[bytes, Token]]:
        """The current state and its token, or None if none was written."""

    @abc.abstractmethod
    def set_state(self, state: bytes, token: Optional[Token] = None
                  ) -> Optional[Tuple[bytes, Token, bool]]:
        """Write `state` if the stored version is `token`; (current, token, written)."""

    def watch(self, callback: Callable[[Optional[Tuple[bytes, Token]]], None]) -> bool:
        """Call `callback((state, token))` (None: deleted) whenever the state changes;
        False if unsupported (the executor then polls once a second, like torch)."""
        return False


class StoreRendezvousBackend(RendezvousBackend):
    """The state in one key of any Store (a TCPStore for real runs), set by compare_set.

    The token is the stored bytes themselves, as in torch's C10d backend: a write
    succeeds only over exactly the state it was decided on.
    """

    KEY_PREFIX = "elastic/rdzv/"

    def __init__(self, store: Store, run_id: str):
        if not isinstance(store, Store):
            raise TypeError(f"store must be a Store, got {type(store).__name__}")
        if not isinstance(run_id, str) or not run_id:
            raise ValueError(f"run_id must be a non-empty str, got {run_id!r}")
        self._store = store
        self.key = state_key(run_id)
        self._exists = False  # once written, the state key is never deleted by us

    @property
    def name(self) -> str:
        return "store"

    @property
    def store(self) -> Store:
        """The store that holds the rendezvous state."""
        return self._store

    def get_state(self) -> Optional[Tuple[bytes, Token]]:
        if not self._exists:
            if not call_store(self._store.check, [self.key]):
                return None
            self._exists = True
        state = call_store(self._store.get, self.key)
        return state, state

    def set_state(self, state: bytes, token: Optional[Token] = None
                  ) -> Optional[Tuple[bytes, Token, bool]]:
        if token is not None and not isinstance(token, bytes):
            raise RendezvousStateError(f"token must be the bytes of a state, "
                                       f"got {type(token).__name__}")
        current = call_store(self._store.compare_set, self.key, token or b"", state)
        if not current or (token and current == token and current != state):
            self._exists = False
            return None  # the state was deleted under us (compare_set echoes `expected`)
        self._exists = True
        return current, current, current == state

    def watch(self, callback: Callable[[Optional[Tuple[bytes, Token]]], None]) -> bool:
        """Call `callback((state, token))` on every change; True (stores push or poll)."""
        call_store(self._store.watch_key, self.key,
                   lambda _old, new: callback(None if new is None else (new, new)))
        return True


class C10dRendezvousBackend(StoreRendezvousBackend):
    """`StoreRendezvousBackend` under torch's name for it (its handlers report "c10d")."""

    @property
    def name(self) -> str:
        return "c10d"


def state_key(run_id: str) -> str:
    """The key that holds run `run_id`'s state, whichever store or backend keeps it."""
    return check_key(f"{StoreRendezvousBackend.KEY_PREFIX}{run_id}/state")


def call_store(operation: Any, *args: Any) -> Any:
    """`operation(*args)`, its store failures raised as RendezvousConnectionError."""
    try:
        return operation(*args)
    except TimeoutError as exc:
        raise RendezvousConnectionError(
            f"the rendezvous store did not answer {operation.__name__}: {exc}") from exc
    except StoreError as exc:
        raise RendezvousConnectionError(
            f"the rendezvous store failed on {operation.__name__}: {exc}") from exc
