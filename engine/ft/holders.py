"""`Holders`: which replicas hold the job's state now, by a session-bound key each.

A member that holds the state (it is in a step at the group's highest step, or has
loaded the state it received) keeps the key ``holders/<replica id>``, owned by its
store session: the store deletes it when the process dies or its session misses its
heartbeats, the member sets it again whenever its group is re-formed and every few
rounds, and deletes it once it falls behind. Newcomers never release a round by
themselves, so a newcomer holding nothing that found no round to join within its join
timeout looks here: with no other holder, every replica was lost at once and nobody
can give it the state (`NoLiveReplicaError`), where it would otherwise wait for ever.
A member that shuts down holding the state says so (``left/<replica id>``, its step
and quorum round), so that a newcomer that comes after the members of the latest
round left, the job finished, is told that at once (`ReplicasLeftError`), not that
every replica was lost.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from actors.runtime.process.log import get_logger

log = get_logger(__name__)

PREFIX = "holders/"
LEFT = "left/"  # left/<replica id>: "<step> <round>" of a replica that shut down holding the state


class NoLiveReplicaError(RuntimeError):
    """No live member of the job holds the state a newcomer must receive: every replica
    was lost at once. Raised into the training loop, since no later step can succeed."""


class ReplicasLeftError(NoLiveReplicaError):
    """No live member holds the state because every one that did shut down (left the
    job, e.g. having finished it) before this newcomer could join."""


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

    def leave(self, step: int, round_: int) -> None:
        """Say that this replica shuts down holding the state, after `step` in quorum
        round `round_`, then drop its key: a newcomer that finds nobody left to join can
        tell why."""
        if not self.holding:
            return
        try:
            self._keys.set(LEFT + self._me, f"{step} {round_}")
        except Exception as exc:  # noqa: BLE001 - the store may be gone at the job's end
            log.info("ft_left_key_not_set", replica=self._me,
                     error=f"{type(exc).__name__}: {exc}")
        self.drop()

    def departed(self) -> Dict[str, Tuple[int, int]]:
        """{replica id: (step, round)} of the replicas that shut down holding the state."""
        keys = sorted(key for key in self._keys.list_keys() if key.startswith(LEFT))
        values = self._keys.multi_get(keys) if keys else []
        found = {}
        for key, value in zip(keys, values):
            step, round_ = value.decode().split()
            found[key[len(LEFT):]] = (int(step), int(round_))
        return found

    def check_joinable(self, waiting: Exception, final: bool,
                       latest_round: Callable[[], int]) -> None:
        """For a newcomer whose wait for a round to join (`waiting`) timed out, when no
        live replica holds the state: ReplicasLeftError if the members of the latest
        round (`latest_round()`, the latest one recorded) left holding it; else, once
        `final` (its join timeout is over), NoLiveReplicaError. A replica that left
        before the others went on to later rounds does not count: they did not finish."""
        if self.holding or self.others() != []:
            return
        departed = self.departed()
        latest = latest_round() if departed else 0
        last = {replica: step for replica, (step, round_) in departed.items()
                if round_ >= latest}
        if last:
            raise ReplicasLeftError(
                f"replica {self._me!r} found nobody to join: every replica that held the "
                f"state left the job (shut down) after step {max(last.values())} "
                f"({', '.join(sorted(last))}). The job has finished if they did; "
                f"engine.ft keeps no checkpoint, so there is nothing to rejoin") from waiting
        if final:
            raise NoLiveReplicaError(
                f"replica {self._me!r} found no round to join in time and no live member "
                f"that holds the state to receive it from: every replica of this job was "
                f"lost at once, and engine.ft keeps no checkpoint. Restart the job: under "
                f"the launcher's default --restart-policy all a restart is a new session, "
                f"which starts again from round 0 (and from the script's own checkpoint, "
                f"if it keeps one)") from waiting

    def others(self) -> Optional[List[str]]:
        """The other replicas that hold the state now; None if the store cannot tell."""
        if self._set_ephemeral is None:
            return None
        return sorted(key[len(PREFIX):] for key in self._keys.list_keys()
                      if key.startswith(PREFIX) and key != PREFIX + self._me)
