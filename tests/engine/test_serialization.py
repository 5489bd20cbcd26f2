"""save and load: a checkpoint goes round trip; a crafted file runs nothing unless asked."""
from __future__ import annotations

import io
import os
import pickle

import numpy as np
import pytest

import engine
from engine import nn
from engine.optim import Adam, lr_scheduler

pytestmark = pytest.mark.timeout(60)


class _Payload:
    """Unpickling it runs a shell command that creates a file."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return os.system, (f"touch {self.path}",)


def _checkpoint():
    engine.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 40), nn.ReLU(), nn.Linear(40, 2))
    optimizer = Adam(model.parameters(), lr=0.01)
    scheduler = lr_scheduler.MultiStepLR(optimizer, milestones=[1, 1, 3])
    model(engine.ones(4, 3)).sum().backward()
    optimizer.step()
    scheduler.step()
    return model, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                   "scheduler": scheduler.state_dict(), "epoch": 1, "loss": np.float32(0.5),
                   "tensor": engine.tensor([1.0, 2.0]), "bias": model[2].bias}


@pytest.mark.parametrize("to_file", [True, False])
def test_a_checkpoint_goes_round_trip_and_loads_into_a_new_model(tmp_path, to_file):
    model, checkpoint = _checkpoint()
    target = tmp_path / "checkpoint.pt" if to_file else io.BytesIO()
    engine.save(checkpoint, target)
    if not to_file:
        target.seek(0)
    loaded = engine.load(target)
    assert list(loaded["model"]) == list(checkpoint["model"])
    for name, value in checkpoint["model"].items():
        np.testing.assert_array_equal(loaded["model"][name], value)
    assert loaded["optimizer"]["state"][0]["step"] == 1
    assert loaded["scheduler"]["milestones"] == {1: 2, 3: 1}
    assert loaded["epoch"] == 1 and loaded["loss"] == np.float32(0.5)
    assert isinstance(loaded["bias"], nn.Parameter) and loaded["bias"].requires_grad
    assert loaded["tensor"].tolist() == [1.0, 2.0]
    fresh = nn.Sequential(nn.Linear(3, 40), nn.ReLU(), nn.Linear(40, 2))
    fresh.load_state_dict(loaded["model"])
    np.testing.assert_array_equal(fresh[0].weight.data, model[0].weight.data)
    loaded["model"]["0.weight"][0, 0] = 7.0  # writable arrays


def test_a_crafted_file_runs_nothing_and_names_the_global(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps({"weights": _Payload(marker)}, protocol=2))  # torch.save's
    with pytest.raises(pickle.UnpicklingError, match="unsupported global posix.system"):
        engine.load(path)
    assert not marker.exists()
    try:
        import torch
    except ImportError:
        return
    with pytest.raises(pickle.UnpicklingError):  # torch's weights_only default refuses it too
        torch.load(path)
    assert not marker.exists()


def test_weights_only_false_unpickles_anything(tmp_path):
    path = tmp_path / "trusted.pt"
    engine.save({"function": np.mean}, path)
    with pytest.raises(pickle.UnpicklingError, match="numpy.mean"):
        engine.load(path)
    assert engine.load(path, weights_only=False)["function"] is np.mean


def test_map_location_takes_the_cpu_only(tmp_path):
    path = tmp_path / "model.pt"
    engine.save({"a": np.zeros(2)}, path)
    assert engine.load(path, map_location="cpu")["a"].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="CPU only"):
        engine.load(path, map_location="cuda:0")


def test_a_file_torch_saved_is_refused_as_such(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "torch.pt"
    torch.save({"weight": torch.zeros(2)}, path)
    with pytest.raises(pickle.UnpicklingError, match="zip archive, as torch.save writes"):
        engine.load(path)
