"""Who is who in an RPC world: names, ranks, mailbox addresses, scripts and hosts."""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Union

from actors.network import workers_on_host
from actors.runtime.protocol.script_refs import script_path
from actors.runtime.protocol.shared_buffers import host_key


class WorkerInfo(NamedTuple):
    """A worker of the RPC world: its unique `name` and its `id` (the rank)."""

    name: str
    id: int

    @property
    def address(self) -> str:
        """The worker's mailbox endpoint in this process's RPC world: what a client
        that does not join the world (another language, `ExposedClient`) connects to."""
        from .state import current_agent

        return current_agent().directory.address(self)


Destination = Union[str, int, WorkerInfo]
_DESTINATION_TYPES = (str, int, WorkerInfo)


class WorkerDirectory:
    """The fixed membership of one RPC world, resolved from names, ranks or WorkerInfo."""

    def __init__(self, names: List[str], addresses: List[str], scripts: List[str],
                 hosts: Optional[List[str]] = None):
        self._infos = [WorkerInfo(name, rank) for rank, name in enumerate(names)]
        # Every way of naming a worker that `resolve` accepts: its name, rank and info.
        self._named: Dict[Destination, WorkerInfo] = {
            key: info for info in self._infos for key in (info.name, info.id, info)}
        self._addresses = list(addresses)
        mine = script_path()
        self._same_script = [bool(mine) and script == mine for script in scripts]
        here = host_key()
        self._same_host = [bool(here) and host == here for host in hosts or [""] * len(names)]

    def __len__(self) -> int:
        return len(self._infos)

    def __iter__(self):
        return iter(self._infos)

    def resolve(self, to: Destination) -> WorkerInfo:
        """The worker `to` names; ValueError naming it and listing the known ones."""
        if type(to) not in _DESTINATION_TYPES and (
                isinstance(to, bool) or not isinstance(to, _DESTINATION_TYPES)):
            raise TypeError(f"an RPC destination is a name, a rank or a WorkerInfo, "
                            f"got {type(to).__name__}")
        info = self._named.get(to)
        if info is not None:
            return info
        known = ", ".join(f"{i.name!r} (rank {i.id})" for i in self._infos)
        raise ValueError(f"unknown worker {to!r}; the workers are {known}")

    def address(self, info: WorkerInfo) -> str:
        return self._addresses[info.id]

    def runs_this_script(self, info: WorkerInfo) -> bool:
        """Whether the worker runs the same script file as this process."""
        return self._same_script[info.id]

    def shares_host(self, info: WorkerInfo) -> bool:
        """Whether the worker can map this process's shared memory and it its own."""
        return self._same_host[info.id]

    def by_address(self, address: str) -> WorkerInfo:
        return self._infos[self._addresses.index(address)]

    def workers_on_host(self, address: str) -> int:
        """How many workers of the world listen on the same host as `address`."""
        return workers_on_host(self._addresses, address)
