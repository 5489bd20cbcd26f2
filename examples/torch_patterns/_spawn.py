"""`torch.multiprocessing.spawn`'s job for the ported tutorials, and a free port for them."""
import multiprocessing as mp
import socket
from typing import Callable


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the tutorials hard-code 29500)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spawn(fn: Callable, args: tuple, nprocs: int, timeout: float = 240.0) -> None:
    """Run `fn(rank, *args)` in `nprocs` spawned processes; SystemExit if any failed.

    Every process is joined within `timeout` seconds in all; any still running then
    is killed.
    """
    ctx = mp.get_context("spawn")
    processes = [ctx.Process(target=fn, args=(rank, *args)) for rank in range(nprocs)]
    try:
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout)
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join(10)
    codes = [process.exitcode for process in processes]
    if any(code != 0 for code in codes):
        raise SystemExit(f"a process failed: exit codes {codes}")
