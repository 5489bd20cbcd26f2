"""`DistributedDataParallel(manager, module)`: gradients averaged over each step's quorum.

The bucketing, hooks and overlap are `engine.nn.parallel.DistributedDataParallel`'s;
only where a bucket is summed changes: through the manager, over the group of the
step's quorum, which may differ from step to step. The averages divide by the members
that contribute gradients (a member receiving the state contributes zeros), and a
failed all-reduce writes nothing: the step will not commit anyway. Parameters are not
broadcast at construction: a member that is behind receives the whole state from a
live one at its first step, and so, before any step has committed, does a member whose
state differs from group rank 0's (torch's DDP starts every rank from rank 0's).
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from engine.nn.module import Module
from engine.nn.parallel import DistributedDataParallel as _Parallel
from engine.nn.parallel import _Bucket, _set

from .manager import Manager


class DistributedDataParallel(_Parallel):
    """Wrap `module` for data-parallel training whose membership `manager` decides."""

    def __init__(self, manager: Manager, module: Module, bucket_cap_mb: float = 25,
                 find_unused_parameters: bool = False):
        _set(self, _manager=manager)
        super().__init__(module, bucket_cap_mb=bucket_cap_mb,
                         find_unused_parameters=find_unused_parameters)
        manager.register_module(module)

    def _start_equal(self) -> None:
        """Nothing: equal state comes from the manager's state transfer."""

    def _reduce(self, flat: np.ndarray) -> Any:
        return self._manager.allreduce(flat)

    def _divisor(self) -> int:
        return max(1, self._manager.num_participants())

    def _rank(self) -> int:
        step_plan = self._manager.wait_quorum()
        return -1 if step_plan is None else step_plan.rank

    def _write_back(self, bucket: _Bucket) -> Dict[str, int]:
        bucket.work.wait()
        if self._manager.errored() is not None:
            return {}  # the sums are incomplete; the step will not commit
        return super()._write_back(bucket)
