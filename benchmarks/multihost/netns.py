"""Network namespaces joined by a bridge: the plan (pure) and the plumbing (root only).

`plan_network(roles)` names one namespace per role after a per-run suffix, so that runs
never collide, and gives each one address in a private /24 (10.231.<x>.0/24, x taken
from the suffix). `SimulatedNetwork(plan)` builds it:

    root namespace:   bridge <prefix><suffix>br (up, no address)
                        |-- veth <prefix><suffix>v0 ... eth0 in namespace 0 (10.231.x.1/24, lo up)
                        |-- veth <prefix><suffix>v1 ... eth0 in namespace 1 (10.231.x.2/24, lo up)
                        ...

The namespaces have no default route, so nothing in them reaches beyond the bridge,
and the root namespace has no address on it. Leaving the `with` block (normally, by an
exception, or by SIGINT/SIGTERM, which raise `Interrupted` while it is open) deletes
every veth, namespace and the bridge, in the reverse order of their making, and waits
(bounded) until none of them is listed any more.
"""
from __future__ import annotations

import re
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

NAME_PREFIX = "agmh"  # actorgrad multi-host
SUBNET_PREFIX = "10.231"
INSIDE_LINK = "eth0"  # the veth end inside each namespace
IFNAMSIZ = 15  # the longest interface name Linux takes
IP_TIMEOUT = 20.0  # one `ip` command
GONE_TIMEOUT = 10.0  # namespaces and links disappear asynchronously after deletion
_SUFFIX = re.compile(r"^[0-9a-f]{1,8}$")
_ROLE = re.compile(r"^[a-z][a-z0-9]{0,11}$")


class NetworkError(RuntimeError):
    """An `ip` command failed; the message has its command line and its error output."""


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived while a SimulatedNetwork was open."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# ---- the plan (pure) -----------------------------------------------------------------

@dataclass(frozen=True)
class HostPlan:
    role: str
    namespace: str
    veth: str  # the root-namespace end, on the bridge; its peer is INSIDE_LINK
    address: str  # the namespace end's address


@dataclass(frozen=True)
class NetworkPlan:
    suffix: str
    subnet: str  # "10.231.x.0/24"
    bridge: str
    hosts: Tuple[HostPlan, ...]

    def host(self, role: str) -> HostPlan:
        for host in self.hosts:
            if host.role == role:
                return host
        raise KeyError(f"no host {role!r} in this plan (roles: "
                       f"{', '.join(h.role for h in self.hosts)})")

    @property
    def links(self) -> Tuple[str, ...]:
        """The interfaces this plan puts in the root namespace."""
        return (self.bridge,) + tuple(host.veth for host in self.hosts)

    @property
    def namespaces(self) -> Tuple[str, ...]:
        return tuple(host.namespace for host in self.hosts)


def new_suffix() -> str:
    """Six random hex digits: a run's names."""
    return secrets.token_hex(3)


def subnet_octet(suffix: str) -> int:
    """The third octet of the run's subnet, 1..254, from its suffix."""
    return int(suffix, 16) % 254 + 1


def plan_network(roles: Sequence[str], suffix: Optional[str] = None,
                 octet: Optional[int] = None) -> NetworkPlan:
    """One namespace per role, in order, with addresses .1, .2, ... of 10.231.<octet>.0/24.

    `suffix` (default: a new one) is 1-8 lowercase hex digits, `octet` (default: from the
    suffix) 0..255; roles are distinct, lowercase alphanumeric, at most 12 characters.
    """
    suffix = new_suffix() if suffix is None else suffix
    if not _SUFFIX.match(suffix):
        raise ValueError(f"suffix must be 1-8 lowercase hex digits, got {suffix!r}")
    octet = subnet_octet(suffix) if octet is None else octet
    if not 0 <= octet <= 255:
        raise ValueError(f"octet must be in 0..255, got {octet}")
    if not 1 <= len(roles) <= 253:
        raise ValueError(f"need 1 to 253 roles, got {len(roles)}")
    if len(set(roles)) != len(roles):
        raise ValueError(f"roles must be distinct, got {list(roles)}")
    for role in roles:
        if not _ROLE.match(role):
            raise ValueError(f"role must be lowercase alphanumeric, starting with a letter, "
                             f"at most 12 characters, got {role!r}")
    bridge = f"{NAME_PREFIX}{suffix}br"
    hosts = tuple(HostPlan(role, f"{NAME_PREFIX}-{suffix}-{role}",
                           f"{NAME_PREFIX}{suffix}v{index}",
                           f"{SUBNET_PREFIX}.{octet}.{index + 1}")
                  for index, role in enumerate(roles))
    plan = NetworkPlan(suffix, f"{SUBNET_PREFIX}.{octet}.0/24", bridge, hosts)
    too_long = [name for name in plan.links if len(name) > IFNAMSIZ]
    assert not too_long, too_long  # the name patterns above keep them short
    return plan


# ---- the plumbing (root only) --------------------------------------------------------

def run_ip(*args: str) -> str:
    """Run `ip ARGS`; its output, or NetworkError."""
    argv = ["ip", *args]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=IP_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise NetworkError(f"{' '.join(argv)}: no answer in {IP_TIMEOUT:.0f} s") from None
    if done.returncode != 0:
        raise NetworkError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


class SimulatedNetwork:
    """The plan's bridge, namespaces and veths, for the span of a `with` block."""

    def __init__(self, plan: NetworkPlan, ip: Callable[..., str] = run_ip,
                 log: Callable[[str], None] = print):
        self.plan = plan
        self._ip = ip
        self._log = log
        self._undo: List[Tuple[str, ...]] = []  # `ip` commands that remove what was made
        self._old_handlers: Dict[int, object] = {}

    def __enter__(self) -> "SimulatedNetwork":
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._old_handlers[signum] = signal.signal(signum, self._on_signal)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _on_signal(self, signum: int, _frame: object) -> None:
        for other in self._old_handlers:
            signal.signal(other, signal.SIG_IGN)  # the cleanup must not be interrupted
        raise Interrupted(signum)

    def _make(self, make: Sequence[str], undo: Sequence[str]) -> None:
        self._ip(*make)
        self._undo.append(tuple(undo))

    def _build(self) -> None:
        plan = self.plan
        self._make(("link", "add", plan.bridge, "type", "bridge"),
                   ("link", "del", plan.bridge))
        self._ip("link", "set", plan.bridge, "up")
        for host in plan.hosts:
            self._make(("netns", "add", host.namespace), ("netns", "del", host.namespace))
            self._make(("link", "add", host.veth, "type", "veth", "peer", "name", INSIDE_LINK,
                        "netns", host.namespace), ("link", "del", host.veth))
            self._ip("link", "set", host.veth, "master", plan.bridge, "up")
            self._ip("-n", host.namespace, "link", "set", "lo", "up")
            self._ip("-n", host.namespace, "addr", "add", f"{host.address}/24",
                     "dev", INSIDE_LINK)
            self._ip("-n", host.namespace, "link", "set", INSIDE_LINK, "up")

    def exec_argv(self, role: str, argv: Sequence[str]) -> List[str]:
        """`argv` run inside the namespace of `role` (`ip netns exec` execs it: same PID)."""
        return ["ip", "netns", "exec", self.plan.host(role).namespace, *argv]

    def partition(self, role: str) -> None:
        """Cut `role` off the bridge (its veth down): a pulled cable, no packet gets out."""
        self._ip("link", "set", self.plan.host(role).veth, "down")

    def pids(self, role: str) -> List[int]:
        """The processes in the namespace of `role`."""
        return [int(pid) for pid in self._ip("netns", "pids",
                                             self.plan.host(role).namespace).split()]

    def leftovers(self) -> List[str]:
        """What of this plan is still listed: namespaces, then root-namespace links."""
        namespaces = {line.split()[0] for line in self._ip("netns", "list").splitlines()
                      if line.strip()}
        links = {name.split("@")[0] for name in re.findall(
            r"^\d+:\s+(\S+):", self._ip("-o", "link", "show"), re.M)}
        return ([name for name in self.plan.namespaces if name in namespaces]
                + [name for name in self.plan.links if name in links])

    def close(self) -> None:
        """Remove everything made so far, newest first; each step runs even if one fails.
        Then wait (bounded) until nothing is listed, and restore the signal handlers.
        SIGINT and SIGTERM are ignored meanwhile."""
        for signum in self._old_handlers:
            signal.signal(signum, signal.SIG_IGN)
        try:
            while self._undo:
                undo = self._undo.pop()
                try:
                    self._ip(*undo)
                except NetworkError as exc:
                    self._log(f"cleanup: {exc}")
            deadline = time.monotonic() + GONE_TIMEOUT
            left = self.leftovers()
            while left and time.monotonic() < deadline:
                time.sleep(0.1)  # the kernel frees namespaces and links asynchronously
                left = self.leftovers()
            if left:
                self._log(f"cleanup: still listed after {GONE_TIMEOUT:.0f} s: {', '.join(left)}")
        finally:
            for signum, handler in self._old_handlers.items():
                signal.signal(signum, handler)
            self._old_handlers.clear()
