"""`EtcdRendezvousBackend`: the rendezvous state in one etcd key, versioned by revision.

The token of a state is the etcd revision it was written at, so `set_state` is one
etcd transaction: write if the key is still at that revision, else read it back.
Changes are pushed to every node by an etcd watch. Torch's etcd-v2 backend works
the same way.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple, Union

from store.elastic.backend import RendezvousBackend, Token, call_store, state_key
from store.elastic.errors import RendezvousStateError


class EtcdRendezvousBackend(RendezvousBackend):
    """Compare-and-set of the state of run `run_id` in an `EtcdStore`.

    `client_or_endpoint` is an EtcdStore, or ``host:port`` of an etcd server (the
    backend then opens its own store under `key_prefix`). `name` is what handlers
    built on it report as their backend ("etcd", or torch's "etcd-v2").
    """

    def __init__(self, client_or_endpoint: Union["EtcdStore", str], run_id: str,  # noqa: F821
                 key_prefix: str = "/actorgrad", *, name: str = "etcd",
                 timeout: float = 60.0):
        from store.etcd import EtcdStore

        if not isinstance(run_id, str) or not run_id:
            raise ValueError(f"run_id must be a non-empty str, got {run_id!r}")
        if isinstance(client_or_endpoint, str):
            client_or_endpoint = call_store(EtcdStore, client_or_endpoint, key_prefix, timeout)
        if not isinstance(client_or_endpoint, EtcdStore):
            raise TypeError(f"client_or_endpoint must be an EtcdStore or 'host:port', got "
                            f"{type(client_or_endpoint).__name__}")
        self._store = client_or_endpoint
        self._name = name
        self.key = state_key(run_id)

    @property
    def name(self) -> str:
        return self._name

    @property
    def store(self) -> "EtcdStore":  # noqa: F821
        """The etcd store that holds the rendezvous state."""
        return self._store

    def get_state(self) -> Optional[Tuple[bytes, Token]]:
        return call_store(self._store.get_revisioned, self.key)

    def set_state(self, state: bytes, token: Optional[Token] = None
                  ) -> Optional[Tuple[bytes, Token, bool]]:
        if token is not None and not isinstance(token, int):
            raise RendezvousStateError(f"token must be an etcd revision, got "
                                       f"{type(token).__name__}")
        current, written = call_store(self._store.set_revisioned, self.key, state, token)
        if current is None:
            return None
        return current[0], current[1], written

    def watch(self, callback: Callable[[Optional[Tuple[bytes, Token]]], None]) -> bool:
        call_store(self._store.watch_revisioned, self.key, callback)
        return True
