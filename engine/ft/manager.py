"""`Manager`: the one owner of a fault-tolerant step's agreement (torchft's name).

Each step, `start_quorum()` (called by `OptimizerWrapper.zero_grad`) arrives at the
step's quorum round in the job's store on a background thread, while the caller runs
forward and backward. The released round is turned into a `Plan` (`engine.ft.quorum`,
pure); the manager then forms a new process group when membership changed or the
last group broke, and sends or receives the state for members that are behind.
`allreduce` (used by `engine.ft.DistributedDataParallel`) waits for that, then sums
over the step's group; members that are healing contribute zeros. `should_commit()`
votes in the step's commit round: the step counts only if every member of the quorum
finished it. A failure inside a step (a lost or hung rank, a broken transfer) is
recorded, never raised into the training loop: the step just does not commit. The one
exception is a newcomer that finds no live member to receive the state from
(`NoLiveReplicaError`): no later step can succeed.

Keys live under ``ft/<session>/`` of the store: round ``q/<n>``, commit round ``c/<n>``,
``latest`` (a recent round, where a newcomer starts walking), ``pg/<n>/`` for a
group formed at round n, and ``holders/<replica id>`` (`engine.ft.holders`). A session
is one run of the job (the launcher's run id and rendezvous round), so a job restarted
from scratch never reads an earlier run's rounds.
"""
from __future__ import annotations

import concurrent.futures
import sys
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

import actors.distributed as dist
from actors.distributed.world import form_group
from actors.runtime.concurrency.threads import start_thread
from actors.runtime.process.log import get_logger
from store import PrefixStore, Store
from store.base import Timeout, to_seconds
from store.errors import StoreError, StoreTimeoutError

from . import job, state_transfer
from .holders import Holders, NoLiveReplicaError
from .quorum import (VOTE_FAILED, VOTE_OK, Arrival, Plan, StaleQuorumError, arrived, commits,
                     decode_round, membership_change, plan)
from .rounds import Rounds

log = get_logger(__name__)

# Rank 0 writes the latest round's number when the group is re-formed and every this
# many rounds: a newcomer starts there and walks the released rounds after it, which
# the server answers from memory (its last RELEASED_QUORUMS, far more than the two
# rounds per step that a walk can span), rather than every step paying a store write.
LATEST_EVERY = 16
CLOSE_TIMEOUT = 0.5  # for telling a replaced group's peers that this member leaves


class Manager:
    """Quorum, group, healing and commit for one replica of a data-parallel job.

    `state_dict()` / `load_state_dict(state)` give and take everything a replica must
    share (parameters, optimizer state); by default the wrapped module's and the
    wrapped optimizer's. `store` is the job's store (default: ``ACTORGRAD_JOB_STORE``,
    which the launcher sets); `replica_id` defaults to ``RANK`` and `world_size`, the
    replicas expected at the first step, to ``WORLD_SIZE``. `timeout` bounds every
    collective and vote (a hung rank is lost after it, or after the transport's
    heartbeats, whichever is first); `quorum_timeout` how long a step's quorum waits
    for an expected member (then `min_replica_size` members go on without it);
    `join_timeout` how long the first step waits for every replica. Timeouts are
    seconds or a `timedelta` (torchft's type). `session` names the job's keys in the
    store (default: the launcher's run id and rendezvous round, so a job restarted
    from scratch starts anew; outside the launcher, pass it). With `progress` a line
    is printed whenever the quorum changes.
    """

    def __init__(self, min_replica_size: int = 1,
                 state_dict: Optional[Callable[[], Any]] = None,
                 load_state_dict: Optional[Callable[[Any], None]] = None, *,
                 store: Optional[Store] = None, replica_id: Optional[str] = None,
                 world_size: Optional[int] = None, session: Optional[str] = None,
                 timeout: Timeout = 10.0, quorum_timeout: Optional[Timeout] = None,
                 join_timeout: Timeout = 60.0, progress: bool = True):
        if min_replica_size < 1:
            raise ValueError(f"min_replica_size must be at least 1, got {min_replica_size}")
        timeout = to_seconds(timeout, "timeout")
        quorum_timeout = to_seconds(quorum_timeout, "quorum_timeout")
        join_timeout = to_seconds(join_timeout, "join_timeout")
        self.min_replica_size = min_replica_size
        self._state = state_transfer.ReplicaState(state_dict, load_state_dict)
        self._owned_store = store is None
        store = job.job_store(timeout) if store is None else store
        session = session or job.session()
        self._store = store
        self._keys = PrefixStore(f"ft/{session}", store)
        self.replica_id = str(replica_id if replica_id is not None else job.env_int("RANK"))
        self._incarnation = uuid.uuid4().hex[:12]
        self._holders = Holders(self._keys, self.replica_id, self._incarnation)
        self._rounds = Rounds(self._keys, self.replica_id, self._holders, self._known_lost)
        size = world_size if world_size is not None else job.env_int("WORLD_SIZE")
        self._initial = tuple(str(r) for r in range(size))
        self.timeout = timeout
        self.quorum_timeout = timeout if quorum_timeout is None else quorum_timeout
        self.join_timeout = join_timeout
        self._progress = progress
        self._step = 0  # committed steps
        self._batches = 0  # the members' batches those steps averaged (torchft's count)
        self._round: Optional[int] = None  # the next round to arrive at; None: a newcomer
        self._plan: Optional[Plan] = None
        self._last: Optional[Plan] = None  # the last plan acted on, for whom to expect
        self._group: Optional[dist.ProcessGroup] = None
        self._broken = False
        self._errors: List[BaseException] = []
        self._lost_ranks: set = set()
        self._healed: Optional[Tuple[Dict[str, int], Any, str]] = None
        # Of the state held while no step has committed: members whose digest differs
        # from group rank 0's receive its state at the first step.
        self._digest: Optional[str] = None
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ft-quorum")
        self._quorum: Optional[concurrent.futures.Future] = None

    # ---- what the wrappers register -------------------------------------------------

    def register_module(self, module: Any) -> None:
        """Make `module`'s ``state_dict`` part of what a newcomer receives
        (`DistributedDataParallel` calls it)."""
        self._state.module = module

    def register_optimizer(self, optimizer: Any) -> None:
        """Make `optimizer`'s ``state_dict`` part of what a newcomer receives (`OptimizerWrapper`
        calls it)."""
        self._state.optimizer = optimizer

    # ---- the step ----------------------------------------------------------------------

    def start_quorum(self) -> None:
        """Start this step's quorum in the background (a no-op if one is in flight)."""
        if self._quorum is not None:
            return
        self._errors, self._healed = [], None
        self._quorum = self._pool.submit(self._run_quorum)

    def wait_quorum(self) -> Optional[Plan]:
        """This step's plan, once the quorum (and any state transfer) is done; None if it
        failed (the failure is recorded: the step will not commit). Between steps: the
        plan of the step last decided. NoLiveReplicaError, on this and every later call,
        when every replica was lost at once; its ReplicasLeftError when every one left."""
        if self._quorum is None:
            return self._plan
        try:
            self._plan = self._quorum.result()
        except NoLiveReplicaError:
            raise  # no later step can succeed: the training loop must hear it
        except Exception as exc:  # noqa: BLE001 - recorded: the step does not commit
            if exc not in self._errors:  # once, however often asked
                self.report_error(exc)
            self._plan = None
        return self._plan

    def allreduce(self, flat: np.ndarray) -> "_Reduction":
        """Start summing `flat` in place over the step's group (zeros from a member that
        is healing); `wait()` on the result never raises, failures are recorded."""
        self.start_quorum()
        step_plan = self.wait_quorum()
        if step_plan is None or self._errors:
            return _Reduction(None, self)
        if step_plan.healing:
            flat[...] = 0
        if step_plan.size == 1:
            return _Reduction(None, self)
        try:
            return _Reduction(dist.all_reduce(flat, group=self._group, async_op=True), self)
        except Exception as exc:  # noqa: BLE001 - recorded: the step does not commit
            self.report_error(exc)
            return _Reduction(None, self)

    def report_error(self, exc: BaseException) -> None:
        """Record a failure of this step: it will not commit, and the group is re-formed."""
        self._errors.append(exc)
        if isinstance(exc, dist.RankLostError):
            self._lost_ranks.update(exc.ranks)
        log.warning("ft_step_failed", replica=self.replica_id, step=self._step,
                    error=f"{type(exc).__name__}: {exc}")

    def errored(self) -> Optional[BaseException]:
        """The first failure recorded in this step, if any."""
        return self._errors[0] if self._errors else None

    def should_commit(self) -> bool:
        """Vote on this step and return whether it counts on every member: True only
        if every member of the quorum finished it. A member that was behind loads the
        state it received first, so the step applies to the same parameters everywhere."""
        self.start_quorum()
        step_plan = self.wait_quorum()
        self._quorum = None
        if step_plan is None:
            self._broken = True
            return False
        if self._healed is not None:
            progress, state, self._digest = self._healed
            self._state.load(state)
            self.load_state_dict(progress)
            # Before its vote, which the member that sent the state waits for: a newcomer
            # never sees every holder gone while this one holds the state.
            self._holders.hold()
        vote = VOTE_FAILED if self._errors else VOTE_OK
        try:
            votes = self._rounds.arrive(f"c/{step_plan.round}", vote.decode(), step_plan,
                                        self.timeout, final_min=1)
        except StoreError as exc:  # timed out, or the store lost (as after a long hang)
            self.report_error(exc)
            votes = {}
        committed = commits(step_plan, votes, self.min_replica_size) and not self._errors
        # A member that failed may hold a broken group: everyone forms a new one.
        self._broken = bool(self._errors) or any(votes.get(m) != VOTE_OK
                                                 for m in step_plan.members)
        if committed:
            self._step = step_plan.max_step + 1
            self._batches += step_plan.participants
        return committed

    def state_dict(self) -> Dict[str, int]:
        """The manager's own state, torchft's: the committed steps and the batches they
        averaged. Keep it in a checkpoint, to give a job restarted from that checkpoint
        to `load_state_dict`."""
        return {"step": self._step, "batches_committed": self._batches}

    def load_state_dict(self, state_dict: Dict[str, int]) -> None:
        """Go on from `state_dict` (as `state_dict` returned it): before the first step
        of a job restarted from a checkpoint, on every replica that loads one; a replica
        that does not receives the state of those that did, as a member behind does."""
        self._step = int(state_dict["step"])
        self._batches = int(state_dict["batches_committed"])

    def current_step(self) -> int:
        """Committed steps so far (a newcomer's jumps when it receives the state)."""
        return self._step

    def num_participants(self) -> int:
        """Members that contribute gradients to this step (waits for the quorum)."""
        step_plan = self.wait_quorum()
        return 0 if step_plan is None else step_plan.participants

    def is_participating(self) -> bool:
        """Whether this member contributes gradients to this step: False while it receives the
        state (healing) or without a quorum. Waits for the step's quorum.
        """
        step_plan = self.wait_quorum()
        return step_plan is not None and not step_plan.healing

    def shutdown(self) -> None:
        """Leave the job: end the background thread and the group, and close the store
        if this made it. A member holding the state says at which step it left; the
        others stop expecting it at once (its group's peers hear that it left)."""
        self._pool.shutdown(wait=True)
        self._holders.leave(self._step, -1 if self._last is None else self._last.round)
        self._close_group()
        if self._owned_store:
            self._store.close()

    # ---- the quorum (background thread) ------------------------------------------------

    def _run_quorum(self) -> Plan:
        me = self.replica_id
        newcomer = self._last is None  # in no released round yet: it knows no members
        if self._round is None:
            self._round = self._rounds.latest() + 1
        limit = self.join_timeout if newcomer else self.quorum_timeout
        deadline = time.monotonic() + limit
        data = Arrival(self._step, self._incarnation, self._first_digest()).encode()
        while True:
            round_ = self._round
            name = f"q/{round_}"
            if round_ == 0:
                result = self._rounds.first(name, data, self._initial, self.min_replica_size,
                                            deadline)
            elif newcomer:
                try:
                    result = self._rounds.join(name, data, deadline)
                except StoreTimeoutError as exc:
                    self._round = None  # the next try starts again from `latest`
                    self._holders.check_joinable(exc, True, self._rounds.latest)
                    raise self._rounds.no_round(name, limit) from exc
            else:
                result = self._rounds.arrive(name, data.decode(), self._last,
                                             max(0.01, deadline - time.monotonic()),
                                             final_min=self.min_replica_size)
                self._check_not_passed_by(round_, result)
            self._round = round_ + 1
            if arrived(result, me, self._incarnation):
                break
            # Too late for that round: the others went on without it. It joins a later one
            # as a newcomer and stays one until it is in a round, even if this step fails
            # first: as a member of its old group it could release a round alone.
            newcomer, self._last = True, None
            self._holders.drop()
            if time.monotonic() > deadline:
                raise self._rounds.no_round(name, limit)
        last = self._last
        # A StaleQuorumError fails this step; the next one expects the last members.
        step_plan = plan(round_, decode_round(result), me,
                         None if last is None else last.incarnations, self._broken,
                         seen_step=0 if last is None else last.max_step)
        # Whatever happens next, the next round expects this one's members.
        self._last = step_plan
        if step_plan.rank == 0 and (step_plan.reconfigure or round_ % LATEST_EVERY == 0):
            self._keys.set("latest", str(round_))
        if step_plan.healing:
            self._holders.drop()  # behind: it gives nobody the state
        try:
            if step_plan.reconfigure:
                self._broken = True  # until the new group stands
                self._reform(step_plan)
            self._say(step_plan, last)
            self._heal(step_plan)
        except BaseException:
            if step_plan.healing:  # still without the state: it joins again as a newcomer
                self._round, self._last = None, None
            raise
        if not step_plan.healing and (step_plan.reconfigure or round_ % LATEST_EVERY == 0
                                      or not self._holders.holding):
            self._holders.hold()  # again now and then: a stalled session loses its key
        return step_plan

    def _first_digest(self) -> str:
        """The digest of the state held, before any step committed ("" after)."""
        if self._step > 0:
            return ""
        if self._digest is None:
            self._digest = state_transfer.digest(state_transfer.pack(self._state.get(),
                                                                     self.state_dict()))
        return self._digest

    def _check_not_passed_by(self, round_: int, result: Dict[str, bytes]) -> None:
        """StaleQuorumError, and a newcomer's start at the next step, if members of the
        last step are missing from `round_` and the latest round is already past it: they
        went on without this member (after more rounds than the store remembers, its
        arrival even opened the round anew)."""
        if set(self._last.members) <= result.keys():
            return
        latest = self._rounds.latest()
        if latest > round_:
            self._round, self._last = None, None
            self._holders.drop()
            raise StaleQuorumError(f"replica {self.replica_id!r} came to quorum round "
                                   f"{round_}, but the others went on to round {latest}; "
                                   f"it joins again as a newcomer")

    def _known_lost(self) -> set:
        """Group ranks the next round need not wait for: lost, or left (shut down)."""
        lost = set(self._lost_ranks)
        if self._group is not None:
            inbox = self._group.transport.inbox
            lost.update(inbox.lost())
            lost.update(inbox.departed())
        return lost

    def _reform(self, step_plan: Plan) -> None:
        # The old group is closed beside the new one's forming: telling peers that
        # may be gone that this rank leaves takes up to the flush timeout.
        old = self._close_group(wait=False)
        keys = PrefixStore(f"pg/{step_plan.round}", self._keys)
        try:
            self._group = form_group(keys, step_plan.rank, step_plan.size, self.timeout)
        finally:
            if old is not None:
                old.join(CLOSE_TIMEOUT + 1.0)
        self._broken, self._lost_ranks = False, set()

    def _close_group(self, wait: bool = True) -> Optional[threading.Thread]:
        """Close the current group; unless `wait`, on a thread that is returned."""
        group, self._group = self._group, None
        if group is None:
            return None
        group.destroy()
        if wait:
            group.transport.close(CLOSE_TIMEOUT)
            return None
        return start_thread(group.transport.close, args=(CLOSE_TIMEOUT,),
                            name="ft-close-group", owner="engine.ft.manager.Manager",
                            purpose="closes a replaced process group beside the new one")

    def _heal(self, step_plan: Plan) -> None:
        if step_plan.send_to:
            payload = state_transfer.pack(self._state.get(), self.state_dict())
            for dst in step_plan.send_to:
                state_transfer.send_state(self._group, dst, payload)
        if step_plan.heal_from is not None:
            self._healed = state_transfer.recv_state(self._group, step_plan.heal_from)
            log.info("ft_state_received", replica=self.replica_id,
                     source=step_plan.members[step_plan.heal_from],
                     step=self._healed[0]["step"])

    def _say(self, step_plan: Plan, last: Optional[Plan]) -> None:
        """A progress line for people when the quorum changes (after `last`), and a log
        event."""
        change = membership_change(step_plan, last)
        if change is None:
            return
        log.info("ft_quorum_changed", replica=self.replica_id, round=step_plan.round,
                 members=list(step_plan.members), max_step=step_plan.max_step)
        if self._progress:
            print(f"[ft replica {self.replica_id}] quorum at step {step_plan.max_step}: "
                  f"{step_plan.size} members {list(step_plan.members)}"
                  + (f", joined {list(change.joined)}" if change.joined and last is not None
                     else "")
                  + (f", lost {list(change.lost)}" if change.lost else "")
                  + (f", restarted {list(change.restarted)}" if change.restarted else ""),
                  file=sys.stdout, flush=True)


class _Reduction:
    """An all-reduce in flight whose failure is recorded in the manager, not raised."""

    def __init__(self, work: Optional[dist.Work], manager: Manager):
        self._work, self._manager = work, manager

    def wait(self, timeout: Optional[float] = None) -> bool:
        if self._work is None:
            return True
        try:
            self._work.wait(timeout)
        except Exception as exc:  # noqa: BLE001 - recorded: the step does not commit
            self._manager.report_error(exc)
        return True
