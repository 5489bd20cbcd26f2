"""`DistributedDataParallel`: gradients averaged across a process group during backward.

At construction rank 0's parameters (and buffers) are broadcast, so every rank starts
equal. Parameters are packed into buckets of at most `bucket_cap_mb`, in reverse
registration order (roughly the order backward produces their gradients, as torch's
reducer assumes). Each parameter's post-accumulate-grad hook marks it ready; once
every parameter of a bucket is ready, the bucket's gradients are flattened and
all-reduced asynchronously, overlapping the rest of backward. Buckets start in index
order on every rank, so every rank issues the same collectives in the same order.
The hook of the last parameter waits for every bucket and writes the averages back
into ``.grad`` before `backward()` returns. Every rank ends with bit-identical
gradients, so the same optimizer keeps the parameters identical.

Every parameter that requires grad must receive a gradient in each synchronised
backward (torch's default, ``find_unused_parameters=False``). Inside `no_sync()`
gradients accumulate locally; the next synchronised backward averages the sum.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Optional

import numpy as np

import actors.distributed as dist
from engine.nn.module import Module
from engine.nn.parameter import Parameter


class _Bucket:
    """Parameters whose gradients are all-reduced as one flat array."""

    __slots__ = ("params", "pending", "work", "flat")

    def __init__(self, params: List[Parameter]):
        self.params = params
        self.pending = len(params)
        self.work: Optional[dist.Work] = None
        self.flat: Optional[np.ndarray] = None


class DistributedDataParallel(Module):
    """Wrap `module` for data-parallel training over `process_group` (default: the world)."""

    def __init__(self, module: Module, process_group: Optional[dist.ProcessGroup] = None,
                 bucket_cap_mb: float = 25, broadcast_buffers: bool = True,
                 find_unused_parameters: bool = False):
        super().__init__()
        if find_unused_parameters:
            raise NotImplementedError("find_unused_parameters=True is not supported: every "
                                      "parameter must receive a gradient in each backward")
        self.module = module
        object.__setattr__(self, "_group", process_group)
        object.__setattr__(self, "_size", dist.get_world_size(process_group))
        object.__setattr__(self, "_sync", True)
        params = [p for p in module.parameters() if p.requires_grad]
        root = 0 if process_group is None else dist.get_global_rank(process_group, 0)
        for param in module.parameters():
            dist.broadcast(param.data, src=root, group=process_group)
        buckets = _pack(list(reversed(params)), int(bucket_cap_mb * 1024 * 1024))
        object.__setattr__(self, "_buckets", buckets)
        object.__setattr__(self, "_bucket_of", {id(p): b for b in buckets for p in b.params})
        object.__setattr__(self, "_next", 0)  # the next bucket to start
        for param in params:
            param.register_post_accumulate_grad_hook(self._on_grad_ready)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        self._reset()  # a backward that raised midway leaves counts behind
        return self.module(*args, **kwargs)

    def _reset(self) -> None:
        """Count every bucket's parameters again; wait out any all-reduce still running."""
        for bucket in self._buckets:
            if bucket.work is not None:
                bucket.work.wait()
            bucket.pending, bucket.work, bucket.flat = len(bucket.params), None, None
        object.__setattr__(self, "_next", 0)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside accumulate gradients locally, without communicating."""
        previous = self._sync
        object.__setattr__(self, "_sync", False)
        try:
            yield
        finally:
            object.__setattr__(self, "_sync", previous)

    def _on_grad_ready(self, param: Parameter) -> None:
        if not self._sync:
            return
        bucket = self._bucket_of[id(param)]
        bucket.pending -= 1
        if bucket.pending:
            return
        buckets = self._buckets
        index = self._next
        while index < len(buckets) and not buckets[index].pending:  # in order on every rank
            started = buckets[index]
            started.flat = np.concatenate([p.grad.reshape(-1) for p in started.params])
            started.work = dist.all_reduce(started.flat, group=self._group, async_op=True)
            index += 1
        object.__setattr__(self, "_next", index)
        if index == len(buckets):
            self._finish()

    def _finish(self) -> None:
        """Wait for every bucket, write the averages into ``.grad``, reset for the next pass."""
        for bucket in self._buckets:
            bucket.work.wait()
            bucket.flat /= self._size
            offset = 0
            for param in bucket.params:
                size = param.data.size
                param.grad = bucket.flat[offset:offset + size].reshape(param.shape).astype(
                    param.dtype, copy=True)
                offset += size
        self._reset()


def _pack(params: List[Parameter], cap_bytes: int) -> List[_Bucket]:
    """Consecutive parameters in buckets of at most `cap_bytes` (one parameter at least)."""
    buckets, current, size = [], [], 0
    for param in params:
        nbytes = param.data.nbytes
        if current and (size + nbytes > cap_bytes or param.dtype != current[0].dtype):
            buckets.append(_Bucket(current))
            current, size = [], 0
        current.append(param)
        size += nbytes
    if current:
        buckets.append(_Bucket(current))
    return buckets
