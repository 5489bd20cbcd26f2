"""Learning-rate schedulers: the rates of every epoch, and their state, against torch's."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.optim import SGD, lr_scheduler

pytestmark = pytest.mark.timeout(60)

SCHEDULES = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.5)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=4, eta_min=0.001)),  # 14 epochs: down, up, down
    ("LambdaLR", dict(lr_lambda=lambda epoch: 1.0 / (1 + epoch))),
]


def _groups(space):
    """Two parameter groups with different rates, in engine or in torch."""
    if space is engine:
        a, b = engine.nn.Parameter(np.zeros(2)), engine.nn.Parameter(np.zeros(1))
        return SGD([{"params": [a]}, {"params": [b], "lr": 0.01}], lr=0.1, momentum=0.9)
    a, b = space.zeros(2, requires_grad=True), space.zeros(1, requires_grad=True)
    return space.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.01}], lr=0.1,
                           momentum=0.9)


def _rates(space, name, kwargs, epochs=14, set_at=None):
    optimizer = _groups(space)
    scheduler = getattr(space.optim.lr_scheduler, name)(optimizer, **kwargs)
    rates = [scheduler.get_last_lr()]
    for epoch in range(epochs):
        optimizer.step()
        if epoch == set_at:  # a rate set by hand, which the recursive rules take up
            optimizer.param_groups[0]["lr"] = 0.05
        scheduler.step()
        rates.append(scheduler.get_last_lr())
        assert rates[-1] == [group["lr"] for group in optimizer.param_groups]
    return rates


@pytest.mark.parametrize("name, kwargs", SCHEDULES, ids=[s[0] for s in SCHEDULES])
@pytest.mark.parametrize("set_at", [None, 4])
def test_every_epochs_rates_are_torchs_to_the_last_bit(name, kwargs, set_at):
    torch = pytest.importorskip("torch")
    assert _rates(engine, name, kwargs, set_at=set_at) == _rates(torch, name, kwargs,
                                                                 set_at=set_at)


def test_cosine_annealing_gives_torchs_numbers():
    # torch 2.13: CosineAnnealingLR(T_max=4, eta_min=0.001), the group of lr 0.1
    expected = [0.1, 0.0855017856687341, 0.0505, 0.0154982143312659, 0.001,
                0.015498214331265896, 0.05050000000000001, 0.08550178566873413,
                0.10000000000000003]
    rates = _rates(engine, "CosineAnnealingLR", dict(T_max=4, eta_min=0.001), epochs=8)
    assert [group_rates[0] for group_rates in rates] == expected


@pytest.mark.parametrize("name, kwargs", SCHEDULES, ids=[s[0] for s in SCHEDULES])
def test_a_schedule_resumed_from_its_state_dict_goes_on_as_torchs(name, kwargs):
    optimizer = _groups(engine)
    scheduler = getattr(lr_scheduler, name)(optimizer, **kwargs)
    for _ in range(5):
        optimizer.step()
        scheduler.step()
    saved, saved_optimizer = scheduler.state_dict(), optimizer.state_dict()
    assert "optimizer" not in saved and saved["last_epoch"] == 5 and saved["_step_count"] == 6
    resumed_optimizer = _groups(engine)
    resumed_optimizer.load_state_dict(saved_optimizer)
    resumed = getattr(lr_scheduler, name)(resumed_optimizer, **kwargs)
    resumed.load_state_dict(saved)
    for _ in range(6):
        for opt, sched in ((optimizer, scheduler), (resumed_optimizer, resumed)):
            opt.step()
            sched.step()
        assert resumed.get_last_lr() == scheduler.get_last_lr()
    try:
        import torch
    except ImportError:
        return
    theirs = getattr(torch.optim.lr_scheduler, name)(_groups(torch), **kwargs).state_dict()
    assert set(saved) <= set(theirs)  # torch's keys (it has two flags more)


def test_multi_step_lr_gives_torchs_numbers():
    rates = _rates(engine, "MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.5), epochs=10)
    # torch 2.13: halved at epoch 2, quartered at 5 (listed twice), halved at 9
    assert [r[0] for r in rates] == [0.1, 0.1, 0.05, 0.05, 0.05, 0.0125, 0.0125, 0.0125,
                                     0.0125, 0.00625, 0.00625]


def test_lambda_lr_saves_a_callable_objects_state_and_not_a_function():
    class Warmup:
        def __init__(self):
            self.length = 3

        def __call__(self, epoch):
            return min(1.0, (epoch + 1) / self.length)

    optimizer = _groups(engine)
    scheduler = lr_scheduler.LambdaLR(optimizer, [Warmup(), lambda epoch: 0.5])
    assert scheduler.get_last_lr() == pytest.approx([0.1 / 3, 0.005])
    state = scheduler.state_dict()
    assert state["lr_lambdas"] == [{"length": 3}, None]
    state["lr_lambdas"][0]["length"] = 5
    scheduler.load_state_dict(state)
    assert scheduler.lr_lambdas[0].length == 5
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        lr_scheduler.LambdaLR(optimizer, [lambda epoch: 1.0])


def test_resuming_with_last_epoch_needs_the_optimizers_initial_rates():
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.StepLR(_groups(engine), step_size=2, last_epoch=3)
    with pytest.raises(TypeError, match="is not an Optimizer"):
        lr_scheduler.StepLR(object(), step_size=2)


METRICS = [1.0, 0.9, 0.95, 0.9, 0.91, 0.89999, 0.92, 0.5, 0.6, 0.6, 0.6, 0.6, 0.49, 0.7, 0.7,
           0.7, 0.7, 0.7, 0.7]
# torch 2.13's rates of the group of lr 0.1 under PLATEAUS[1] (patience 2, cooldown 1)
EXPECTED_PLATEAU = [0.1] * 5 + [0.010000000000000002] * 6 + [0.0010000000000000002] * 5 + \
    [0.00010000000000000003] * 4
PLATEAUS = [dict(), dict(patience=2, cooldown=1), dict(patience=1, factor=0.5, min_lr=0.02),
            dict(mode="max", threshold_mode="abs", threshold=0.05, patience=0),
            dict(patience=0, min_lr=[0.05, 0.0], eps=1e-3),
            dict(patience=1, threshold=0.1, threshold_mode="rel")]


def _plateau_rates(space, options, as_tensor=False):
    optimizer = _groups(space)
    scheduler = space.optim.lr_scheduler.ReduceLROnPlateau(optimizer, **options)
    rates = [scheduler.get_last_lr()]
    for metric in METRICS:
        optimizer.step()
        scheduler.step(engine.tensor(metric, dtype=np.float64) if as_tensor else metric)
        rates.append(scheduler.get_last_lr())
    return rates, scheduler


@pytest.mark.parametrize("options", PLATEAUS, ids=[str(o) for o in PLATEAUS])
def test_reduce_on_plateau_gives_torchs_rates(options):
    torch = pytest.importorskip("torch")
    ours, scheduler = _plateau_rates(engine, options)
    theirs, their_scheduler = _plateau_rates(torch, options)
    assert ours == theirs
    state, their_state = scheduler.state_dict(), their_scheduler.state_dict()
    assert set(state) <= set(their_state)
    assert {k: state[k] for k in ("best", "num_bad_epochs", "cooldown_counter",
                                  "last_epoch")} == \
        {k: their_state[k] for k in ("best", "num_bad_epochs", "cooldown_counter",
                                     "last_epoch")}


def test_reduce_on_plateau_gives_torchs_numbers():
    rates, _ = _plateau_rates(engine, PLATEAUS[1], as_tensor=True)  # loss.item() not needed
    assert [r[0] for r in rates] == EXPECTED_PLATEAU


def test_reduce_on_plateau_refuses_what_torch_refuses():
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        lr_scheduler.ReduceLROnPlateau(_groups(engine), factor=1.0)
    with pytest.raises(ValueError, match="mode best is unknown"):
        lr_scheduler.ReduceLROnPlateau(_groups(engine), mode="best")
    with pytest.raises(ValueError, match="expected 2 min_lrs, got 1"):
        lr_scheduler.ReduceLROnPlateau(_groups(engine), min_lr=[0.1])
