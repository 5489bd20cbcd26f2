"""Process groups and collectives on numpy arrays, peer to peer between actors.

torch.distributed's names (DESIGN §6): ``import actors.distributed as dist``, then
``dist.init_process_group()`` under ``python -m actors.launch``, or with an init
method or a store, and ``dist.all_reduce(array)`` and the rest.
"""
from .algorithms import ReduceOp
from .api import (all_gather, all_gather_into_tensor, all_gather_object, all_reduce,
                  all_to_all, barrier, broadcast, broadcast_object_list, gather,
                  get_global_rank, get_group_rank, get_rank, get_world_size,
                  monitored_barrier, reduce, reduce_scatter, reduce_scatter_tensor, scatter)
from .errors import (CollectiveMismatchError, CollectiveTimeoutError, DistBackendError,
                     DistError, DistNetworkError, DistStoreError, RankLostError)
from .group import ProcessGroup, Work
from .p2p import irecv, isend, recv, send
from .world import destroy_process_group, init_process_group, is_initialized, new_group

__all__ = [
    "ReduceOp", "ProcessGroup", "Work", "init_process_group", "destroy_process_group",
    "is_initialized", "new_group", "get_rank", "get_world_size", "get_global_rank",
    "get_group_rank", "all_reduce", "broadcast", "reduce", "all_gather",
    "all_gather_into_tensor", "gather", "scatter", "reduce_scatter", "reduce_scatter_tensor",
    "all_to_all", "barrier", "monitored_barrier", "all_gather_object",
    "broadcast_object_list", "send", "recv", "isend", "irecv", "DistError", "RankLostError",
    "CollectiveMismatchError", "CollectiveTimeoutError", "DistBackendError", "DistStoreError",
    "DistNetworkError",
]
