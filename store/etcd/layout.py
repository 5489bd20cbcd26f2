"""Where an `EtcdStore` keeps its data in etcd's one flat key space.

A store reads its plain keys, and each of its queues, as a range of etcd keys that
start alike, so every such start must be shared by nothing else:

- a store's namespace is ``<prefix>/#``, with ``%`` and ``#`` percent-escaped in the
  prefix: an escaped prefix holds no ``#``, so no namespace starts with another one
  (the stores of ``/job`` and ``/job/k`` share nothing);
- a plain key ``k`` is ``<namespace>k/<k>``, as given: only this store writes there;
- an item of queue ``q`` is ``<namespace>q/<q>/<random id>``, with ``%`` and ``/``
  percent-escaped in ``q``: an escaped name holds no ``/``, so queue ``a`` never
  reads the items of queue ``a/b``.
"""
from __future__ import annotations


def escape(text: str, reserved: str) -> str:
    """`text` with ``%`` and `reserved` percent-escaped: it holds no `reserved` after,
    and two texts stay two."""
    for char in "%" + reserved:
        text = text.replace(char, f"%{ord(char):02X}")
    return text


class Layout:
    """The etcd keys of the store under `prefix` (trailing ``/`` ignored)."""

    def __init__(self, prefix: str):
        namespace = escape(prefix.rstrip("/"), "#") + "/#"
        self.keys = (namespace + "k/").encode()  # start of every plain key's etcd key
        self.queues = (namespace + "q/").encode()

    def key(self, key: str) -> bytes:
        return self.keys + key.encode()

    def key_name(self, etcd_key: bytes) -> str:
        """The plain key whose etcd key is `etcd_key` (one of `self.keys`' range)."""
        return etcd_key[len(self.keys):].decode()

    def queue(self, name: str) -> bytes:
        """The start of every item of queue `name`."""
        return self.queues + escape(name, "/").encode() + b"/"
