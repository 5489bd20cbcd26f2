"""LeakyReLU, Identity, LayerNorm and Embedding: values and gradients against torch's."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import nn
from engine.nn import functional as F
from tests.engine.support import leaf64

pytestmark = pytest.mark.timeout(60)


def test_gradients_match_finite_differences(rng):
    x, w, b = leaf64(rng, (3, 2, 4)), leaf64(rng, (2, 4)), leaf64(rng, (2, 4))
    assert engine.gradcheck(lambda a, g, h: F.layer_norm(a, (2, 4), g, h), [x, w, b])
    assert engine.gradcheck(lambda a: F.layer_norm(a, (4,)), [x])
    assert engine.gradcheck(lambda a: F.leaky_relu(a, 0.2), [x])
    table = leaf64(rng, (5, 3))
    assert engine.gradcheck(lambda t: F.embedding(np.array([[0, 4], [4, 4]]), t), [table])


def _both(module_name, theirs, ours, inputs, grad_inputs=True):
    """Run torch's module `theirs` and `ours`, with torch's parameters, on `inputs`; their
    outputs and every gradient must agree."""
    torch = pytest.importorskip("torch")
    with torch.no_grad():
        for our_param, their_param in zip(ours.parameters(), theirs.parameters()):
            our_param.data[...] = their_param.numpy()
    mine = [engine.tensor(a, requires_grad=grad_inputs and a.dtype.kind == "f")
            for a in inputs]
    other = [torch.tensor(a, requires_grad=grad_inputs and a.dtype.kind == "f")
             for a in inputs]
    seed = np.random.default_rng(5).standard_normal(ours(*mine).shape)
    out, their_out = ours(*mine), theirs(*other)
    (out * seed).sum().backward()
    (their_out * torch.tensor(seed)).sum().backward()
    np.testing.assert_allclose(out.data, their_out.detach().numpy(), rtol=1e-10, atol=1e-12,
                               err_msg=module_name)
    for a, b in zip(mine, other):
        if a.requires_grad:
            np.testing.assert_allclose(a.grad, b.grad.numpy(), rtol=1e-9, atol=1e-12)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad, q.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_layer_norm_is_torchs(rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((3, 2, 4)) * 5 + 2
    for shape in [4, (2, 4)]:
        theirs = torch.nn.LayerNorm(shape, dtype=torch.float64)
        torch.nn.init.normal_(theirs.weight)
        torch.nn.init.normal_(theirs.bias)
        _both("LayerNorm", theirs, nn.LayerNorm(shape, dtype=np.float64), [x])
    ours = nn.LayerNorm(4, elementwise_affine=False)
    assert list(ours.parameters()) == [] and list(nn.LayerNorm(4).state_dict()) == \
        list(torch.nn.LayerNorm(4).state_dict())
    with pytest.raises(ValueError, match="does not end with normalized_shape"):
        nn.LayerNorm(3)(engine.zeros(2, 4))


def test_leaky_relu_and_identity_are_torchs():
    torch = pytest.importorskip("torch")
    x = np.array([-2.0, -0.0, 0.0, 0.5, 3.0])
    _both("LeakyReLU", torch.nn.LeakyReLU(0.1), nn.LeakyReLU(0.1), [x])
    _both("Identity", torch.nn.Identity(), nn.Identity(), [x])


def test_embedding_is_torchs_repeated_rows_included():
    torch = pytest.importorskip("torch")
    theirs = torch.nn.Embedding(6, 3, dtype=torch.float64)
    ours = nn.Embedding(6, 3, dtype=np.float64)
    _both("Embedding", theirs, ours, [np.array([[1, 5, 1], [0, 1, 5]])])
    assert list(ours.state_dict()) == ["weight"] and repr(ours) == "Embedding(6, 3)"
    for bad, error in [(np.array([6]), IndexError), (np.array([-1]), IndexError),
                       (np.array([0.5]), TypeError)]:
        with pytest.raises(error):
            ours(bad)


def test_embedding_starts_standard_normal():
    engine.manual_seed(0)
    weight = nn.Embedding(1000, 50).weight.data
    assert weight.dtype == np.float32
    assert abs(weight.mean()) < 0.01 and abs(weight.std() - 1) < 0.01
