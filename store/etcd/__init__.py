"""etcd v3 as a store: `EtcdStore` and the gateway calls it is made of."""
from .limits import MAX_REQUEST_BYTES, ValueTooLargeError
from .store import EtcdStore

__all__ = ["EtcdStore", "MAX_REQUEST_BYTES", "ValueTooLargeError"]
