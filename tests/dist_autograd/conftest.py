import pytest

from tests.rpc.conftest import rpc_world


@pytest.fixture(scope="module")
def world3():
    import engine.dist_autograd  # noqa: F401 - registers the hook here

    with rpc_world(3) as procs:
        yield procs
