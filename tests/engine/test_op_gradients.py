"""Every op's gradient against central finite differences (float64), broadcasting included."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import engine
from engine.nn import functional as F
from engine.ops import Op, OpNode
from tests.engine.support import leaf64

pytestmark = pytest.mark.timeout(60)

COND = np.array([[True, False, True, False]])
TARGET = np.array([2, 0, 1])

# (case id, function, input shapes, inputs must be positive)
CASES = [
    ("add", lambda a, b: a + b, [(3, 4), (3, 4)], False),
    ("add_broadcasts_a_row", engine.add, [(3, 4), (4,)], False),
    ("add_broadcasts_both_sides", engine.add, [(3, 1), (1, 4)], False),
    ("radd_scalar", lambda a: 2.5 + a, [(3,)], False),
    ("sub_broadcasts", lambda a, b: a - b, [(2, 3, 4), (3, 1)], False),
    ("rsub_scalar", lambda a: 1 - a, [(3,)], False),
    ("mul_broadcasts", lambda a, b: a * b, [(2, 3), (2, 1)], False),
    ("rmul_scalar", lambda a: 2 * a, [(3,)], False),
    ("mul_by_ndarray_on_the_left", lambda a: np.arange(3.0) * a, [(2, 3)], False),
    ("div_broadcasts", lambda a, b: a / b, [(3, 4), (4,)], True),
    ("rdiv_scalar", lambda a: 3.0 / a, [(3,)], True),
    ("neg", lambda a: -a, [(2, 2)], False),
    ("pow_scalar_exponent", lambda a: a ** 3, [(3, 2)], False),
    ("pow_tensor_exponent", lambda a, b: a ** b, [(3, 2), (2,)], True),
    ("rpow", lambda a: 2 ** a, [(3,)], False),
    ("matmul_2d", lambda a, b: a @ b, [(3, 4), (4, 5)], False),
    ("matmul_vector_matrix", engine.matmul, [(4,), (4, 5)], False),
    ("matmul_matrix_vector", engine.matmul, [(3, 4), (4,)], False),
    ("matmul_dot", engine.matmul, [(4,), (4,)], False),
    ("matmul_batched", engine.matmul, [(2, 3, 4), (2, 4, 5)], False),
    ("matmul_broadcasts_batches", engine.matmul, [(2, 1, 3, 4), (5, 4, 2)], False),
    ("matmul_batched_vector", engine.matmul, [(2, 3, 4), (4,)], False),
    ("linear", engine.linear, [(5, 4), (3, 4), (3,)], False),
    ("linear_without_bias", engine.linear, [(5, 4), (3, 4)], False),
    ("linear_batched_input", engine.linear, [(2, 5, 4), (3, 4), (3,)], False),
    ("linear_single_sample", engine.linear, [(4,), (3, 4), (3,)], False),
    ("sum_all", engine.sum, [(3, 4)], False),
    ("sum_axis_keepdims", lambda a: a.sum(axis=1, keepdims=True), [(3, 4)], False),
    ("sum_tuple_axis", lambda a: a.sum(axis=(0, 2)), [(2, 3, 4)], False),
    ("mean_all", engine.mean, [(3, 4)], False),
    ("mean_negative_axis", lambda a: a.mean(axis=-1), [(3, 4)], False),
    ("max_axis", lambda a: a.max(axis=0), [(3, 4)], False),
    ("max_keepdims", lambda a: engine.max(a, axis=1, keepdims=True), [(3, 4)], False),
    ("min_all", engine.min, [(3, 4)], False),
    ("min_axis", lambda a: a.min(axis=1), [(3, 4)], False),
    ("exp", engine.exp, [(3, 4)], False),
    ("log", engine.log, [(3, 4)], True),
    ("sqrt", engine.sqrt, [(3, 4)], True),
    ("abs", engine.abs, [(3, 4)], False),
    ("relu", engine.relu, [(3, 4)], False),
    ("tanh", engine.tanh, [(3, 4)], False),
    ("sigmoid", engine.sigmoid, [(3, 4)], False),
    ("cast", lambda a: engine.cast(a, np.float64) * a, [(3, 4)], False),
    ("clip_both_bounds", lambda a: engine.clip(a, -0.5, 0.5), [(3, 4)], False),
    ("clip_min_only", lambda a: a.clip(min=0.1), [(3, 4)], False),
    ("clip_tensor_bounds_broadcast", engine.clip, [(3, 4), (4,), (3, 1)], False),
    ("clip_tensor_min_broadcasts_x", lambda a, low: a.clip(min=low), [(4,), (3, 4)], False),
    ("softmax", engine.softmax, [(3, 4)], False),
    ("softmax_axis0", lambda a: engine.softmax(a, axis=0), [(3, 4)], False),
    ("log_softmax", engine.log_softmax, [(3, 4)], False),
    ("reshape", lambda a: a.reshape(4, -1) * 1.0, [(2, 3, 2)], False),
    ("view", lambda a: a.view(a.size(0), -1) * 1.0, [(2, 3, 2)], False),
    ("flatten", lambda a: engine.flatten(a, 1) * 1.0, [(2, 3, 2)], False),
    ("transpose_reverses_axes", engine.transpose, [(2, 3, 4)], False),
    ("transpose_axes", lambda a: a.transpose(1, 2, 0), [(2, 3, 4)], False),
    ("transpose_negative_axes", lambda a: a.transpose(-1, 0, 1), [(2, 3, 4)], False),
    ("transpose_negative_axes_equal_sizes", lambda a: a.transpose((-1, 0, -2)), [(3, 3, 3)],
     False),
    ("T", lambda a: a.T @ a, [(3, 2)], False),
    ("getitem_basic", lambda a: a[1:, ::2], [(3, 4)], False),
    ("getitem_int", lambda a: a[1], [(3, 4)], False),
    ("getitem_repeated_int_array", lambda a: a[[0, 2, 0]], [(3, 4)], False),
    ("getitem_pairs_of_int_arrays", lambda a: a[np.array([0, 1, 1]), [2, 0, 2]], [(3, 4)], False),
    ("getitem_boolean_mask", lambda a: a[np.array([True, False, True])], [(3, 4)], False),
    ("concatenate", lambda a, b: engine.concatenate([a, b], axis=1), [(2, 3), (2, 1)], False),
    ("stack", lambda a, b: engine.stack([a, b], axis=1), [(2, 3), (2, 3)], False),
    ("where_broadcasts", lambda a, b: engine.where(COND, a, b), [(3, 4), (4,)], False),
    ("nll_loss", lambda a: engine.nll_loss(a, TARGET), [(3, 5)], False),
    ("nll_loss_sum", lambda a: F.nll_loss(a, TARGET, reduction="sum"), [(3, 5)], False),
    ("nll_loss_none", lambda a: F.nll_loss(a, TARGET, reduction="none"), [(3, 5)], False),
    ("cross_entropy", lambda a: F.cross_entropy(a, TARGET), [(3, 5)], False),
    ("cross_entropy_one_sample", lambda a: F.cross_entropy(a, 3), [(5,)], False),
    ("mse_loss", lambda a, b: F.mse_loss(a, b), [(3, 2), (3, 2)], False),
    ("l1_loss", lambda a, b: F.l1_loss(a, b, reduction="sum"), [(3, 2), (3, 2)], False),
    ("bce_with_logits", F.binary_cross_entropy_with_logits, [(3, 2), (3, 2)], True),
    ("bce_with_logits_none", lambda a, b: F.binary_cross_entropy_with_logits(
        a * 4.0 - 6.0, b, reduction="none"), [(3, 2), (3, 2)], True),
]


def _inputs(rng, shapes, positive):
    return [leaf64(rng, shape, positive) for shape in shapes]


@pytest.mark.parametrize("fn, shapes, positive", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_op_gradient_matches_finite_differences(fn, shapes, positive, rng):
    assert engine.gradcheck(fn, _inputs(rng, shapes, positive))


def test_gradients_are_reduced_to_each_inputs_shape(rng):
    a, b = leaf64(rng, (3, 1)), leaf64(rng, (4,))
    (a * b).sum().backward()
    assert a.grad.shape == (3, 1) and b.grad.shape == (4,)
    np.testing.assert_allclose(a.grad[:, 0], np.full(3, b.data.sum()))


@pytest.mark.parametrize("fn, expected", [
    (lambda w: engine.matmul([[1.0, 2.0]], w), [[1.0] * 3, [2.0] * 3]),
    (lambda w: engine.matmul(w.T, [1.0, 2.0]), [[1.0] * 3, [2.0] * 3]),
    (lambda w: engine.pow(w, [1.0, 2.0, 3.0]), [[1.0, 2.0, 3.0]] * 2),
    (lambda w: engine.clip(w, [0.0, 0.0, 0.0], 2.0), [[1.0] * 3] * 2),
], ids=["matmul_left", "matmul_right", "pow_exponent", "clip_bound"])
def test_an_operand_given_as_a_list_is_a_constant_in_backward_too(fn, expected):
    w = engine.tensor(np.ones((2, 3)), requires_grad=True)
    fn(w).sum().backward()
    np.testing.assert_array_equal(w.grad, expected)


def test_the_mean_over_an_empty_axis_is_nan_without_warnings_as_in_torch():
    x = engine.zeros(0, 3, dtype=np.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        means = x.mean(axis=0)
        assert means.shape == (3,) and np.isnan(means.data).all()
        assert np.isnan(engine.mean(x).item()) and x.mean(axis=1).shape == (0,)
        (means.sum() + x.mean(axis=1).sum()).backward()
    assert x.grad.shape == (0, 3)


def test_max_splits_the_gradient_evenly_between_ties():
    x = engine.tensor([1.0, 3.0, 3.0], requires_grad=True)
    engine.max(x).backward()
    np.testing.assert_array_equal(x.grad, [0.0, 0.5, 0.5])


def test_relu_has_zero_gradient_at_zero():
    x = engine.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    x.relu().sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 0.0, 1.0])


def test_clip_gives_tensor_bounds_torchs_gradients_at_ties_and_crossed_bounds():
    def leaves(*values):
        return [engine.tensor(v, dtype=engine.float64, requires_grad=True) for v in values]

    # x below low, on low, inside, on high, above high; then low > high, and x == low == high
    x_data = [-1.0, 0.0, 0.5, 1.0, 2.0, 0.0, 1.0]
    low_data = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    high_data = [1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    # torch.clamp's gradients for the same values
    x, low, high = leaves(x_data, low_data, high_data)
    engine.clip(x, low, high).sum().backward()
    np.testing.assert_array_equal(x.grad, [0, 1, 1, 1, 0, 0, 1])
    np.testing.assert_array_equal(low.grad, [1, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(high.grad, [0, 0, 0, 0, 1, 1, 0])
    x, low = leaves(x_data, low_data)
    engine.clip(x, min=low).sum().backward()
    np.testing.assert_array_equal(x.grad, [0, 1, 1, 1, 1, 0, 1])
    np.testing.assert_array_equal(low.grad, [1, 0, 0, 0, 0, 1, 0])
    x, high = leaves(x_data, high_data)
    engine.clip(x, max=high).sum().backward()
    np.testing.assert_array_equal(x.grad, [1, 1, 1, 1, 0, 1, 1])
    np.testing.assert_array_equal(high.grad, [0, 0, 0, 0, 1, 0, 0])


def test_pow_at_a_zero_base_has_torchs_gradients_without_warnings():
    base = engine.tensor([0.0, 0.0, 0.0, 2.0], dtype=engine.float64, requires_grad=True)
    exponent = engine.tensor([2.0, 0.0, 0.5, 0.0], dtype=engine.float64, requires_grad=True)
    scalar_exponent = engine.tensor([0.0, 3.0], dtype=engine.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        (base ** exponent).sum().backward()
        (scalar_exponent ** 0.0).sum().backward()
        (0.0 ** exponent).sum().backward()
    # torch.pow's backward: 0 where the exponent is 0, and for the exponent 0 where the base
    # is 0 and the exponent >= 0; 0.5 * 0 ** -0.5 stays inf
    np.testing.assert_array_equal(base.grad, [0.0, 0.0, np.inf, 0.0])
    np.testing.assert_array_equal(scalar_exponent.grad, [0.0, 0.0])
    np.testing.assert_allclose(exponent.grad, [0.0, 0.0, 0.0, np.log(2.0)])  # both pows add


def _op_names(tensor):
    names, stack, seen = set(), [tensor.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, OpNode):
            names.add(node.op.__name__)
        stack.extend(n for n, _ in node.next_edges)
    return names


def _subclasses(cls: type) -> set:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub.__name__} | _subclasses(sub)
    return found


def test_every_op_has_a_gradient_case(rng):
    covered = set()
    for _, fn, shapes, positive in CASES:
        out = fn(*_inputs(rng, shapes, positive))
        covered |= _op_names(out)
    assert _subclasses(Op) - covered == set()
