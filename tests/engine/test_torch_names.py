"""The tensor names a torch training loop uses: view, size, flatten, squeeze, unsqueeze,
permute, argmax, argmin, comparisons and dtype conversions, each against torch where it
is installed (against its numbers written here otherwise)."""
from __future__ import annotations

import importlib.util
import operator

import numpy as np
import pytest

import engine
from engine import nn

pytestmark = pytest.mark.timeout(60)
HAS_TORCH = importlib.util.find_spec("torch") is not None
VALUES = np.array([[1.0, 3.0, 3.0], [np.nan, 0.0, 5.0], [2.0, -1.0, -1.0]], dtype=np.float32)


def test_size_is_the_shape_or_one_length():
    x = engine.zeros(2, 3, 4)
    assert x.size() == (2, 3, 4) and x.size(0) == 2 and x.size(-1) == 4
    with pytest.raises(IndexError):
        x.size(3)


def test_view_and_view_as_reshape_and_carry_the_gradient(rng):
    x = engine.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
    assert x.view(2, -1).shape == (2, 12) and x.view((4, 6)).shape == (4, 6)
    assert x.view_as(engine.zeros(6, 4)).shape == (6, 4)
    assert engine.gradcheck(lambda a: a.view(a.size(0), -1) * 2.0, [x])


@pytest.mark.parametrize("shape, start, end, expected", [
    ((2, 3, 4), 0, -1, (24,)),
    ((2, 3, 4), 1, -1, (2, 12)),
    ((2, 3, 4, 5), 1, 2, (2, 12, 5)),
    ((2, 3), -1, -1, (2, 3)),
    ((0, 3, 4), 1, -1, (0, 12)),  # -1 could not say it for an empty tensor
    ((), 0, -1, (1,)),
])
def test_flatten_gives_torchs_shapes(shape, start, end, expected):
    x = engine.zeros(shape)
    assert engine.flatten(x, start, end).shape == expected
    assert x.flatten(start, end).shape == expected
    if HAS_TORCH:
        import torch
        assert tuple(torch.zeros(shape).flatten(start, end).shape) == expected


def test_flatten_refuses_axes_out_of_range_or_in_the_wrong_order():
    with pytest.raises(IndexError, match="out of range"):
        engine.zeros(2, 3).flatten(2)
    with pytest.raises(ValueError, match="comes after"):
        engine.zeros(2, 3, 4).flatten(2, 1)


def test_the_flatten_layer_keeps_the_batch_axis(rng):
    layer = nn.Flatten()
    x = engine.tensor(rng.standard_normal((4, 1, 2, 3)), requires_grad=True)
    assert layer(x).shape == (4, 6) and repr(layer) == "Flatten(start_dim=1, end_dim=-1)"
    assert engine.gradcheck(lambda a: layer(a) * 3.0, [x])


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (1, False), (1, True),
                                            (-1, True)])
def test_argmax_and_argmin_give_torchs_indices(name, axis, keepdims):
    # torch 2.13: the first of tied values, NaN counted as the extreme
    expected = {("argmax", None): 3, ("argmin", None): 3,
                ("argmax", 0): [1, 0, 1], ("argmin", 0): [1, 2, 2],
                ("argmax", 1): [1, 0, 0], ("argmin", 1): [0, 0, 1]}[name, axis and axis % 2]
    x = engine.tensor(VALUES, requires_grad=True)
    outs = getattr(engine, name)(x, axis, keepdims), getattr(x, name)(axis, keepdims=keepdims)
    for out in outs:
        assert out.dtype == np.int64 and not out.requires_grad and out.grad_fn is None
        want = np.asarray(expected)
        if keepdims:
            want = np.expand_dims(want, axis)
        np.testing.assert_array_equal(out.data, want)
    if HAS_TORCH:
        import torch
        kwargs = {} if axis is None else dict(dim=axis, keepdim=keepdims)
        np.testing.assert_array_equal(getattr(torch.tensor(VALUES), name)(**kwargs).numpy(),
                                      getattr(x, name)(axis, keepdims=keepdims).data)


def test_accuracy_as_a_torch_loop_counts_it():
    logits = engine.tensor(VALUES[[0, 2]])
    target = engine.tensor([1, 0])
    correct = (logits.argmax(1) == target).sum().item()
    assert correct == 2


@pytest.mark.parametrize("name, dtype", [("float", np.float32), ("double", np.float64),
                                         ("long", np.int64), ("int", np.int32),
                                         ("bool", np.bool_)])
def test_dtype_conversions_give_torchs_values(name, dtype):
    values = np.array([1.5, -1.5, 0.0, 2.7], dtype=np.float64)
    out = getattr(engine.tensor(values, requires_grad=True), name)()
    assert out.dtype == dtype
    # torch 2.13: truncation toward zero, 0 alone is False
    expected = {"long": [1, -1, 0, 2], "int": [1, -1, 0, 2],
                "bool": [True, True, False, True]}.get(name, values)
    np.testing.assert_array_equal(out.data, np.asarray(expected, dtype=dtype))
    assert out.requires_grad == (name in ("float", "double"))
    if HAS_TORCH:
        import torch
        np.testing.assert_array_equal(getattr(torch.tensor(values), name)().numpy(), out.data)


def test_a_conversion_passes_the_gradient_back_in_the_inputs_dtype(rng):
    x = engine.tensor(rng.standard_normal(3), requires_grad=True)
    (x.float() * 2.0).sum().backward()
    assert x.grad.dtype == np.float64 and x.grad.tolist() == [2.0, 2.0, 2.0]
    assert engine.gradcheck(lambda a: engine.cast(a * a, np.float64), [x.detach()
                                                                       .requires_grad_()])


def test_comparison_methods_are_the_operators():
    x, y = engine.tensor([1, 2, 3]), engine.tensor([1, 3, 2])
    for name in ["eq", "ne", "lt", "le", "gt", "ge"]:
        compare = getattr(operator, name)
        np.testing.assert_array_equal(getattr(x, name)(y).data, compare(x, y).data)
    pred = engine.tensor([[2], [0]])
    assert pred.eq(engine.tensor([2, 1]).view_as(pred)).sum().item() == 1  # torch's MNIST line


@pytest.mark.parametrize("shape, dim, expected", [
    ((2, 1, 3, 1), None, (2, 3)), ((2, 1, 3, 1), 1, (2, 3, 1)), ((2, 1, 3, 1), 0, (2, 1, 3, 1)),
    ((2, 1, 3, 1), (1, -1), (2, 3)), ((1,), None, ()), ((), 0, ()), ((1,), 0, ()),
])
def test_squeeze_gives_torchs_shapes(shape, dim, expected):
    x = engine.zeros(shape)
    out = x.squeeze() if dim is None else x.squeeze(dim)
    assert out.shape == expected and engine.squeeze(x, dim).shape == expected
    if HAS_TORCH:
        import torch
        theirs = torch.zeros(shape)
        theirs = theirs.squeeze() if dim is None else theirs.squeeze(dim)
        assert tuple(theirs.shape) == expected


@pytest.mark.parametrize("shape, dim, expected", [
    ((2, 3), 0, (1, 2, 3)), ((2, 3), 2, (2, 3, 1)), ((2, 3), -1, (2, 3, 1)),
    ((2, 3), -3, (1, 2, 3)), ((), 0, (1,)),
])
def test_unsqueeze_gives_torchs_shapes(shape, dim, expected):
    assert engine.zeros(shape).unsqueeze(dim).shape == expected
    if HAS_TORCH:
        import torch
        assert tuple(torch.zeros(shape).unsqueeze(dim).shape) == expected


def test_shape_methods_refuse_axes_out_of_range_and_carry_the_gradient(rng):
    with pytest.raises(IndexError, match="out of range"):
        engine.zeros(2, 3).unsqueeze(3)
    with pytest.raises(IndexError, match="out of range"):
        engine.zeros(2, 3).squeeze(2)
    x = engine.tensor(rng.standard_normal((2, 1, 3)), requires_grad=True)
    assert x.permute(2, 0, 1).shape == (3, 2, 1) and x.permute((2, 0, 1)).shape == (3, 2, 1)
    assert engine.gradcheck(lambda a: a.squeeze(1).unsqueeze(0).permute(2, 0, 1) * 2.0, [x])


@pytest.mark.parametrize("args, dtype", [((5,), np.int64), ((2, 9, 3), np.int64),
                                         ((-3, 4), np.int64), ((5, 0, -2), np.int64),
                                         ((0, 1, 0.1), np.float32), ((1.0, -1.0, -0.3),
                                                                     np.float32),
                                         ((0.5,), np.float32), ((0, 7.3, 0.013), np.float32)])
def test_arange_gives_torchs_dtype_length_and_values(args, dtype):
    out = engine.arange(*args)
    assert out.dtype == dtype and not out.requires_grad
    # torch 2.13's lengths
    lengths = {(5,): 5, (2, 9, 3): 3, (-3, 4): 7, (5, 0, -2): 3, (0, 1, 0.1): 10,
               (1.0, -1.0, -0.3): 7, (0.5,): 1, (0, 7.3, 0.013): 562}
    assert out.shape == (lengths[args],)
    if HAS_TORCH:
        import torch
        np.testing.assert_allclose(out.data, torch.arange(*args).numpy(), rtol=1e-6,
                                   atol=1e-6)
    assert engine.arange(3, dtype=np.float64).tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="nonzero"):
        engine.arange(0, 3, 0)


def test_to_and_cpu_take_the_cpu_and_dtypes_and_refuse_other_devices():
    x = engine.tensor([1.5, -2.0], requires_grad=True)
    assert x.to("cpu") is x and x.cpu() is x and x.to("cpu:0") is x
    y = x.to(np.float64)
    assert y.dtype == np.float64 and y.requires_grad
    y.sum().backward()
    assert x.grad.dtype == np.float32 and x.grad.tolist() == [1.0, 1.0]
    model = nn.Linear(2, 2)
    assert model.to("cpu") is model and model.cpu() is model
    for target in (x, model):
        with pytest.raises(ValueError, match="CPU only"):
            target.to("cuda:0")
    with pytest.raises(ValueError, match="dtype is chosen when its layers are made"):
        model.to(np.float64)
