"""A torch training loop, run unchanged on engine and on torch from the same initial
weights: every loss, the accuracy and the learning rates are torch's."""
from __future__ import annotations

import numpy as np
import pytest

import engine

pytestmark = pytest.mark.timeout(120)


def _model_class(nn, F):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.layers = nn.ModuleList([nn.Linear(16, 32), nn.Linear(32, 16)])
            self.heads = nn.ModuleDict({"out": nn.Linear(16, 4)})
            self.dropout = nn.Dropout(0.0)

        def forward(self, x):
            x = self.flatten(x)
            for layer in self.layers:
                x = self.dropout(F.relu(layer(x)))
            return self.heads["out"](x)

    return Net


def _train(torch, optimizer_name, options, scheduler_name, scheduler_options, initial):
    """The loop of a torch script; `torch` is the torch module or engine."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)
    x = rng.standard_normal((96, 1, 4, 4)).astype(np.float32)
    y = (x.reshape(96, -1) @ rng.standard_normal((16, 4))).argmax(1)
    model = _model_class(nn, F)()
    model.load_state_dict({k: torch.tensor(v) for k, v in initial.items()})
    groups = [{"params": model.layers.parameters()},
              {"params": model.heads.parameters(), "lr": options["lr"] / 2}]
    optimizer = getattr(torch.optim, optimizer_name)(groups, **options)
    scheduler = getattr(torch.optim.lr_scheduler, scheduler_name)(optimizer,
                                                                   **scheduler_options)
    criterion = nn.CrossEntropyLoss()
    losses, rates = [], []
    for _ in range(3):
        model.train()
        for start in range(0, 96, 32):
            data, target = torch.tensor(x[start:start + 32]), torch.tensor(y[start:start + 32])
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(data), target)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        rates.append(scheduler.get_last_lr())
        model.eval()
        with torch.no_grad():
            pred = model(torch.tensor(x)).argmax(1)
            correct = pred.eq(torch.tensor(y).view_as(pred)).sum().item()
    return losses, rates, correct


@pytest.mark.parametrize("optimizer_name, options, scheduler_name, scheduler_options", [
    ("SGD", dict(lr=0.2, momentum=0.9, weight_decay=1e-3), "StepLR", dict(step_size=1,
                                                                          gamma=0.5)),
    ("Adam", dict(lr=0.01), "CosineAnnealingLR", dict(T_max=2)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5), "ExponentialLR", dict(gamma=0.8)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01), "LambdaLR", dict(lr_lambda=lambda e: 0.9 ** e)),
])
def test_the_loop_gives_torchs_losses(optimizer_name, options, scheduler_name,
                                      scheduler_options):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    initial = {k: v.numpy() for k, v in
               _model_class(torch.nn, torch.nn.functional)().state_dict().items()}
    ours = _train(engine, optimizer_name, options, scheduler_name, scheduler_options, initial)
    theirs = _train(torch, optimizer_name, options, scheduler_name, scheduler_options, initial)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5)  # float32 rounding
    assert ours[1] == theirs[1] and ours[2] == theirs[2]
