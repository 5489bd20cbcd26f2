"""A safe-mode worker of a two-worker world, for spawned processes."""
import actors


def safe_rank(port, results):
    """Join as "safe" (rank 1) with allow_pickle=False; report what its own rpc_sync does."""
    from tests.rpc import exposed  # noqa: F401 - exposes the named functions

    actors.init_rpc("safe", 1, 2, init_method=f"tcp://127.0.0.1:{port}", timeout=60,
                    allow_pickle=False)
    try:
        actors.rpc_sync("driver", exposed.plain_python, args=(1,))
        results.put("rpc_sync was sent")
    except actors.SafeModeError as exc:
        results.put(f"refused: {exc}")
    actors.shutdown()
    results.put("left")
