"""Loss modules and the losses they call, values and gradients against torch's."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import nn
from engine.nn import functional as F

pytestmark = pytest.mark.timeout(60)

LOGITS = np.array([[0.5, -1.0, 2.0], [1000.0, -1000.0, 0.0]])
PROBABILITIES = np.array([[1.0, 0.0, 0.25], [0.0, 1.0, 0.5]])


def _run(module, *arrays):
    inputs = [engine.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = module(*inputs)
    out.sum().backward()
    return out.data, [x.grad for x in inputs if x.requires_grad]


def _cases(rng):
    regression = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    classes = rng.standard_normal((5, 4)), rng.integers(0, 4, 5)
    return [
        ("MSELoss", regression),
        ("L1Loss", regression),
        ("CrossEntropyLoss", classes),
        ("NLLLoss", (np.log(rng.dirichlet(np.ones(4), 5)), classes[1])),
        ("BCEWithLogitsLoss", (LOGITS, PROBABILITIES)),
        ("BCEWithLogitsLoss", (rng.standard_normal(6) * 3, rng.random(6))),
    ]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_each_loss_module_gives_torchs_values_and_gradients(reduction, rng):
    torch = pytest.importorskip("torch")
    for name, arrays in _cases(rng):
        ours, our_grads = _run(getattr(nn, name)(reduction=reduction), *arrays)
        theirs, their_grads = _run_torch(torch, getattr(torch.nn, name)(reduction=reduction),
                                         *arrays)
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12, err_msg=name)
        for mine, other in zip(our_grads, their_grads):
            np.testing.assert_allclose(mine, other, rtol=1e-12, atol=1e-12, err_msg=name)


def _run_torch(torch, module, *arrays):
    inputs = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = module(*inputs)
    out.sum().backward()
    return out.detach().numpy(), [x.grad.numpy() for x in inputs if x.requires_grad]


def test_bce_with_logits_is_finite_for_large_logits_with_torchs_numbers():
    loss, (grad_logits, grad_target) = _run(nn.BCEWithLogitsLoss(reduction="none"),
                                            LOGITS, PROBABILITIES)
    # torch 2.13, float64: BCEWithLogitsLoss(reduction="none") and its gradients
    np.testing.assert_allclose(loss, [[0.474076984180107, 0.313261687518223,
                                       1.626928011042972],
                                      [1000.0, 1000.0, 0.693147180559945]], rtol=1e-12)
    np.testing.assert_allclose(grad_logits, [[-0.377540668798145, 0.268941421369995,
                                              0.630797077977882], [1.0, -1.0, 0.0]],
                               rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(grad_target, -LOGITS)


def test_the_loss_modules_are_the_functional_losses_with_their_reduction(rng):
    x, y = engine.tensor(rng.standard_normal((3, 4))), engine.tensor([0, 3, 1])
    assert nn.CrossEntropyLoss()(x, y).item() == F.cross_entropy(x, y).item()
    assert nn.CrossEntropyLoss(reduction="none")(x, y).shape == (3,)
    assert nn.NLLLoss(reduction="sum")(x, y).item() == F.nll_loss(x, y, "sum").item()
    assert repr(nn.MSELoss()) == "MSELoss()"
    assert list(nn.MSELoss().parameters()) == []


def test_a_loss_refuses_an_unknown_reduction_at_construction_and_torch_only_options():
    with pytest.raises(ValueError, match="reduction must be one of"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="reduction must be one of"):
        F.binary_cross_entropy_with_logits(engine.zeros(2), engine.zeros(2), "avg")
    with pytest.raises(TypeError):
        nn.CrossEntropyLoss(label_smoothing=0.1)
    with pytest.raises(TypeError):
        nn.BCEWithLogitsLoss(pos_weight=engine.ones(3))


def test_bce_with_logits_and_l1_take_one_shape_only():
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(engine.zeros(4, 1), engine.zeros(4))
    with pytest.raises(ValueError, match="must have the same shape"):
        F.l1_loss(engine.zeros(4, 1), engine.zeros(4))
