"""`Holders`: which replicas hold the job's state now, by a session-bound key each.

A member that holds the state (it is in a step at the group's highest step, or has
loaded the state it received) keeps the key ``holders/<replica id>``, owned by its
store session: the store deletes it when the process dies or its session misses its
heartbeats, the member sets it again whenever its group is re-formed and every few
rounds, and deletes it once it falls behind. Newcomers never release a round by
themselves, so a newcomer holding nothing that found no round to join within its join
timeout looks here: with no other holder, every replica was lost at once and nobody
can give it the state (`NoLiveReplicaError`), where it would otherwise wait for ever.
"""
from __future__ import annotations

from typing import Any, List, Optional

from actors.runtime.process.log import get_logger

log = get_logger(__name__)

PREFIX = "holders/"


class NoLiveReplicaError(RuntimeError):
    """No live member of the job holds the state a newcomer must receive: every replica
    was lost at once. Raised into the training loop, since no later step can succeed."""


class Holders:
    """This replica's holder key in `keys` (the job's keys of one session)."""

    def __init__(self, keys: Any, replica_id: str, incarnation: str):
        # A store without session-bound keys cannot tell who is alive: nothing is known.
        self._set_ephemeral = getattr(keys, "set_ephemeral", None)
        self._keys, self._me, self._incarnation = keys, replica_id, incarnation
        self.holding = False

    def hold(self) -> None:
        """Set this replica's key (again). A store error leaves it for the next step."""
        if self._set_ephemeral is None:
            return
        try:
            self._set_ephemeral(PREFIX + self._me, self._incarnation)
            self.holding = True
        except Exception as exc:  # noqa: BLE001 - the next step tries again
            log.info("ft_holder_key_not_set", replica=self._me,
                     error=f"{type(exc).__name__}: {exc}")

    def drop(self) -> None:
        """Delete this replica's key: its state fell behind the group's."""
        if not self.holding:
            return
        self.holding = False
        try:
            self._keys.delete_key(PREFIX + self._me)
        except Exception as exc:  # noqa: BLE001 - it lapses with the session anyway
            log.info("ft_holder_key_not_deleted", replica=self._me,
                     error=f"{type(exc).__name__}: {exc}")

    def others(self) -> Optional[List[str]]:
        """The other replicas that hold the state now; None if the store cannot tell."""
        if self._set_ephemeral is None:
            return None
        return sorted(key[len(PREFIX):] for key in self._keys.list_keys()
                      if key.startswith(PREFIX) and key != PREFIX + self._me)
