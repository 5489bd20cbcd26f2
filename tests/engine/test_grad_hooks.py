"""Post-accumulate-grad hooks: what DistributedDataParallel starts its all-reduces from."""
import numpy as np
import pytest

from engine import AutogradError, Tensor

pytestmark = pytest.mark.timeout(30)


def test_a_post_accumulate_grad_hook_sees_the_accumulated_gradient_once_per_pass():
    leaf = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    seen = []
    handle = leaf.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.copy()))
    ((leaf * 3).sum() + (leaf * leaf).sum()).backward()  # two paths into one leaf
    assert [s.tolist() for s in seen] == [[5.0, 7.0]]
    handle.remove()
    (leaf.sum()).backward()
    assert len(seen) == 1
    with pytest.raises(AutogradError, match="leaves"):
        (leaf * 2).register_post_accumulate_grad_hook(print)
