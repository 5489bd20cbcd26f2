"""What each rank does in the process-group tests (importable by spawned processes)."""
from __future__ import annotations

import os
import signal
import time

import numpy as np

import actors.distributed as dist
from tests.waiting import wait_until

# Small ones, one past the direct-exchange threshold, one of 4 MiB and one of 3 chunks.
SIZES = [(5,), (7, 3), (300_001,), (1 << 20,), (2_500_003,)]


def data(rank: int, shape, dtype="float32", seed: int = 0) -> np.ndarray:
    """Rank `rank`'s input, reproducible in the test process."""
    rng = np.random.default_rng(seed * 1000 + rank)
    values = rng.standard_normal(shape) * 4
    if np.dtype(dtype).kind == "f":
        return values.astype(dtype)
    return np.clip(np.round(values), -3, 3).astype(dtype)


def every_collective(rank, world):
    """One of each collective; the results by name, for the test to check."""
    out = {}
    for shape in SIZES:
        for op in ("SUM", "MAX", "AVG"):
            array = data(rank, shape)
            dist.all_reduce(array, op=dist.ReduceOp[op])
            out[f"all_reduce/{op}/{shape}"] = array
    for dtype in ("int32", "float64"):
        for op in ("SUM", "PRODUCT", "MIN"):
            array = data(rank, (1001,), dtype, seed=1)
            dist.all_reduce(array, op=dist.ReduceOp[op])
            out[f"all_reduce/{op}/{dtype}"] = array
    array = data(rank, (2, 3)) if rank == world - 1 else np.zeros((2, 3), np.float32)
    dist.broadcast(array, src=world - 1)
    out["broadcast"] = array
    large = data(rank, (3 * 1024 * 1024 + 5,), "float64") if rank == 1 else \
        np.zeros(3 * 1024 * 1024 + 5)
    dist.broadcast(large, src=1)  # 24 MiB: down the chain in chunks
    out["broadcast_large"] = large
    array = data(rank, (9,))
    dist.reduce(array, dst=1, op=dist.ReduceOp.SUM)
    out["reduce"] = array
    pieces = [np.zeros(4, np.float32) for _ in range(world)]
    dist.all_gather(pieces, data(rank, (4,)))
    out["all_gather"] = np.stack(pieces)
    pieces = [np.zeros(300_001, np.float32) for _ in range(world)]
    dist.all_gather(pieces, data(rank, (300_001,)))
    out["all_gather_large"] = np.stack(pieces)
    flat = np.zeros(world * 6, np.float64)
    dist.all_gather_into_tensor(flat, data(rank, (2, 3), "float64"))
    out["all_gather_into_tensor"] = flat
    gathered = [np.zeros(3, np.float32) for _ in range(world)] if rank == 0 else None
    dist.gather(data(rank, (3,)), gathered, dst=0)
    out["gather"] = None if gathered is None else np.stack(gathered)
    mine = np.zeros(5, np.float32)
    dist.scatter(mine, [data(r, (5,), seed=2) for r in range(world)] if rank == 0 else None,
                 src=0)
    out["scatter"] = mine
    mine = np.zeros(3, np.float32)
    dist.reduce_scatter(mine, [data(rank * world + r, (3,)) for r in range(world)])
    out["reduce_scatter"] = mine
    mine = np.zeros(2, np.float32)
    dist.reduce_scatter_tensor(mine, data(rank, (world * 2,), seed=3), op=dist.ReduceOp.MAX)
    out["reduce_scatter_tensor"] = mine
    received = [np.zeros(2, np.int64) for _ in range(world)]
    dist.all_to_all(received, [np.array([rank, r], np.int64) for r in range(world)])
    out["all_to_all"] = np.stack(received)
    dist.barrier()
    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank, "name": f"r{rank}"})
    out["all_gather_object"] = objects
    objects = [f"from {rank}", rank] if rank == 0 else [None, None]
    dist.broadcast_object_list(objects, src=0)
    out["broadcast_object_list"] = objects
    arrays = [np.full(3, float(rank + i), np.float32) for i in range(3)]
    works = [dist.all_reduce(a, async_op=True) for a in arrays]
    out["async_done"] = [w.wait() for w in works]
    out["async"] = np.stack(arrays)
    out["rank"], out["size"] = dist.get_rank(), dist.get_world_size()
    return out


def point_to_point(rank, world):
    """A ring of tagged sends; rank 0 also receives from anyone."""
    right, left = (rank + 1) % world, (rank - 1) % world
    dist.send(np.full(4, rank, np.int32), dst=right, tag=7)
    dist.send(np.full(4, rank + 100, np.int32), dst=right, tag=8)
    by_tag = {}
    for tag in (8, 7):  # taken in the other order: tags keep them apart
        buffer = np.zeros(4, np.int32)
        by_tag[tag] = (dist.recv(buffer, src=left, tag=tag), buffer)
    if rank != 0:
        dist.send(np.full(2, rank, np.float64), dst=0, tag=1)
        return by_tag, None
    senders = []
    for _ in range(world - 1):
        buffer = np.zeros(2, np.float64)
        work = dist.irecv(buffer, tag=1)
        work.wait(30)
        senders.append((work.result(), int(buffer[0])))
    return by_tag, sorted(senders)


def subgroup(rank, world):
    group = dist.new_group([0, 2])
    array = np.full(3, rank + 1.0, np.float32)
    size = dist.get_world_size(group)
    if dist.get_rank(group) >= 0:
        dist.all_reduce(array, group=group)
        return dist.get_rank(group), array, None, size
    try:
        dist.all_reduce(array, group=group)
    except dist.DistError as exc:
        return -1, array, str(exc), size
    return -1, array, "no error", size


def global_ranks_of_a_subgroup(rank, world):
    group = dist.new_group([0, 2])
    found = [dist.get_global_rank(group, r) for r in range(2)]
    for outside in (-1, 2, True):
        try:
            found.append(dist.get_global_rank(group, outside))
        except ValueError as exc:
            found.append(str(exc))
    return found


def mismatched_shape(rank, world):
    try:
        dist.all_reduce(np.zeros(4 + rank, np.float32))
    except ValueError as exc:
        return type(exc).__name__, str(exc)
    return "no error", ""


def mismatched_collective(rank, world):
    try:
        if rank == 0:
            dist.all_reduce(np.zeros(4, np.float32))
        else:
            dist.broadcast(np.zeros(4, np.float32), src=1)
    except ValueError as exc:
        return type(exc).__name__, str(exc)
    return "no error", ""


def one_calls_broadcast(rank, world):
    """Rank `world - 1` calls broadcast where the others call all_reduce: what each raises."""
    try:
        if rank == world - 1:
            dist.broadcast(np.zeros(4, np.float32), src=0)
        else:
            dist.all_reduce(np.zeros(4, np.float32))
    except Exception as exc:  # noqa: BLE001 - the test checks it
        return type(exc).__name__, str(exc)
    return "no error", ""


def all_to_all_of_other_shapes(rank, world):
    """Rank 1 sends pieces of 3 elements into everyone's outputs of 2: what each raises."""
    outputs = [np.zeros(2, np.float32) for _ in range(world)]
    try:
        dist.all_to_all(outputs, [np.ones(2 + (rank == 1), np.float32) for _ in range(world)])
    except ValueError as exc:
        return str(exc)
    return "no error"


def roots_disagree(rank, world):
    """Every rank broadcasts as its own root, so none receives; then an all_reduce: what
    each call raises."""
    outcomes = []
    for call in (lambda: dist.broadcast(np.full(4, rank, np.float32), src=rank),
                 lambda: dist.all_reduce(np.zeros(4, np.float32))):
        try:
            call()
            outcomes.append(("no error", ""))
        except Exception as exc:  # noqa: BLE001 - the test checks it
            outcomes.append((type(exc).__name__, str(exc)))
    return outcomes


def dies_or_loops(rank, world, victim, how):
    """Every rank loops all_reduce; `victim` kills (or stops) itself after a few rounds.
    Survivors return (error type, message, seconds from the victim's end to the error)."""
    array = np.ones(1000, np.float32)
    for step in range(10_000):
        if rank == victim and step == 20:
            os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGSTOP)
            time.sleep(60)
        try:
            started = time.monotonic()
            dist.all_reduce(array)
            array[:] = 1
        except Exception as exc:  # noqa: BLE001 - the test checks it
            return type(exc).__name__, str(exc), time.monotonic() - started, \
                isinstance(exc, ConnectionError)
    return "no error", "", 0.0, False


def monitored(rank, world, absent):
    if rank == absent:
        time.sleep(3)
        return "absent", ""
    try:
        dist.monitored_barrier(timeout=1.0)
    except dist.DistError as exc:
        return "raised", str(exc)
    return "passed", ""


def tensors(rank, world):
    from engine import Tensor

    weights = Tensor(np.full(3, rank + 1.0, np.float32))
    dist.all_reduce(weights, op=dist.ReduceOp.AVG)
    return weights.data


def work_outputs(rank, world):
    """What torch code reads from a Work: its future's value and its result, the call's
    outputs; and a wait bounded by a timedelta."""
    from datetime import timedelta

    grads = np.full(3, rank + 1.0, np.float32)
    averaged = dist.all_reduce(grads, async_op=True).get_future().then(
        lambda fut: fut.value()[0] / world).wait(30)
    gathered = [np.zeros(2, np.int64) for _ in range(world)]
    work = dist.all_gather(gathered, np.full(2, rank), async_op=True)
    waited = work.wait(timeout=timedelta(seconds=30))
    same = [a is b for a, b in zip(work.result(), gathered)]
    bucket = [np.zeros(2) for _ in range(world)] if rank == 0 else None
    at_dst = dist.gather(np.full(2, rank, np.float64), bucket, dst=0, async_op=True).result()
    barrier = dist.barrier(async_op=True).get_future().wait(30)
    return averaged, waited, same, len(at_dst), barrier


def scalars_into_tensors(rank, world):
    """0-d arrays through the one-array forms: a loss per rank gathered, a sum scattered."""
    losses = np.zeros(world, np.float32)
    dist.all_gather_into_tensor(losses, np.array(rank + 0.5, np.float32))
    mine = np.zeros((), np.int64)
    dist.reduce_scatter_tensor(mine, np.arange(world) * (rank + 1))
    return losses, mine


def formed_again_while_the_master_lingers(rank, world):
    """Under env://, every rank but 0 destroys its group and forms the next at once,
    reaching the store server of the group rank 0 has not destroyed yet; rank 0 destroys
    it a moment later and hosts the next one's on the same port. The next group's sum."""
    if rank == 0:
        time.sleep(1.0)
    dist.destroy_process_group()
    if rank == 0:
        time.sleep(0.5)
    dist.init_process_group()
    array = np.ones(2)
    dist.all_reduce(array)
    return array


def beside_rpc(rank, world):
    """An RPC world on the same env:// store as the group: a call, then a reduction."""
    import operator

    import actors

    actors.init_rpc()
    try:
        peer = (rank + 1) % world
        called = actors.rpc_sync(f"worker{peer}", operator.mul, args=(rank, 10))
        array = np.full(2, float(rank))
        dist.all_reduce(array)
        return called, array
    finally:
        actors.shutdown()


def ddp_model(seed: int):
    import engine
    from engine import nn

    engine.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def ddp_batches(steps: int, batch: int):
    rng = np.random.default_rng(7)
    return [(rng.standard_normal((batch, 6)).astype(np.float32),
             rng.standard_normal((batch, 3)).astype(np.float32)) for _ in range(steps)]


def ddp_train(rank, world, steps, per_rank, bucket_cap_mb, accumulate):
    """DDP training from a model seeded differently on each rank (the broadcast makes
    them equal); with `accumulate`, every step is two half-batches, the first in no_sync."""
    from engine import Tensor
    from engine.nn import functional as F
    from engine.nn.parallel import DistributedDataParallel
    from engine.optim import SGD

    model = DistributedDataParallel(ddp_model(seed=100 + rank), bucket_cap_mb=bucket_cap_mb)
    optimizer = SGD(model.parameters(), lr=0.1)
    for inputs, targets in ddp_batches(steps, per_rank * world):
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        x, y = inputs[mine], targets[mine]
        optimizer.zero_grad()
        if accumulate:
            half = per_rank // 2
            with model.no_sync():
                (F.mse_loss(model(Tensor(x[:half])), Tensor(y[:half])) / 2).backward()
            (F.mse_loss(model(Tensor(x[half:])), Tensor(y[half:])) / 2).backward()
        else:
            F.mse_loss(model(Tensor(x)), Tensor(y)).backward()
        optimizer.step()
    return [p.data.copy() for p in model.parameters()]


def async_failure_and_destroyed_subgroup(rank, world):
    """A failing async call reports through its Work; a destroyed subgroup refuses calls."""
    work = dist.all_reduce(np.zeros(3 + rank, np.float32), async_op=True)
    try:
        work.wait(30)
        waited = "no error"
    except ValueError as exc:
        waited = type(exc).__name__
    group = dist.new_group()
    dist.destroy_process_group(group)
    try:
        dist.barrier(group)
        refused = "no error"
    except dist.DistError as exc:
        refused = str(exc)
    array = np.ones(2)
    dist.all_reduce(array)  # the default group still works
    return waited, work.is_completed(), type(work.exception()).__name__, refused, array


def explicit_store(rank, world, path):
    """Two groups in a row on one FileStore the ranks open themselves."""
    from store import FileStore

    dist.destroy_process_group()  # the one the harness made
    store = FileStore(path, world)
    for round_ in range(2):
        dist.init_process_group(store=store, rank=rank, world_size=world)
        array = np.full(2, float(rank + round_))
        dist.all_reduce(array)
        dist.destroy_process_group()
    return array


def shared_flood(rank, world, count):
    """Rank 0 sends `count` arrays of 1 MiB without waiting, more than its shared region
    holds; rank 1 takes them last first."""
    if rank == 0:
        for tag in range(count):
            dist.send(np.full(1 << 18, tag, np.float32), dst=1, tag=tag)
        dist.barrier()
        return None
    received = {}
    for tag in reversed(range(count)):
        buffer = np.zeros(1 << 18, np.float32)
        dist.recv(buffer, src=0, tag=tag)
        received[tag] = (float(buffer.min()), float(buffer.max()))
    dist.barrier()
    return received


def _shared_maps() -> int:
    with open("/proc/self/maps") as maps:
        return sum("actorgrad-pg" in line for line in maps)


def shared_resources(rank, world, path):
    """Descriptors and shared mappings after a group that moved large arrays through
    shared memory is destroyed, against before it was formed (a first round has
    started what stays for the process: ZeroMQ's context, numpy's thread pools)."""
    from store import FileStore

    from tests.leftovers import open_fds, os_threads
    from tests.waiting import wait_until

    def one_round(store):
        dist.init_process_group(store=store, rank=rank, world_size=world)
        array = np.full(3 << 20, float(rank), np.float32)
        dist.all_reduce(array)
        dist.broadcast(array, src=0)
        mapped = _shared_maps()
        dist.destroy_process_group()
        return mapped

    dist.destroy_process_group()  # the one the harness made
    store = FileStore(path, world)
    one_round(store)
    fds, threads = open_fds(), os_threads()
    mapped_during = one_round(store)
    released = wait_until(lambda: open_fds() <= fds and os_threads() <= threads, 10.0)
    return mapped_during, _shared_maps(), released, (fds, open_fds())


def malformed_shared_array(rank, world):
    """Rank 0 sends rank 1 a SharedArray naming slots outside any region, then a real
    array; rank 1's recv of the first raises, and the second arrives whole."""
    from actors.distributed import world as world_state
    from actors.distributed.shared_memory import SharedArray
    from actors.runtime import Kind

    pg = world_state.group_or_default(None)
    if rank == 0:
        transport = pg.transport
        dist.send(np.ones(1 << 18, np.float32), dst=1, tag=4)  # rank 1 maps the region
        bogus = SharedArray(0, 30, 9, "<f4", (1 << 18,))
        transport._actor.notify(transport._addresses[1], Kind.PG_DATA,
                                ((pg.id, "p2p", 5, 0), ("send", "<f4", (1 << 18,)), bogus))
        dist.send(np.arange(1 << 18, dtype=np.float32), dst=1, tag=6)
        dist.barrier()
        return None
    buffer = np.zeros(1 << 18, np.float32)
    dist.recv(buffer, src=0, tag=4)
    try:
        dist.recv(buffer, src=0, tag=5)
        error = "no error"
    except ValueError as exc:
        error = str(exc)
    dist.recv(buffer, src=0, tag=6)
    dist.barrier()
    return error, bool((buffer == np.arange(1 << 18, dtype=np.float32)).all())


def all_reduces_around_a_forgery(rank, world, forged):
    """Three all_reduces of rank + 1; the second once the test has sent its forged message
    (`forged`, a multiprocessing Event it sets)."""
    sums = []
    for step in range(3):
        if step == 1 and not forged.wait(60):
            raise TimeoutError("the test never sent its forged message")
        array = np.full(2, rank + 1.0)
        dist.all_reduce(array)
        sums.append(array.tolist())
    return sums


def last_all_reduce(rank, world, port, size, results):
    """A whole rank process that ends right after its `all_reduce` of `size` elements,
    without `destroy_process_group()`; it reports "ok" or what went wrong."""
    os.environ["ACTORGRAD_LOG_LEVEL"] = "error"
    try:
        dist.init_process_group(init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=30)
        array = np.full(size, rank + 1, dtype=np.float32)
        dist.all_reduce(array)
        expected = world * (world + 1) / 2
        results.put((rank, "ok" if bool((array == expected).all()) else f"wrong {array[:4]}"))
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        results.put((rank, f"{type(exc).__name__}: {exc}"))


def late_to_the_barrier(rank, world, folder, lates):
    """A barrier for each rank of `lates`, which enters only once every other rank has
    marked itself as entering; every rank marks itself just before it enters. Returns
    the barriers this rank left before the late rank had entered (none if it is one)."""
    left_early = []
    for index, late in enumerate(lates):
        marks = [os.path.join(folder, f"{index}-{r}") for r in range(world)]
        if rank == late:
            others = marks[:late] + marks[late + 1:]
            assert wait_until(lambda others=others: all(map(os.path.exists, others)),
                              timeout=60, interval=0.002), "the other ranks never came"
        open(marks[rank], "w").close()
        dist.barrier()
        if not os.path.exists(marks[late]):
            left_early.append(index)
    return left_early


def killed_before_a_barrier(rank, world, victim, barriers_before):
    """After `barriers_before` barriers `victim` is killed as the others enter the next
    one (with none before, some may still be forming the group): what each raises."""
    try:
        for _ in range(barriers_before):
            dist.barrier()
        if rank == victim:
            os.kill(os.getpid(), signal.SIGKILL)
        dist.barrier()
    except Exception as exc:  # noqa: BLE001 - the test checks it
        return type(exc).__name__, str(exc)
    return "passed", ""


def barrier_but_one_all_reduces(rank, world, odd):
    """Every rank enters a barrier but `odd`, which calls all_reduce: what each raises."""
    try:
        if rank == odd:
            dist.all_reduce(np.zeros(4, np.float32))
        else:
            dist.barrier()
    except Exception as exc:  # noqa: BLE001 - the test checks it
        return type(exc).__name__, str(exc)
    return "passed", ""
