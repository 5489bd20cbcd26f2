"""How a worker process sets up its allocator and its BLAS threads.

**Freed memory is kept for reuse**, so that arrays which come and go stop
page-faulting. A worker that receives, computes and sends arrays of a few hundred KiB allocates and
frees them at every step. glibc's malloc serves blocks that large with fresh
``mmap`` calls, or hands the freed top of its heap back to the kernel, so every step
faults the same amount of memory in again, one zeroed page at a time: about 400
page faults per iteration of the 256x256 distributed autograd benchmark. Raising
the mmap and trim thresholds keeps such blocks in the heap for the next step.

The cost is memory: a process keeps up to `TRIM_THRESHOLD` of freed heap instead of
returning it. ``ACTORGRAD_KEEP_FREED_MEMORY=0`` leaves malloc as it is.

**The host's cores are shared among its workers' BLAS threads.** A worker runs
handlers on a pool of threads, beside its I/O threads; a BLAS that also starts a
thread per core oversubscribes the CPUs, and OpenBLAS's spinning threads then stall
for milliseconds (a 256x256 matmul over RPC: 90th percentile 6 to 16 ms with two
BLAS threads per worker on a 2-core host, 2 ms with one). As torchrun and Ray do,
each worker limits its BLAS and OpenMP pools to its share of the cores, unless
``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` or ``MKL_NUM_THREADS`` says otherwise.
"""
from __future__ import annotations

import ctypes
import os
import sys
from typing import Optional

from .log import get_logger

log = get_logger(__name__)

# mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

# Blocks below this come from the heap (glibc's largest accepted value on 64-bit).
MMAP_THRESHOLD = 32 * 1024 * 1024
# Freed memory kept at the top of the heap before any is returned to the kernel.
TRIM_THRESHOLD = 256 * 1024 * 1024

_applied = False


def keep_freed_memory() -> bool:
    """Tune this process's malloc as the module docstring says; True if it now is.

    Idempotent; does nothing off Linux, without glibc's `mallopt`, or when
    ``ACTORGRAD_KEEP_FREED_MEMORY=0``.
    """
    global _applied
    if _applied:
        return True
    if os.environ.get("ACTORGRAD_KEEP_FREED_MEMORY", "1") == "0" or \
            not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _applied = (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)
    log.debug("malloc_tuned", keep_freed=_applied, mmap_threshold=MMAP_THRESHOLD,
              trim_threshold=TRIM_THRESHOLD)
    return _applied


_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_blas_limiter = None  # kept alive: the limit lasts as long as this process


def core_share(workers_on_host: int) -> int:
    """The BLAS threads each of `workers_on_host` workers gets: its share of our cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    return max(1, cores // max(1, workers_on_host))


def share_cores(workers_on_host: int) -> Optional[int]:
    """Limit BLAS/OpenMP threads to this worker's share of the host's cores.

    Returns the limit set, or None when an environment variable already decides.
    """
    global _blas_limiter
    if any(name in os.environ for name in _THREAD_VARIABLES):
        return None
    from threadpoolctl import threadpool_limits

    share = core_share(workers_on_host)
    _blas_limiter = threadpool_limits(limits=share)
    log.debug("blas_threads_limited", threads=share, workers_on_host=workers_on_host)
    return share
