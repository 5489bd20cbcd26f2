"""ModuleList and ModuleDict register their modules as torch's do (names, order, keys)."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import nn

pytestmark = pytest.mark.timeout(60)


def Tower(space):  # noqa: N802 - builds the same model class in engine.nn or torch.nn
    class Tower(space.Module):
        def __init__(self):
            super().__init__()
            self.blocks = space.ModuleList([space.Linear(4, 4), space.Linear(4, 4)])
            self.blocks.append(space.Linear(4, 2))
            self.heads = space.ModuleDict({"a": space.Linear(2, 1)})
            self.heads["b"] = space.Linear(2, 3)

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return self.heads["a"](x).sum() + self.heads["b"](x).sum()

    return Tower()


TORCH_KEYS = ["blocks.0.weight", "blocks.0.bias", "blocks.1.weight", "blocks.1.bias",
              "blocks.2.weight", "blocks.2.bias", "heads.a.weight", "heads.a.bias",
              "heads.b.weight", "heads.b.bias"]  # torch 2.13's state_dict keys of Tower


def test_their_parameters_are_registered_under_torchs_keys():
    model = Tower(nn)
    assert list(model.state_dict()) == TORCH_KEYS
    assert len(list(model.parameters())) == 10
    try:
        import torch
    except ImportError:
        return
    assert list(Tower(torch.nn).state_dict()) == TORCH_KEYS


def test_their_modules_train_and_get_gradients(rng):
    model = Tower(nn)
    model.eval()
    assert not any(m.training for m in model.modules())
    model.train()
    model(engine.tensor(rng.standard_normal((3, 4)).astype(np.float32))).backward()
    assert all(p.grad is not None for p in model.parameters())


def test_a_model_saved_from_a_module_list_loads_into_another():
    source, target = Tower(nn), Tower(nn)
    target.load_state_dict(source.state_dict())
    np.testing.assert_array_equal(target.blocks[2].weight.data, source.blocks[2].weight.data)


def test_module_list_indexes_slices_and_renumbers_as_torchs():
    layers = [nn.Linear(1, 1) for _ in range(4)]
    ml = nn.ModuleList(layers[:2])
    ml += [layers[2]]
    ml.insert(0, layers[3])
    assert list(ml) == [layers[3], layers[0], layers[1], layers[2]] and len(ml) == 4
    assert ml[-1] is layers[2] and list(ml[1:3]) == layers[:2]
    del ml[0]
    assert [name for name, _ in ml.named_children()] == ["0", "1", "2"]  # as torch's
    ml[1] = layers[3]
    assert list(ml) == [layers[0], layers[3], layers[2]]
    with pytest.raises(TypeError, match="not a Module"):
        ml.append(engine.zeros(2))


def test_module_dict_is_a_dict_of_modules_whose_keys_never_hide_its_methods():
    md = nn.ModuleDict([("update", nn.Linear(1, 1)), ("keys", nn.ReLU())])
    assert list(md) == ["update", "keys"] and "keys" in md and len(md) == 2
    assert isinstance(md["keys"], nn.ReLU) and callable(md.keys)
    md.update({"c": nn.Tanh()})
    assert [k for k, _ in md.items()] == ["update", "keys", "c"]
    assert isinstance(md.pop("c"), nn.Tanh) and "c" not in md
    del md["keys"]
    assert list(md.keys()) == ["update"]
    with pytest.raises(KeyError, match="without '.'"):
        md["a.b"] = nn.ReLU()
    with pytest.raises(TypeError, match="not a Module"):
        md["x"] = 3
    md.clear()
    assert len(md) == 0 and list(md.parameters()) == []
