"""Tensor basics: factories and dtypes, attributes, operators with scalars and arrays."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import engine
from engine.errors import AutogradError

pytestmark = pytest.mark.timeout(60)


def test_factories_default_to_float32():
    for t in (engine.zeros(2, 3), engine.ones((2, 3)), engine.rand(2, 3), engine.randn(2, 3)):
        assert t.dtype == np.float32 and t.shape == (2, 3)


def test_factories_take_a_dtype_and_requires_grad():
    t = engine.randn(4, dtype=engine.float64, requires_grad=True)
    assert t.dtype == np.float64 and t.requires_grad and t.is_leaf
    assert engine.zeros_like(t).dtype == np.float64
    assert engine.ones_like(t, dtype=np.float32).dtype == np.float32
    assert engine.rand_like(t).shape == (4,) and engine.randn_like(t).shape == (4,)


def test_tensor_of_an_ndarray_copies_it_and_keeps_its_dtype():
    array = np.arange(3, dtype=np.float64)
    t = engine.tensor(array)
    assert t.dtype == np.float64
    array[0] = 9
    assert t.data[0] == 0


def test_tensor_of_a_numpy_scalar_keeps_its_dtype_as_torchs_does():
    values = np.array([0.1, 0.2])
    t = engine.tensor(values[0], requires_grad=True)  # np.float64, a float subclass
    assert t.dtype == np.float64 and t.item() == 0.1
    assert engine.tensor(np.float32(1.5)).dtype == np.float32


def test_a_list_holding_float64_numpy_values_is_float64_as_in_torch():
    values = np.array([0.1, 0.2])
    assert engine.tensor([values[0], values[1]]).dtype == np.float64
    assert engine.tensor([[0.5], [values[0]]]).dtype == np.float64  # one is enough
    assert engine.tensor([np.float32(0.1), 0.2]).dtype == np.float32
    assert engine.tensor([np.int64(1), 0.5]).dtype == np.float32


def test_tensor_of_python_floats_is_float32_and_of_ints_is_int64():
    assert engine.tensor([1.0, 2.0]).dtype == np.float32
    assert engine.tensor(3.0).dtype == np.float32
    assert engine.tensor([1, 2]).dtype == np.int64


def test_from_numpy_shares_the_array():
    array = np.zeros(2, dtype=np.float32)
    t = engine.from_numpy(array)
    array[1] = 5
    assert t.data[1] == 5


def test_only_floating_point_tensors_can_require_grad():
    with pytest.raises(TypeError, match="int64"):
        engine.tensor([1, 2], requires_grad=True)


def test_manual_seed_makes_random_factories_repeatable():
    engine.manual_seed(7)
    first = engine.randn(3).data.copy()
    engine.manual_seed(7)
    np.testing.assert_array_equal(engine.randn(3).data, first)


def test_item_numpy_detach_and_len():
    x = engine.tensor([[2.5]], requires_grad=True)
    assert x.item() == 2.5 and float(x) == 2.5
    assert x.numpy() is x.data
    y = (x * 2).detach()
    assert y.is_leaf and not y.requires_grad and y.grad_fn is None
    assert len(engine.zeros(4, 2)) == 4 and engine.zeros(4, 2).numel() == 8


def test_format_specs_format_a_zero_dim_tensors_value_as_torch_does():
    loss = engine.tensor(1.23456, dtype=np.float64)
    assert f"{loss:.3f} {loss:>8.2f} {loss:.1e}" == "1.235     1.23 1.2e+00"
    assert f"{loss}" == "1.23456"  # torch: the value too
    assert f"{engine.tensor([1.0, 2.0])}" == "tensor([1., 2.])"
    with pytest.raises(TypeError):
        f"{engine.tensor([1.0, 2.0]):.3f}"  # as torch: only a 0-d tensor has a value


def test_reshape_and_transpose_take_numpy_integers_as_numpy_does():
    x = engine.ones(2, 3)
    assert x.reshape(np.prod(x.shape)).shape == (6,)
    assert engine.reshape(x, np.int64(6)).shape == (6,)
    assert engine.ones(4).transpose(np.int64(0)).shape == (4,)


def test_operators_accept_scalars_and_arrays_on_either_side():
    t = engine.tensor([1.0, 2.0, 4.0])
    np.testing.assert_allclose((2 * t).data, [2, 4, 8])
    np.testing.assert_allclose((t / 2.0).data, [0.5, 1, 2])
    np.testing.assert_allclose((1 - t).data, [0, -1, -3])
    np.testing.assert_allclose((8.0 / t).data, [8, 4, 2])
    np.testing.assert_allclose((t ** 2).data, [1, 4, 16])
    np.testing.assert_allclose((2 ** t).data, [2, 4, 16])
    np.testing.assert_allclose((np.ones(3) + t).data, [2, 3, 5])
    np.testing.assert_allclose((np.float32(3) * t).data, [3, 6, 12])
    assert isinstance(np.ones(3) - t, engine.Tensor)


def test_python_scalars_keep_the_tensor_dtype():
    t = engine.ones(2)
    assert (t * 2.5).dtype == np.float32
    assert (1 - t).dtype == np.float32


def test_ops_on_a_zero_dim_tensor_still_hold_an_ndarray():
    loss = engine.tensor([1.0, 2.0]).sum() * 2
    assert isinstance(loss.data, np.ndarray) and loss.shape == ()


def test_tensors_hash_by_identity_and_compare_elementwise():
    a, b = engine.tensor([1.0, 2.0]), engine.tensor([1.0, 3.0])
    assert {a: 1, b: 2}[a] == 1 and len({a, b}) == 2
    np.testing.assert_array_equal((a == b).data, [True, False])
    np.testing.assert_array_equal((a < b).data, [False, True])


def test_help_on_the_reflected_and_comparison_operators_says_what_they_compute():
    """The reflected operators' docstrings read ``other __rtruediv__`` self; the
    comparisons had none."""
    assert engine.Tensor.__rtruediv__.__doc__ == (
        "``other / self``: div with the arguments swapped.")
    assert engine.Tensor.__rsub__.__doc__.startswith("``other - self``: sub")
    assert engine.Tensor.__le__.__doc__ == (
        "``self <= other`` elementwise: a tensor of bools, not differentiable.")


def test_repr_shows_values_dtype_and_grad_fn():
    assert repr(engine.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    x = engine.tensor([1.0], dtype=np.float64, requires_grad=True)
    assert repr(x) == "tensor([1.], dtype=float64, requires_grad=True)"
    assert "grad_fn=<MulBackward>" in repr(x * 2)


def test_methods_mirror_the_functions():
    x = engine.tensor([[1.0, -2.0], [3.0, 0.5]])
    np.testing.assert_allclose(x.sum(axis=0).data, [4.0, -1.5])
    np.testing.assert_allclose(x.T.data, x.data.T)
    np.testing.assert_allclose(x.reshape(4).data, x.data.reshape(4))
    np.testing.assert_allclose(x.abs().max().data, 3.0)
    np.testing.assert_allclose((x @ x).data, x.data @ x.data)
    np.testing.assert_allclose(x[:, 1].data, [-2.0, 0.5])


def test_zero_is_refused_on_a_leaf_that_requires_grad_unless_no_grad():
    x = engine.ones(2, requires_grad=True)
    with pytest.raises(AutogradError, match="in-place"):
        x.zero_()
    with engine.no_grad():
        x.zero_()
    np.testing.assert_array_equal(x.data, [0.0, 0.0])


def test_pickling_keeps_data_and_requires_grad_but_not_the_graph():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    y = pickle.loads(pickle.dumps(x * 2))
    assert y.is_leaf and y.requires_grad
    np.testing.assert_array_equal(y.data, [2.0, 4.0])
    z = copy.deepcopy(x)
    assert z is not x and z.data is not x.data


@pytest.mark.parametrize("array", [
    np.arange(9, dtype=np.float32).reshape(3, 3),      # small: raw bytes
    np.arange(6, dtype=np.int64).reshape(2, 3).T,      # small and not contiguous
    np.array(3.5),                                     # 0-d
    np.array([True, False]),
    np.arange(4, dtype=np.complex64),
    np.linspace(0, 1, 5000).reshape(50, 100),          # large: numpy's own reduction
], ids=["float32", "transposed", "0-d", "bool", "complex", "large"])
def test_pickled_tensors_keep_dtype_shape_values_and_are_writable(array):
    x = engine.tensor(array, requires_grad=array.dtype.kind in "fc")
    y = pickle.loads(pickle.dumps(x, protocol=5))
    assert y.dtype == array.dtype and y.shape == array.shape
    assert y.requires_grad == x.requires_grad and y.data.flags.writeable
    np.testing.assert_array_equal(y.data, array)


def test_op_functions_pickle_by_reference():
    for fn in (engine.add, engine.matmul, engine.relu, engine.sum):
        assert pickle.loads(pickle.dumps(fn)) is fn


def test_in_place_operators_write_into_the_data_when_no_graph_is_needed():
    t = engine.ones(3)
    alias = t
    t += 1
    t *= engine.tensor([1.0, 2.0, 3.0])
    t[0] = 10.0
    assert alias is t
    np.testing.assert_array_equal(t.data, [10.0, 4.0, 6.0])
    w = engine.ones(2, requires_grad=True)
    with engine.no_grad():
        w -= 0.5
    np.testing.assert_array_equal(w.data, [0.5, 0.5])
    assert w.requires_grad and w.is_leaf


def test_in_place_operators_refuse_tensors_that_record_a_graph():
    w = engine.ones(2, requires_grad=True)
    with pytest.raises(AutogradError, match="in-place"):
        w += 1
    with pytest.raises(AutogradError, match="in-place"):
        (w * 2)[0] = 1.0


def test_in_place_writes_of_a_value_that_requires_grad_are_refused_not_dropped():
    # torch records these (v gets a gradient); writing only the data would lose it
    out = engine.zeros(2, 3)
    v = engine.ones(3, requires_grad=True)
    with pytest.raises(AutogradError, match="in-place .*requires grad"):
        out[0] = v * 2
    with pytest.raises(AutogradError, match="in-place .*requires grad"):
        out += v
    np.testing.assert_array_equal(out.data, np.zeros((2, 3)))  # nothing written
    with engine.no_grad():  # no graph wanted: the data is written, as in torch
        out[0] = v * 2
        out += v
    np.testing.assert_array_equal(out.data, [[3.0] * 3, [1.0] * 3])
    out[1] = v.detach()


def test_matmul_with_an_ndarray_on_the_left_returns_a_tensor():
    t = engine.ones(3, 2, requires_grad=True)
    out = np.ones((4, 3), dtype=np.float32) @ t
    assert isinstance(out, engine.Tensor) and out.shape == (4, 2) and out.requires_grad


def test_iterating_yields_rows_and_refuses_a_zero_dim_tensor():
    x = engine.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    rows = list(x)
    assert len(rows) == 2 and rows[1].grad_fn is not None
    (rows[0] * rows[1]).sum().backward()
    np.testing.assert_array_equal(x.grad, [[3.0, 4.0], [1.0, 2.0]])
    with pytest.raises(TypeError, match="0-d"):
        list(engine.tensor(1.0))


def test_clip_accepts_tensor_bounds():
    x = engine.tensor([-2.0, 0.0, 2.0])
    np.testing.assert_array_equal(engine.clip(x, engine.tensor(-1.0), 1.0).data, [-1, 0, 1])
