"""`DistributedDataParallel`: gradients averaged across a process group during backward.

At construction the ranks check that they wrap the same parameters (names, shapes,
dtypes; a RuntimeError on every rank otherwise, as in torch), and rank 0's are
broadcast, so every rank starts equal. Parameters are packed into buckets of at most
`bucket_cap_mb`, in reverse registration order (roughly the order backward produces
their gradients, as torch's reducer assumes). Each parameter's post-accumulate-grad
hook marks it ready; once every parameter of a bucket is ready, the bucket's gradients
are flattened and all-reduced asynchronously, overlapping the rest of backward.
Buckets start in index order on every rank, so every rank issues the same collectives
in the same order. The first hook of a backward queues the reduction's end
(`queue_callback`): once the pass has finished, every bucket not started yet starts
(zeros stand for gradients that never came), every all-reduce is awaited and the
averages are written into ``.grad``, bit-identical on every rank.

Agreement on which parameters got a gradient travels with the gradients: each bucket
carries one extra element per parameter, 1 where this rank has its gradient, so after
the all-reduce every rank knows on how many ranks each parameter got one, at no extra
collective. With ``find_unused_parameters=False`` (torch's default) a parameter that
did not get a gradient on every rank is an error on every rank at the end of that
backward (the gradients already written are the identical averages, so ranks never
diverge). With ``find_unused_parameters=True`` the parameters that the forward's
outputs do not reach (a walk of the autograd graph) are marked ready at the first
hook, as torch does; a parameter with a gradient on some ranks gets their sum over
the world size, one with none anywhere keeps ``grad`` None. A forward inside
`no_sync()` makes its backward accumulate gradients locally; the next synchronised
backward averages the sum. As in torch, the forward decides: a backward of a forward
run inside the block stays local even when it runs outside, and the other way round.

What no rank can tell, as in torch: a rank whose backward reaches none of the
parameters (its loss does not depend on the output) takes no part in that iteration's
reduction, exactly as a forward whose output is never used does; the others' reduction
then pairs with its next one. So every rank's loss must depend on the output, and a
rank whose backward raised must not go on alone (its error ends the job).
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import numpy as np

import actors.distributed as dist
from engine.autograd import AccumulateGrad, is_grad_enabled, queue_callback
from engine.nn.module import Module
from engine.nn.parameter import Parameter
from engine.tensor import Tensor

__all__ = ["DistributedDataParallel", "UnfinishedReductionError"]

_HINT = ("This error indicates that your module has parameters that were not used in "
         "producing loss. You can enable unused parameter detection by passing the keyword "
         "argument `find_unused_parameters=True` to `DistributedDataParallel`, and by making "
         "sure all `forward` function outputs participate in calculating loss.")


class UnfinishedReductionError(RuntimeError):
    """A synchronised backward left parameters without a gradient on some rank (torch
    raises RuntimeError "Expected to have finished reduction ...")."""


class _Bucket:
    """Parameters whose gradients are all-reduced as one flat array, with their marks."""

    __slots__ = ("params", "names", "marks", "pending", "work", "flat")

    def __init__(self, named: List[Tuple[str, Parameter]]):
        self.names = [name for name, _ in named]
        self.params = [param for _, param in named]
        self.marks = np.zeros(len(named), self.params[0].dtype)  # 1: ready on this rank
        self.pending = len(named)
        self.work: Optional[dist.Work] = None
        self.flat: Optional[np.ndarray] = None


class DistributedDataParallel(Module):
    """Wrap `module` for data-parallel training over `process_group` (default: the world).

    `gradient_as_bucket_view` is accepted and has no effect (gradients are copies, equal
    in value); `static_graph=True` runs as ``find_unused_parameters=True``, which gives
    the same gradients for any static graph (see docs/DECISIONS.md).
    """

    def __init__(self, module: Module, process_group: Optional[dist.ProcessGroup] = None,
                 bucket_cap_mb: float = 25, broadcast_buffers: bool = True,
                 find_unused_parameters: bool = False, *, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False):
        super().__init__()
        self.module = module
        _set(self, _group=process_group, _sync=True,
             _backward_syncs=True,  # whether the last forward's backward synchronises
             _find_unused=bool(find_unused_parameters or static_graph),
             _next=0,  # the next bucket to start
             _armed=False,  # a hook fired: the reduction must finish before the next forward
             _unreached=())  # ids of the parameters the last forward's outputs do not reach
        self._start_equal()
        named = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
        buckets = _pack(list(reversed(named)), int(bucket_cap_mb * 1024 * 1024))
        _set(self, _buckets=buckets,
             _slot={id(p): (b, i) for b in buckets for i, p in enumerate(b.params)})
        for _, param in named:
            param.register_post_accumulate_grad_hook(self._on_grad_ready)

    # -- where the reduction meets its group (a fault-tolerant wrapper overrides these) --

    def _start_equal(self) -> None:
        """Check that every rank wraps the same parameters, then make every rank start
        from rank 0's."""
        group = self._group
        _check_same_model(self.module, group)
        root = 0 if group is None else dist.get_global_rank(group, 0)
        for param in self.module.parameters():
            dist.broadcast(param.data, src=root, group=group)

    def _reduce(self, flat: np.ndarray) -> Any:
        """Start summing `flat` over the ranks in place; something with `wait()`."""
        return dist.all_reduce(flat, group=self._group, async_op=True)

    def _divisor(self) -> int:
        """How many ranks' gradients the sums hold (the averages divide by it)."""
        return dist.get_world_size(self._group)

    def _rank(self) -> int:
        return dist.get_rank(self._group)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self._armed:  # the previous backward ended before its reduction did
            self._finish(at_forward=True)
        if is_grad_enabled():
            _set(self, _backward_syncs=self._sync)
        output = self.module(*args, **kwargs)
        if self._find_unused and self._sync and is_grad_enabled():
            reached = _reached_parameters(output)
            _set(self, _unreached=[key for key in self._slot if key not in reached])
        return output

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """The backward of a forward run inside accumulates gradients locally, without
        communicating (as torch's: the forward decides, wherever the backward runs)."""
        previous = self._sync
        _set(self, _sync=False)
        try:
            yield
        finally:
            _set(self, _sync=previous)

    def _on_grad_ready(self, param: Parameter) -> None:
        if not self._backward_syncs:
            return
        if not self._armed:
            _set(self, _armed=True)
            queue_callback(self._finish)
            unreached = self._unreached
            _set(self, _unreached=())
            for key in unreached:  # at the first hook, as torch: all launches in backward
                self._mark(*self._slot[key])
        bucket, index = self._slot[id(param)]
        if bucket.marks[index]:
            raise UnfinishedReductionError(
                f"parameter {bucket.names[index]} was marked ready twice in one iteration: "
                f"it got a gradient in a second backward (or, with find_unused_parameters="
                f"True, although the forward's outputs did not reach it)")
        self._mark(bucket, index)

    def _mark(self, bucket: _Bucket, index: int) -> None:
        bucket.marks[index] = 1
        bucket.pending -= 1
        if bucket.pending:
            return
        buckets, start = self._buckets, self._next
        while start < len(buckets) and not buckets[start].pending:  # in order on every rank
            self._start(buckets[start])
            start += 1
        _set(self, _next=start)

    def _start(self, bucket: _Bucket) -> None:
        """All-reduce the bucket's gradients (zeros where none) and marks, asynchronously."""
        grads = [p.grad.reshape(-1) if p.grad is not None else np.zeros(p.data.size, p.dtype)
                 for p in bucket.params]
        if self._find_unused:  # a mark says whether this rank has a gradient to average
            marks = np.array([p.grad is not None for p in bucket.params], bucket.marks.dtype)
        else:
            marks = bucket.marks
        bucket.flat = np.concatenate(grads + [marks])
        bucket.work = self._reduce(bucket.flat)

    def _finish(self, at_forward: bool = False) -> None:
        """Start the buckets not started yet, wait for all, write the averages into
        ``.grad``; UnfinishedReductionError on every rank if a parameter lacked a gradient
        somewhere (default mode) or, `at_forward`, in any case (torch's rule)."""
        mine = [name for b in self._buckets for name, m in zip(b.names, b.marks) if not m]
        try:
            for bucket in self._buckets[self._next:]:
                self._start(bucket)
            missing: Dict[str, int] = {}
            for bucket in self._buckets:
                missing.update(self._write_back(bucket))
        finally:
            self._reset()
        if missing or at_forward:
            raise UnfinishedReductionError(self._message(missing, mine, at_forward))

    def _write_back(self, bucket: _Bucket) -> Dict[str, int]:
        """Write the bucket's averages; {name: ranks with a gradient} for the missing."""
        bucket.work.wait()
        flat, count = bucket.flat, len(bucket.params)
        have = flat[-count:].tolist()
        divisor = self._divisor()
        flat /= divisor
        missing, offset = {}, 0
        for param, name, ranks in zip(bucket.params, bucket.names, have):
            size = param.data.size
            if ranks < divisor and not self._find_unused:
                missing[name] = int(ranks)
            if ranks or not self._find_unused:
                param.grad = flat[offset:offset + size].reshape(param.shape).astype(
                    param.dtype, copy=True)
            else:  # none counted anywhere: None, as torch (a member healing counts none)
                param.grad = None
            offset += size
        return missing

    def _message(self, missing: Dict[str, int], mine: List[str], at_forward: bool) -> str:
        head = "Expected to have finished reduction in the prior iteration before starting a " \
               "new one."
        if not missing:
            return (f"{head} The previous backward pass ended before its gradient reduction "
                    f"did (it raised?); the reduction was finished now, at this forward.")
        where = ", ".join(f"{name} (got one on {n} of {self._divisor()} ranks)"
                          for name, n in missing.items())
        here = ", ".join(mine) if mine else "none"
        return (f"{head} {_HINT} Parameters that did not receive grad on every rank: {where}; "
                f"on this rank (rank {self._rank()}): {here}. Every rank raises "
                f"this error; every rank's gradients hold the same averages, zeros standing "
                f"for the missing ones.")

    def _reset(self) -> None:
        for bucket in self._buckets:
            bucket.pending, bucket.work, bucket.flat = len(bucket.params), None, None
            bucket.marks[:] = 0
        _set(self, _next=0, _armed=False, _unreached=())


def _set(ddp: DistributedDataParallel, **attributes: Any) -> None:
    """Plain attributes, kept out of the Module's parameter and submodule registries."""
    for name, value in attributes.items():
        object.__setattr__(ddp, name, value)


def _check_same_model(module: Module, group: Optional[dist.ProcessGroup]) -> None:
    """RuntimeError on every rank unless every rank's `module` has the same parameters:
    names, shapes and dtypes, in order (torch checks it at construction too). Else the
    broadcast of the first different one fails on some ranks only, or a rank with more
    parameters meets the others' first gradient all-reduce."""
    mine = [(name, p.data.dtype.str, p.data.shape) for name, p in module.named_parameters()]
    models: List[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(models, mine, group=group)
    for index, theirs in enumerate(models):
        if theirs != models[0]:
            rank = index if group is None else dist.get_global_rank(group, index)
            first = 0 if group is None else dist.get_global_rank(group, 0)
            raise RuntimeError(f"DistributedDataParallel expects the same model on every rank; "
                               f"{_first_difference(models[0], theirs, first, rank)}")


def _first_difference(ours: List[tuple], theirs: List[tuple], rank: int, other: int) -> str:
    if len(ours) != len(theirs):
        return (f"rank {rank} has {len(ours)} parameters and rank {other} has "
                f"{len(theirs)}")
    index, (name, dtype, shape), (other_name, other_dtype, other_shape) = next(
        (i, a, b) for i, (a, b) in enumerate(zip(ours, theirs)) if a != b)
    what = name if name == other_name else f"#{index} ({name} on rank {rank}, {other_name} on " \
        f"rank {other})"
    return (f"parameter {what} is {np.dtype(dtype)}{list(shape)} on rank {rank} but "
            f"{np.dtype(other_dtype)}{list(other_shape)} on rank {other}")


def _reached_parameters(output: Any) -> Set[int]:
    """Ids of the leaves that the autograd graph of `output` (tensors, possibly nested in
    lists, tuples and dicts) reaches."""
    stack, seen, reached = [], set(), set()
    pending = [output]
    while pending:
        value = pending.pop()
        if isinstance(value, Tensor):
            if value.requires_grad:
                stack.append(value._edge()[0])
        elif isinstance(value, (list, tuple)):
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value.values())
    seen.update(stack)
    while stack:
        node = stack.pop()
        if node.__class__ is AccumulateGrad:
            reached.add(id(node.variable))
            continue
        for nxt, _ in node.next_edges:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return reached


def _pack(named: List[Tuple[str, Parameter]], cap_bytes: int) -> List[_Bucket]:
    """Consecutive parameters in buckets of at most `cap_bytes` (one parameter at least)."""
    buckets, current, size = [], [], 0
    for name, param in named:
        nbytes = param.data.nbytes
        if current and (size + nbytes > cap_bytes or param.dtype != current[0][1].dtype):
            buckets.append(_Bucket(current))
            current, size = [], 0
        current.append((name, param))
        size += nbytes
    if current:
        buckets.append(_Bucket(current))
    return buckets
