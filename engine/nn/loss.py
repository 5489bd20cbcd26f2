"""Loss modules, each the module form of a loss in ``engine.nn.functional``, with its
``reduction`` ("mean", "sum" or "none") chosen at construction, as torch's."""
from __future__ import annotations

from typing import Callable

from engine.nn import functional as F
from engine.nn.module import Module
from engine.ops.loss import check_reduction
from engine.tensor import Tensor, TensorLike


class _Loss(Module):
    """Calls ``function(input, target, reduction)``; subclasses name the function."""

    function: Callable[..., Tensor]

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        check_reduction(reduction)  # at construction, not at the first batch
        self.reduction = reduction

    def forward(self, input: TensorLike, target: TensorLike) -> Tensor:  # noqa: A002
        return type(self).function(input, target, reduction=self.reduction)


class MSELoss(_Loss):
    """Mean squared error (``F.mse_loss``)."""

    function = staticmethod(F.mse_loss)


class L1Loss(_Loss):
    """Mean absolute error (``F.l1_loss``)."""

    function = staticmethod(F.l1_loss)


class NLLLoss(_Loss):
    """Negative log-likelihood of class indices given log-probabilities (``F.nll_loss``);
    no class ``weight`` or ``ignore_index``."""

    function = staticmethod(F.nll_loss)


class CrossEntropyLoss(_Loss):
    """Cross entropy of class indices given logits (``F.cross_entropy``); no class
    ``weight``, ``ignore_index`` or ``label_smoothing``."""

    function = staticmethod(F.cross_entropy)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy given logits (``F.binary_cross_entropy_with_logits``); no
    ``weight`` or ``pos_weight``."""

    function = staticmethod(F.binary_cross_entropy_with_logits)


__all__ = ["MSELoss", "L1Loss", "NLLLoss", "CrossEntropyLoss", "BCEWithLogitsLoss"]
