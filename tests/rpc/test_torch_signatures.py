"""init_rpc and friends called the way torch scripts call them."""
import os

import pytest

import actors
from tests.net import free_port

pytestmark = pytest.mark.timeout(60)


def test_init_rpc_takes_torchs_backend_and_options_keywords_and_args_none():
    options = actors.TensorPipeRpcBackendOptions(
        num_worker_threads=2, rpc_timeout=7, init_method=f"tcp://127.0.0.1:{free_port()}")
    actors.init_rpc("solo", backend=actors.BackendType.TENSORPIPE, rank=0, world_size=1,
                    rpc_backend_options=options)
    try:
        assert actors.get_rpc_timeout() == 7.0
        assert actors.is_available()
        assert actors.get_worker_info(worker_name="solo") == actors.WorkerInfo("solo", 0)
        assert actors.rpc_sync("solo", os.getpid, args=None) == os.getpid()
        assert actors.rpc_async("solo", os.getpid, args=None, kwargs=None).wait(10) == os.getpid()
        assert actors.remote("solo", os.getpid, args=None).to_here() == os.getpid()
    finally:
        actors.shutdown()


@actors.functions.async_execution  # a torch script's @rpc.functions.async_execution
def add_later(x):
    future = actors.Future()
    future.set_result(x + 1)
    return future


def test_torchs_rpc_functions_async_execution_is_there_after_import_actors_as_rpc():
    """Before, ``rpc.functions`` was an AttributeError once ``import actors as rpc``."""
    actors.init_rpc("solo", rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{free_port()}")
    try:
        assert add_later._async_execution
        assert actors.rpc_sync("solo", add_later, args=(1,)) == 2
    finally:
        actors.shutdown()


def test_an_unknown_backend_is_refused_as_torch_refuses_it():
    with pytest.raises(ValueError, match="unknown RPC backend 'NCCL'"):
        actors.init_rpc("x", rank=0, world_size=1, backend="NCCL")


def test_torchs_positional_order_is_a_type_error_that_says_to_pass_keywords():
    """After the name, torch's order is (backend, rank, world_size), ours (rank,
    world_size); before, the backend taken as the rank ended in 'url must be str'."""
    with pytest.raises(TypeError, match="rank must be an int, got <BackendType.TENSORPIPE.* "
                                        "pass them by keyword"):
        actors.init_rpc("x", actors.BackendType.TENSORPIPE, 0, 1)
    with pytest.raises(TypeError, match="world_size must be an int, got '2'"):
        actors.init_rpc("x", 0, "2")


def test_device_maps_are_refused_on_a_cpu_only_world():
    with pytest.raises(ValueError, match="CPUs only"):
        actors.TensorPipeRpcBackendOptions(device_maps={"w1": {0: 1}})


def test_an_rpc_timeout_of_zero_means_calls_never_time_out_and_joining_still_works_like_torch():
    options = actors.TensorPipeRpcBackendOptions(
        rpc_timeout=0, init_method=f"tcp://127.0.0.1:{free_port()}")
    actors.init_rpc("solo", rank=0, world_size=1, rpc_backend_options=options)
    try:
        assert actors.get_rpc_timeout() == 0
        assert actors.rpc_sync("solo", os.getpid) == os.getpid()
    finally:
        actors.shutdown()
