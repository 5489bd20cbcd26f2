"""etcd v3 as a store: `EtcdStore` and the gateway calls it is made of."""
from .store import EtcdStore

__all__ = ["EtcdStore"]
