"""engine.nn: Module bookkeeping, layers and losses."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import engine
from engine import nn
from engine.nn import functional as F

pytestmark = pytest.mark.timeout(60)


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Dropout(0.5))
        self.head = nn.Linear(4, 2, bias=False)
        self.scale = nn.Parameter(np.ones(1, dtype=np.float32))

    def forward(self, x):
        return self.head(self.body(x)) * self.scale


def test_named_parameters_follow_registration_order_with_dotted_names():
    names = [name for name, _ in TwoLayer().named_parameters()]
    assert names == ["scale", "body.0.weight", "body.0.bias", "head.weight"]  # torch's order
    assert len(list(TwoLayer().parameters())) == 4


def test_a_shared_parameter_is_listed_once():
    layer = nn.Linear(2, 2)
    model = nn.Sequential(layer, layer)
    assert len(list(model.parameters())) == 2


def test_linear_matches_x_times_weight_transposed_plus_bias_and_torch_init_bounds():
    engine.manual_seed(0)
    layer = nn.Linear(16, 3)
    assert layer.weight.shape == (3, 16) and layer.bias.shape == (3,)
    assert np.abs(layer.weight.data).max() <= 0.25 and layer.weight.dtype == np.float32
    x = engine.randn(5, 16)
    np.testing.assert_allclose(layer(x).data, x.data @ layer.weight.data.T + layer.bias.data,
                               rtol=1e-5)


def test_state_dict_holds_copies_and_load_state_dict_restores_in_place():
    model = TwoLayer()
    saved = model.state_dict()
    weight = model.head.weight
    before = weight.data.copy()
    with engine.no_grad():
        weight.data += 1
    assert not np.allclose(saved["head.weight"], weight.data)
    result = model.load_state_dict(saved)
    assert model.head.weight is weight
    np.testing.assert_array_equal(weight.data, before)
    assert result.missing_keys == [] and result.unexpected_keys == []


def test_load_state_dict_reports_mismatched_keys_and_shapes():
    model = TwoLayer()
    state = model.state_dict()
    del state["scale"]
    with pytest.raises(KeyError, match="scale"):
        model.load_state_dict(state)
    assert model.load_state_dict(state, strict=False).missing_keys == ["scale"]
    state["scale"] = np.ones(3)
    with pytest.raises(ValueError, match="scale"):
        model.load_state_dict(state)


def test_eval_turns_dropout_off_and_train_turns_it_back_on():
    engine.manual_seed(0)
    drop = nn.Dropout(0.5)
    x = engine.ones(10_000)
    out = drop(x).data
    assert 0.45 < (out == 0).mean() < 0.55
    assert set(np.unique(out)) == {0.0, 2.0}
    model = nn.Sequential(drop)
    model.eval()
    assert not drop.training and drop(x) is x
    model.train()
    assert drop.training


def test_activation_modules_apply_their_functions():
    x = engine.tensor([-1.0, 0.5])
    np.testing.assert_allclose(nn.ReLU()(x).data, [0.0, 0.5])
    np.testing.assert_allclose(nn.Tanh()(x).data, np.tanh([-1.0, 0.5]), rtol=1e-6)
    np.testing.assert_allclose(nn.Sigmoid()(x).data, 1 / (1 + np.exp([1.0, -0.5])), rtol=1e-6)


def test_sequential_indexes_and_iterates():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(model) == 3 and isinstance(model[1], nn.ReLU)
    assert isinstance(model[:2], nn.Sequential) and len(model[:2]) == 2
    assert [type(m).__name__ for m in model] == ["Linear", "ReLU", "Linear"]
    assert "(0): Linear(in_features=2, out_features=3, bias=True)" in repr(model)


def test_module_zero_grad_clears_gradients():
    model = nn.Linear(2, 1)
    model(engine.ones(1, 2)).sum().backward()
    assert model.weight.grad is not None
    model.zero_grad()
    assert model.weight.grad is None and model.bias.grad is None


def test_cross_entropy_matches_the_log_softmax_formula():
    logits = np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0]])
    target = np.array([1, 2])
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    expected = -log_p[[0, 1], target].mean()
    np.testing.assert_allclose(F.cross_entropy(engine.tensor(logits), target).item(), expected)
    np.testing.assert_allclose(
        F.cross_entropy(engine.tensor(logits), target, reduction="sum").item(), 2 * expected)


def test_nll_loss_and_mse_loss_values():
    log_p = engine.tensor(np.log([[0.2, 0.8], [0.6, 0.4]]))
    np.testing.assert_allclose(F.nll_loss(log_p, [1, 0]).item(), -np.log([0.8, 0.6]).mean())
    a, b = engine.tensor([1.0, 2.0, 3.0]), engine.tensor([1.0, 0.0, 0.0])
    np.testing.assert_allclose(F.mse_loss(a, b).item(), (0 + 4 + 9) / 3)
    np.testing.assert_allclose(F.mse_loss(a, b, reduction="none").data, [0.0, 4.0, 9.0])


def test_losses_reject_bad_arguments():
    with pytest.raises(TypeError, match="integer"):
        F.nll_loss(engine.zeros(2, 3), np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(engine.zeros(2, 3), [0, 1], reduction="avg")
    with pytest.raises(ValueError, match="same shape"):
        F.mse_loss(engine.zeros(2), engine.zeros(3))


def test_an_empty_batch_has_torchs_losses_and_zero_gradients():
    logits = engine.zeros(0, 3, dtype=np.float64, requires_grad=True)
    target = np.zeros(0, dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mean = F.cross_entropy(logits, target)
        assert np.isnan(mean.item())  # torch: nan
        assert F.cross_entropy(logits, target, reduction="sum").item() == 0.0
        assert F.nll_loss(logits, target, reduction="none").shape == (0,)
        mean.backward()
    assert logits.grad.shape == (0, 3)


@pytest.mark.parametrize("loss", [F.nll_loss, F.cross_entropy])
def test_a_target_whose_shape_does_not_match_the_batch_raises_instead_of_broadcasting(loss):
    logits = engine.zeros(4, 3)
    for target in ([0, 1], [[0], [1], [2], [1]], 1):  # too few, (N, 1), a scalar for N rows
        with pytest.raises(ValueError, match=r"of shape \(4, 3\) take a target of shape \(4,\)"):
            loss(logits, np.array(target))
    with pytest.raises(ValueError, match=r"of shape \(3,\) take a 0-d target"):
        loss(engine.zeros(3), np.array([1]))
    with pytest.raises(ValueError, match=r"\(N, C\) or \(C,\)"):
        F.nll_loss(engine.zeros(2, 3, 2), np.zeros((2, 2), dtype=np.int64))


@pytest.mark.parametrize("loss", [F.nll_loss, F.cross_entropy])
def test_a_target_outside_the_classes_raises_instead_of_indexing_from_the_end(loss):
    logits = engine.zeros(2, 200)
    for target, named in (([1, -1], -1), ([1, 200], 200), ([-5, 300], -5)):
        with pytest.raises(IndexError, match=f"Target {named} is out of bounds"):
            loss(logits, np.array(target))
    with pytest.raises(IndexError, match="Target -100 .*ignore_index .*not supported"):
        loss(logits, np.array([1, -100]))
    with pytest.raises(IndexError, match="Target -1 is out of bounds"):
        loss(engine.zeros(200), -1)


def test_reassigning_or_deleting_a_parameter_updates_the_registry():
    layer = nn.Linear(2, 2)
    layer.bias = None
    assert [name for name, _ in layer.named_parameters()] == ["weight"]
    layer.bias = nn.Parameter(np.zeros(2, dtype=np.float32))
    del layer.weight
    assert [name for name, _ in layer.named_parameters()] == ["bias"]
    with pytest.raises(AttributeError):
        assert layer.weight is None  # never reached: the attribute is gone


def test_assigning_something_else_over_a_parameter_or_a_child_raises_as_in_torch():
    model = nn.Sequential(nn.Linear(2, 2))
    layer = model[0]
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'weight'"):
        layer.weight = engine.ones(2, 2)  # a plain tensor: optimizers would never see it
    with pytest.raises(TypeError, match="cannot assign 'int' as child module '0'"):
        setattr(model, "0", 5)
    assert [name for name, _ in model.named_parameters()] == ["0.weight", "0.bias"]
    layer.weight = nn.Parameter(np.zeros((2, 2), dtype=np.float32))  # a Parameter replaces it
    model.extra = engine.ones(2)  # a new name: a plain attribute
    assert [name for name, _ in model.named_parameters()] == ["0.weight", "0.bias"]  # in place


def test_sequential_takes_an_ordered_dict_of_named_modules_as_torchs_does():
    from collections import OrderedDict

    model = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 3)), ("act", nn.ReLU())]))
    assert len(model) == 2 and model(engine.ones(1, 2)).shape == (1, 3)
    assert list(model.state_dict()) == ["fc.weight", "fc.bias"]  # torch's keys
    assert [name for name, _ in model[1:].named_children()] == ["act"]
    with pytest.raises(TypeError, match="function is not a Module subclass"):
        nn.Sequential(nn.Linear(2, 2), lambda x: x)  # it would be skipped silently
    with pytest.raises(TypeError, match="int is not a Module subclass"):
        nn.Module().add_module("five", 5)
