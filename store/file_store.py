"""`FileStore`: a store that processes share through one file (torch's `c10d::FileStore`).

Crash safety: the file at `path` is only ever replaced whole. A writer holds an
exclusive `flock` on the companion `path.lock`, writes the new snapshot to
`path.tmp`, fsyncs it and `os.replace`s it over `path`; readers take a shared lock.
A process killed at any point leaves either the old or the new complete snapshot
(plus perhaps a stale `path.tmp`, which the next writer truncates), and the kernel
drops a dead process's flock. The snapshot is checksummed, so a foreign or damaged
file is reported as a StoreError instead of being misread.

Waiting is polling, which a plain file cannot avoid: blocking operations re-read
the file only when its identity (device, inode, size, mtime_ns) changes, and
between checks back off from 1 ms to 20 ms, always bounded by the deadline. Every
write makes a new inode, and the instance keeps the version it last read open, so
that inode number cannot be reused: an unchanged identity means unchanged contents.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import threading
import time
from typing import Callable, Dict, Iterator, List, Optional, Tuple, TypeVar

from actors.runtime.process.log import get_logger
from actors.runtime.concurrency.threads import start_thread
from store.base import DEFAULT_TIMEOUT, Timeout, WatchCallback, check_key
from store.errors import StoreError
from store.file_format import decode_state, encode_state
from store.keyspace import INTERNAL_PREFIX, KeySpace, KeySpaceStore, missing_keys
from store.waiting import Attempt, block
from store.watch import WatchDispatcher

log = get_logger(__name__)
T = TypeVar("T")
Progress = Tuple[Optional[tuple], float]  # the file's identity, and since when it is so

REFCOUNT_KEY = INTERNAL_PREFIX + "filestore/refcount"  # instances open on the file
FINISHED_KEY = INTERNAL_PREFIX + "filestore/finished"  # instances that have closed

POLL_MIN = 0.001  # first back-off between two checks of the file while blocked
POLL_MAX = 0.02  # back-off cap: bounds the wake-up delay of wait/get
LOCK_POLL_MIN = 0.0001
LOCK_POLL_MAX = 0.005
# A holder keeps the lock for one rewrite of the file (milliseconds; seconds for a huge
# store). Waiting this long while nobody changes the file means the holder is stuck.
LOCK_STUCK_AFTER = 60.0
WATCH_INTERVAL = 0.01  # how often the watcher thread stats the file
_STALE = ("stale",)  # a signature no file has: forces the next read


def _signature(st: os.stat_result) -> tuple:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _stat_signature(path: str) -> Optional[tuple]:
    """The identity of the file at `path` now; None when there is no file."""
    try:
        return _signature(os.stat(path))
    except FileNotFoundError:
        return None


def _values_of(keys: List[str], space: KeySpace) -> List[Optional[bytes]]:
    return [space.get(k) for k in keys]


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


class FileLockStuckError(StoreError, TimeoutError):
    """The file lock stayed taken, and the store unchanged, for `LOCK_STUCK_AFTER`
    seconds: its holder is alive but stuck (say, stopped with SIGSTOP)."""


# -- the store ----------------------------------------------------------------------


class FileStore(KeySpaceStore):
    """A store in the file `path`, shared by every process (and thread) that opens it.

    Like torch, each instance counts itself in an internal key when opened; when
    `world_size >= 0` and the last of `world_size` instances closes, the file (and its
    `.lock` and `.tmp` companions) is deleted. An instance that is never closed (a
    killed process) keeps the file alive. `watch_key` polls the file every 10 ms on a
    background thread and reports the net change seen at each poll: changes made and
    undone between two polls are not seen.
    """

    def __init__(
        self, path: "str | os.PathLike", world_size: int = -1, timeout: Timeout = DEFAULT_TIMEOUT
    ):
        super().__init__(timeout)
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be str or os.PathLike, got {type(path).__name__}")
        if isinstance(world_size, bool) or not isinstance(world_size, int):
            raise TypeError(f"world_size must be int, got {type(world_size).__name__}")
        self._path = os.path.abspath(os.fspath(path))
        self._lock_path = self._path + ".lock"
        self._tmp_path = self._path + ".tmp"
        self._world_size = world_size
        # The threads of this instance share one flock'ed descriptor, and flock does not
        # exclude threads sharing a descriptor: this mutex does.
        self._mutex = threading.Lock()
        self._lock_fd: Optional[int] = None
        self._lock_pid = 0  # a forked child must not share our lock's open file description
        self._keys = KeySpace()
        self._sig: Optional[tuple] = _STALE  # identity of the file version self._keys holds
        self._held_fd: Optional[int] = None  # that version, kept open to pin its inode number
        self._closing = threading.Event()
        self._closed = False
        self._watchers = WatchDispatcher("actorgrad-filestore-watch")
        self._watched: Dict[str, Optional[bytes]] = {}  # key -> value last delivered
        self._watch_lock = threading.Lock()
        self._watch_thread: Optional[threading.Thread] = None
        try:
            self._apply(lambda ks: ks.add(REFCOUNT_KEY, 1), True)
        except BaseException:
            self._release_fds()
            raise
        log.debug("filestore_opened", path=self._path, world_size=world_size)

    @property
    def path(self) -> str:
        """The file that holds the store."""
        return self._path

    def clone(self) -> "FileStore":
        """Another instance on the same file (counted as one more user, as in torch)."""
        return FileStore(self._path, self._world_size, self.timeout_seconds)

    @property
    def world_size(self) -> int:
        """The number of processes the store was created for, as given (torch's `world_size`)."""
        return self._world_size

    def __repr__(self) -> str:
        return f"FileStore({self._path!r}, world_size={self._world_size})"

    # -- locking and the snapshot cache (callers hold self._mutex) ----------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"FileStore {self._path} is closed")

    @contextlib.contextmanager
    def _flock(self, exclusive: bool) -> Iterator[None]:
        """Hold the file lock, waiting for it as long as its holders make progress.

        As in torch, the store timeout does not bound this wait: it is for keys to
        appear, and under contention the lock is busy for longer than a short one.
        """
        mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
        progress = _stat_signature(self._path), time.monotonic()
        delay = LOCK_POLL_MIN
        while True:
            if self._lock_fd is not None and self._lock_pid != os.getpid():
                os.close(self._lock_fd)  # inherited over fork: that lock is our parent's too
                self._lock_fd = None
            if self._lock_fd is None:
                self._lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
                self._lock_pid = os.getpid()
            try:
                fcntl.flock(self._lock_fd, mode)
            except BlockingIOError:
                progress = self._check_lock_progress(progress)
                time.sleep(delay)
                delay = min(delay * 2, LOCK_POLL_MAX)
                continue
            lock_sig = _stat_signature(self._lock_path)
            if lock_sig is not None and lock_sig[:2] == _signature(os.fstat(self._lock_fd))[:2]:
                break
            # The last user of a world_size group deleted the lock file after we opened it:
            # a lock on the orphaned inode excludes nobody, so take the new file's lock.
            os.close(self._lock_fd)
            self._lock_fd = None
        try:
            yield
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _check_lock_progress(self, seen: Progress) -> Progress:
        """The file's identity and since when it has been so, after `seen`;
        FileLockStuckError once it has not changed for `LOCK_STUCK_AFTER` seconds."""
        sig, since = seen
        now_sig, now = _stat_signature(self._path), time.monotonic()
        if now_sig != sig:
            return now_sig, now
        if now - since >= LOCK_STUCK_AFTER:
            raise FileLockStuckError(
                f"FileStore {self._path}: the lock {self._lock_path} stayed taken for "
                f"{now - since:.0f} s while no process changed the store; its holder is "
                f"alive but stuck (stopped, or hung while holding it)")
        return sig, since

    def _adopt(self, fd: Optional[int], sig: Optional[tuple], keys: KeySpace) -> None:
        if self._held_fd is not None:
            os.close(self._held_fd)
        self._held_fd, self._sig, self._keys = fd, sig, keys

    def _refresh(self) -> KeySpace:
        """Bring the cache up to date with the file (under the file lock)."""
        if _stat_signature(self._path) == self._sig:
            return self._keys
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except FileNotFoundError:
            self._adopt(None, None, KeySpace())  # no file is an empty store
            return self._keys
        try:
            sig = _signature(os.fstat(fd))  # of what we read, even if path is replaced meanwhile
            keys = KeySpace.from_state(decode_state(_read_all(fd), self._path))
        except BaseException:
            os.close(fd)
            raise
        self._adopt(fd, sig, keys)
        return keys

    def _write(self, keys: KeySpace) -> None:
        """Replace the file with a snapshot of `keys` (under the exclusive lock)."""
        blob = memoryview(encode_state(keys.to_state()))
        fd = os.open(self._tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            while blob:
                blob = blob[os.write(fd, blob):]
            os.fsync(fd)
            os.replace(self._tmp_path, self._path)
        except BaseException:
            os.close(fd)
            self._sig = _STALE  # the cache holds a change the file does not
            raise
        self._adopt(fd, _signature(os.fstat(fd)), keys)

    def _run(self, op: Callable[[KeySpace], T], write: bool) -> Tuple[T, Optional[tuple]]:
        """Apply `op` to the current contents; returns its result and the version it saw."""
        with self._mutex:
            self._check_open()
            if not write and _stat_signature(self._path) == self._sig:
                return op(self._keys), self._sig  # unchanged since our last locked read
            with self._flock(exclusive=write):
                keys = self._refresh()
                before = keys.version
                try:
                    result = op(keys)
                except BaseException:
                    if keys.version != before:
                        self._sig = _STALE
                    raise
                if keys.version != before:
                    self._write(keys)
                return result, self._sig

    # -- KeySpaceStore primitives ---------------------------------------------------------

    def _apply(self, op: Callable[[KeySpace], T], write: bool) -> T:
        return self._run(op, write)[0]

    def _block(
        self,
        attempt: Callable[[KeySpace], Optional[T]],
        operation: str,
        keys: List[str],
        timeout: float,
        write: bool = False,
    ) -> T:
        def attempt_for(seconds: float) -> Attempt:
            until = time.monotonic() + seconds
            while True:
                result, seen = self._run(attempt, write)
                if result is not None:
                    return True, result
                delay = POLL_MIN
                while _stat_signature(self._path) == seen:
                    remaining = until - time.monotonic()
                    if remaining <= 0:
                        return False, self._apply(
                            lambda ks: missing_keys(ks, operation, keys), False)
                    if self._closing.wait(min(delay, remaining)):
                        raise StoreError(
                            f"FileStore {self._path} was closed during {operation}")
                    delay = min(delay * 2, POLL_MAX)

        return block(attempt_for, operation, keys, timeout, where=self._path)

    # -- watch_key --------------------------------------------------------------------------

    def watch_key(self, key: str, callback: WatchCallback) -> None:
        key = check_key(key)
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        current = self._apply(lambda ks: ks.get(key), False)
        with self._watch_lock:
            if self._closing.is_set():
                raise StoreError(f"FileStore {self._path} is closed")
            # A key already watched keeps the value last delivered, so nothing is reported twice.
            self._watched.setdefault(key, current)
            self._watchers.add(key, callback)
            if self._watch_thread is None:
                self._watch_thread = start_thread(
                    self._watch_loop, name="actorgrad-filestore-poll",
                    owner="store.file_store.FileStore",
                    purpose="stats the file for watched keys' changes")

    def _watch_loop(self) -> None:
        seen: Optional[tuple] = _STALE
        while not self._closing.wait(WATCH_INTERVAL):
            if _stat_signature(self._path) == seen:
                continue
            with self._watch_lock:
                keys = list(self._watched)
            try:
                values, seen = self._run(functools.partial(_values_of, keys), False)
            except Exception:
                if self._closing.is_set():
                    return
                log.exception("filestore_watch_poll_failed", path=self._path)
                continue
            with self._watch_lock:
                for key, new in zip(keys, values):
                    old = self._watched[key]
                    if old != new:
                        self._watched[key] = new
                        self._watchers.notify(key, old, new)

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Count this instance out; the last of `world_size` deletes the file. Idempotent."""
        with self._mutex:
            if self._closed or self._closing.is_set():
                return
            self._closing.set()  # wakes blocked operations and the watcher
        if self._watch_thread is not None:
            self._watch_thread.join(timeout=5.0)
        self._watchers.close()
        with self._mutex:
            try:
                with self._flock(exclusive=True):
                    self._count_out()
            finally:
                self._closed = True
                self._release_fds()

    def _release_fds(self) -> None:
        self._adopt(None, _STALE, KeySpace())
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _count_out(self) -> None:
        if not os.path.exists(self._path):
            return  # already cleaned up by someone else (torch skips in this case too)
        keys = self._refresh()
        finished = keys.add(FINISHED_KEY, 1)
        users = keys.add(REFCOUNT_KEY, -1)
        if users <= 0 and self._world_size >= 0 and finished >= self._world_size:
            for path in (self._path, self._tmp_path, self._lock_path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            log.info("filestore_removed", path=self._path, world_size=self._world_size)
        else:
            self._write(keys)
