"""``Parameter``: a leaf tensor that a ``Module`` registers as learnable."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.tensor import Tensor


class Parameter(Tensor):
    """A leaf Tensor that requires grad by default and is found by ``Module.parameters()``."""

    __slots__ = ()

    def __init__(self, data: Any, requires_grad: bool = True) -> None:
        array = data.data if isinstance(data, Tensor) else np.asarray(data)
        super().__init__(array)
        self.requires_grad_(requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()
