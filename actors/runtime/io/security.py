"""The process's transport security: one CURVE setting that every socket of the process follows.

`secure(sock, server=...)` is called on each socket the project makes, before it
binds (a server: mailboxes, the store server, attached listeners) or connects (a
client: connections to peers, store clients). With a `Security` set, servers take
only CURVE clients whose public key is authorised, checked by a ZAP handler on the
process's one context (ZeroMQ's authentication protocol), and every connection is
encrypted; without one, sockets are left as they are.

The setting comes from `set_security`, or, if that was never called, from the
directory named by ``ACTORGRAD_CURVE_DIR``, read when the first socket is made.
A directory holds ``zmq.auth`` certificate files (``python -m actors.keys``):

- ``self.key`` and ``self.key_secret``: this process's key pair;
- ``server.key`` (optional): the public key of the servers this process connects
  to; without it, its own (every process of a job shares one pair);
- ``authorized/*.key``: the public keys of the clients that may connect.
"""
from __future__ import annotations

import itertools
import os
import pathlib
import threading
import time
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterable, Optional

import zmq
import zmq.auth

from .context import process_context
from ..process.log import get_logger
from ..concurrency.threads import register_foreign

if TYPE_CHECKING:
    from zmq.auth.thread import ThreadAuthenticator

log = get_logger(__name__)

DIR_VARIABLE = "ACTORGRAD_CURVE_DIR"
ZAP_DOMAIN = b"actorgrad"
_REBIND_LIMIT, _REBIND_PAUSE = 2.0, 0.005  # seconds (see `_started_authenticator`)


class Security:
    """A CURVE key pair, the servers' public key and the clients authorised to connect.

    Keys are Z85 text (40 characters), as ``zmq.auth`` writes them. `server_key`
    defaults to `public_key`; `authorized` to this pair's own public key.
    """

    def __init__(self, public_key: bytes, secret_key: bytes, *,
                 server_key: Optional[bytes] = None,
                 authorized: Optional[Iterable[bytes]] = None):
        self.public_key = _z85(public_key, "public_key")
        self.secret_key = _z85(secret_key, "secret_key")
        self.server_key = self.public_key if server_key is None else _z85(server_key,
                                                                          "server_key")
        keys = [self.public_key] if authorized is None else authorized
        self.authorized: FrozenSet[bytes] = frozenset(_z85(k, "authorized key") for k in keys)

    @classmethod
    def from_dir(cls, directory: "str | os.PathLike[str]") -> "Security":
        """The setting a key directory describes (see the module doc).

        FileNotFoundError names a missing file; ValueError a file that holds no key.
        """
        root = pathlib.Path(directory)
        secret_file = root / "self.key_secret"
        if not secret_file.is_file():
            raise FileNotFoundError(
                f"{secret_file} is missing: this process's CURVE key pair; make one with "
                f"'python -m actors.keys generate {root}'")
        public, secret = zmq.auth.load_certificate(secret_file)
        if secret is None:
            raise ValueError(f"{secret_file} holds no secret key")
        server_file = root / "server.key"
        server = zmq.auth.load_certificate(server_file)[0] if server_file.is_file() else None
        authorized_dir = root / "authorized"
        if not authorized_dir.is_dir():
            raise FileNotFoundError(
                f"{authorized_dir} is missing: the public keys of the clients that may "
                f"connect; 'python -m actors.keys generate {root}' makes it")
        authorized = [zmq.auth.load_certificate(path)[0]
                      for path in sorted(authorized_dir.glob("*.key"))]
        return cls(public, secret, server_key=server, authorized=authorized)

    def __repr__(self) -> str:
        return (f"Security(public_key={self.public_key.decode()!r}, "
                f"{len(self.authorized)} authorized client key(s))")


def _z85(key: bytes, what: str) -> bytes:
    key = key.encode() if isinstance(key, str) else bytes(key)
    if len(key) != 40:
        raise ValueError(f"{what} must be a Z85-encoded CURVE key of 40 characters, "
                         f"got {len(key)}")
    return key


class _Setting:
    """The process's security and its ZAP handler, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.security: Optional[Security] = None
        self.decided = False  # set_security was called, or the environment was read
        self.authenticator: Optional[ThreadAuthenticator] = None
        # The ZAP domain of each setting the handler answers for, while it runs: a
        # replaced setting's servers keep their own clients. No name is used twice, so
        # servers of a cleared setting never pass as a later one's.
        self.domains: Dict[Security, bytes] = {}
        self.domain_numbers = itertools.count(1)


_setting = _Setting()


def set_security(security: Optional[Security]) -> None:
    """Make `security` the setting of every socket made from now on (None: plain sockets).

    Sockets already open keep what they were made with: after a replacement, servers
    made before admit the clients their setting authorised. Clearing the setting
    (None) stops the ZAP handler's thread, and servers made under CURVE then refuse
    every client; the next CURVE server starts the handler anew.
    """
    if security is not None and not isinstance(security, Security):
        raise TypeError(f"expected an actors.Security or None, got {type(security).__name__}")
    with _setting.lock:
        if security is None:
            _stop_authenticator()
        _setting.security, _setting.decided = security, True
    log.info("security_set", curve=security is not None)


def current_security() -> Optional[Security]:
    """The process's setting: `set_security`'s, else ``ACTORGRAD_CURVE_DIR``'s, else None."""
    if _setting.decided:
        return _setting.security
    with _setting.lock:
        if not _setting.decided:
            directory = os.environ.get(DIR_VARIABLE)
            _setting.security = Security.from_dir(directory) if directory else None
            _setting.decided = True
            if directory:
                log.info("security_from_environment", directory=directory)
        return _setting.security


def secure(sock: zmq.Socket, *, server: bool) -> None:
    """Apply the process's security setting to `sock`, before it binds (`server`) or connects."""
    security = current_security()
    if security is None:
        return
    sock.setsockopt(zmq.CURVE_SECRETKEY, security.secret_key)
    sock.setsockopt(zmq.CURVE_PUBLICKEY, security.public_key)
    if server:
        sock.setsockopt(zmq.ZAP_DOMAIN, _authenticate(security))
        # Without a ZAP handler (the setting was cleared), refuse every client rather
        # than admit any, which is libzmq's default.
        sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
        sock.setsockopt(zmq.CURVE_SERVER, 1)
    else:
        sock.setsockopt(zmq.CURVE_SERVERKEY, security.server_key)


class _AuthorizedKeys:
    """ZAP's question, answered from the setting: may this client key connect?"""

    def __init__(self, authorized: FrozenSet[bytes]):
        self.authorized = authorized

    def callback(self, domain: str, key: bytes) -> bool:
        allowed = key in self.authorized
        if not allowed:
            log.warning("curve_client_refused", client_key=key.decode(errors="replace"))
        return allowed


def _authenticate(security: Security) -> bytes:
    """The ZAP domain whose clients the ZAP handler checks against `security`'s keys;
    the handler is started with the first server (before it binds)."""
    domain = _setting.domains.get(security)
    if domain is not None:
        return domain
    with _setting.lock:
        if _setting.authenticator is None:
            authenticator = _started_authenticator()
            register_foreign(authenticator.thread, owner="actors.runtime.io.security",
                             purpose="answers ZAP requests: may this CURVE client connect?")
            _setting.authenticator = authenticator
            log.info("zap_handler_started")
        domain = _setting.domains.get(security)
        if domain is None:
            number = next(_setting.domain_numbers)
            domain = ZAP_DOMAIN + (f".{number}".encode() if number > 1 else b"")
            _setting.authenticator.configure_curve_callback(
                domain.decode(), credentials_provider=_AuthorizedKeys(security.authorized))
            _setting.domains[security] = domain
            log.info("zap_domain_configured", domain=domain.decode(),
                     authorized=len(security.authorized))
        return domain


def _started_authenticator() -> "ThreadAuthenticator":
    """A running ZAP handler. A handler stopped just before holds ZeroMQ's one ZAP
    endpoint until libzmq's reaper has closed its socket: binding is retried meanwhile."""
    # Imported here: it pulls in asyncio, a cost only CURVE users should pay.
    from zmq.auth.thread import ThreadAuthenticator

    deadline = time.monotonic() + _REBIND_LIMIT
    while True:
        authenticator = ThreadAuthenticator(process_context())
        try:
            authenticator.start()
            return authenticator
        except zmq.ZMQError as exc:
            if authenticator.zap_socket is not None:
                authenticator.zap_socket.close(0)
            if exc.errno != zmq.EADDRINUSE or time.monotonic() > deadline:
                raise
            time.sleep(_REBIND_PAUSE)


def _stop_authenticator() -> None:
    """Stop the ZAP handler's thread (under the setting's lock)."""
    if _setting.authenticator is not None:
        _setting.authenticator.stop()
        _setting.authenticator = None
        _setting.domains.clear()
        log.info("zap_handler_stopped")

