"""`Session`: what one `EtcdStore` client holds open (its lease for ephemeral keys and
the thread that keeps it alive), and `KeyWatches`, the keys it watches."""
from __future__ import annotations

import threading
from typing import Callable, Dict, List, Optional, Tuple

from actors.runtime.concurrency.threads import start_thread
from actors.runtime.process.log import get_logger
from store.errors import StoreError
from store.watch import WatchDispatcher

from .gateway import Gateway, LeaseNotFoundError

log = get_logger(__name__)

REVOKE_RETRY_FOR = 1.0  # seconds


class KeyWatches:
    """The keys this client watches: `watch_key` callbacks (run in order on the
    dispatcher's thread) and `watch_revisioned` ones (run on the stream's thread), each
    told only of changes after the revision it was registered at."""

    def __init__(self, session: "Session"):
        self._session = session
        self._dispatcher: Optional[WatchDispatcher] = None
        self._revisioned: Dict[str, Tuple[Tuple[Callable, int], ...]] = {}
        self._lock = threading.Lock()

    def dispatcher(self) -> WatchDispatcher:
        with self._lock:
            if self._dispatcher is None:
                self._dispatcher = WatchDispatcher("actorgrad-etcdstore-watch")
                self._session.on_close(self._dispatcher.stopper())
            return self._dispatcher

    def add_revisioned(self, key: str, callback: Callable, since: int) -> None:
        with self._lock:
            self._revisioned[key] = self._revisioned.get(key, ()) + ((callback, since),)

    def deliver(self, key: str, old: Optional[bytes], new: Optional[bytes],
                revision: int) -> None:
        for callback, since in self._revisioned.get(key, ()):
            if revision > since:
                try:
                    callback(None if new is None else (new, revision))
                except Exception:
                    # One faulty callback must not cost the others this change.
                    log.exception("watch_callback_failed", key=key, callback=repr(callback))
        if self._dispatcher is not None:
            self._dispatcher.notify(key, old, new, revision)

    def close(self) -> None:
        if self._dispatcher is not None:
            self._dispatcher.close()


class Session:
    """What a store client holds open: its watch streams, its lease and the keep-alive
    thread.

    Nothing here refers to the store or its watch callbacks, so a dropped store is
    collected and its finalizer ends the session (`close_soon`).
    """

    def __init__(self, etcd: Gateway):
        self.etcd = etcd
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self._lease: Optional[int] = None
        self._keeper: Optional[threading.Thread] = None
        self._stops: List[Callable[[], None]] = []

    def on_close(self, stop: Callable[[], None]) -> None:
        """Run `stop` when the session ends (at once if it has)."""
        with self.lock:
            if not self.closed.is_set():
                self._stops.append(stop)
                return
        stop()

    def lease(self, ttl: int) -> int:
        """This client's lease for ephemeral keys, granted (and its keep-alive started) on
        first use, and granted again after etcd ended it."""
        with self.lock:
            if self._lease is None:
                lease = self.etcd.grant(ttl)
                # Checked after the grant, under the lock the keep-alive thread takes to
                # read the lease it revokes at close: a lease is revoked by one or the other.
                if self.closed.is_set():
                    self.etcd.revoke(lease)
                    raise StoreError("this EtcdStore is closed")
                self._lease = lease
                if self._keeper is None or not self._keeper.is_alive():
                    self._keeper = start_thread(
                        _keep_alive, args=(self, ttl), name="actorgrad-etcd-lease",
                        owner="store.etcd.session.Session",
                        purpose="keeps the ephemeral keys' lease alive")
            return self._lease

    def current_lease(self) -> Optional[int]:
        """The lease the next ephemeral key goes on; None before the first or after one
        ended."""
        with self.lock:
            return self._lease

    def expired(self, lease: int) -> None:
        """Forget `lease`, which etcd ended (this process went unscheduled for longer
        than its TTL): its keys are gone, as for a dead client, and the next ephemeral
        key gets a new lease."""
        with self.lock:
            if self._lease == lease:
                self._lease = None
                log.warning("etcd_lease_expired", lease=lease)

    def close_soon(self) -> None:
        """End everything without waiting: the keep-alive thread revokes the lease as it
        leaves."""
        if self.closed.is_set():
            return
        self.closed.set()
        with self.lock:
            stops, self._stops = self._stops, []
        for stop in stops:
            stop()

    def close(self, timeout: float = 5.0) -> None:
        """`close_soon`, then wait (bounded) for the keep-alive thread."""
        self.close_soon()
        if self._keeper is not None:
            self._keeper.join(timeout)


def _keep_alive(session: Session, ttl: int) -> None:
    """Refresh the session's lease a few times per TTL until the store closes, then
    revoke it."""
    etcd = session.etcd
    while not session.closed.wait(ttl / 3):
        lease = session.current_lease()
        if lease is None:
            continue
        try:
            etcd.keep_alive(lease)
        except LeaseNotFoundError:
            session.expired(lease)
        except StoreError as exc:
            log.warning("etcd_lease_keep_alive_failed", lease=lease, error=str(exc))
    lease = session.current_lease()
    if lease is None:
        return
    try:
        # The client's ephemeral keys go now, not at the TTL (which also ends them if
        # etcd cannot be reached now).
        etcd.revoke(lease, retry_for=REVOKE_RETRY_FOR)
    except LeaseNotFoundError:
        pass  # ended already, and its keys with it
    except StoreError as exc:
        log.warning("etcd_lease_not_revoked", lease=lease, error=str(exc))
