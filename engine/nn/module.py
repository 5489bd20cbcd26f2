"""``Module``: the base of layers and models, registering parameters and sub-modules.

Assigning a ``Parameter`` or a ``Module`` to an attribute registers it, in order, as
in torch (and keeps it as a plain attribute too, for fast access; always assign or
``del`` through the attribute so both stay in step). Over a registered name, None
unregisters it and anything else of the wrong kind raises TypeError, as in torch.
``state_dict()`` returns *copies* of the parameter arrays (so a saved state does not
change as training goes on); ``load_state_dict`` copies values into the existing
arrays in place, so optimizers holding the parameters keep working.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Set, Tuple

import numpy as np

from engine.nn.parameter import Parameter
from engine.ops.methods import names_the_cpu
from engine.tensor import Tensor


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(strict=False)`` did not match (torch's ``IncompatibleKeys``).

    `missing_keys`: parameters the state lacked; `unexpected_keys`: state entries that
    name no parameter.
    """

    missing_keys: List[str]
    unexpected_keys: List[str]


class Module:
    """Base class for layers and models: override ``forward``; call the module to run it."""

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The module's computation, which calling the module runs; every subclass overrides it."""
        raise NotImplementedError(f"{type(self).__name__} does not define forward")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # -- registration ---------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"call Module.__init__() before assigning {name!r}")
        params, modules = self._parameters, self._modules
        if isinstance(value, Parameter):
            modules.pop(name, None)
            params[name] = value  # a replaced parameter keeps its place, as in torch
        elif isinstance(value, Module):
            params.pop(name, None)
            modules[name] = value
        elif name in params or name in modules:
            if value is not None:  # it would silently leave parameters() and state_dict()
                kind, expected = (("parameter", "Parameter") if name in params
                                  else ("child module", "Module"))
                raise TypeError(f"cannot assign {type(value).__name__!r} as {kind} "
                                f"{name!r} ({expected} or None expected)")
            params.pop(name, None)
            modules.pop(name, None)
        # Also a plain attribute, so ``self.weight`` is a normal (fast) lookup.
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Optional[Parameter]) -> None:
        """Register ``param`` under ``name`` (None removes it)."""
        if param is None:
            if name in self._parameters:
                delattr(self, name)
        else:
            setattr(self, name, param)

    def add_module(self, name: str, module: "Module") -> None:
        """Register ``module`` as a child under ``name``; TypeError for anything else, as
        torch (an attribute of another type would not be a child)."""
        setattr(self, name, as_module(module))

    # -- traversal ------------------------------------------------------------------
    def named_children(self) -> Iterator[Tuple[str, "Module"]]:
        """(name, module) for each direct child, in registration order."""
        yield from self._modules.items()

    def children(self) -> Iterator["Module"]:
        """Each direct child module, in registration order."""
        for _, module in self.named_children():
            yield module

    def named_modules(self, prefix: str = "") -> Iterator[Tuple[str, "Module"]]:
        """This module and every descendant, each once, depth first."""
        seen: Set[int] = set()
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            children = [(f"{name}.{n}" if name else n, m) for n, m in module._modules.items()]
            stack.extend(reversed(children))

    def modules(self) -> Iterator["Module"]:
        """This module and every descendant, each once, depth first."""
        for _, module in self.named_modules():
            yield module

    def named_parameters(self, prefix: str = "", recurse: bool = True
                         ) -> Iterator[Tuple[str, Parameter]]:
        """(dotted name, parameter) pairs in registration order, each parameter once."""
        seen: Set[int] = set()
        modules = self.named_modules(prefix) if recurse else iter([(prefix, self)])
        for module_name, module in modules:
            for name, param in module._parameters.items():
                if id(param) not in seen:
                    seen.add(id(param))
                    yield (f"{module_name}.{name}" if module_name else name), param

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every parameter, each once, in registration order (with `recurse`, the descendants'
        too)."""
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def apply(self, fn: Callable[["Module"], Any]) -> "Module":
        """Call ``fn`` on every descendant, children before their parent, then on this
        module (torch's order, for initialising weights); returns the module."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def to(self, device: str) -> "Module":
        """torch's ``to`` for the device "cpu", where every parameter lives: returns the
        module. Another device, or a dtype (which would leave an optimizer's state in the
        old one), is a ValueError."""
        if not names_the_cpu(device):
            raise ValueError(f"Module.to({device!r}): the parameters live on the CPU only, "
                             f"and a module's dtype is chosen when its layers are made")
        return self

    def cpu(self) -> "Module":
        """Returns the module: every parameter lives on the CPU."""
        return self

    # -- modes and gradients --------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Set training mode (affects Dropout) on this module and its descendants."""
        for module in self.modules():
            object.__setattr__(module, "training", bool(mode))
        return self

    def eval(self) -> "Module":
        """Switch to evaluation mode (``train(False)``: Dropout becomes the identity); returns the
        module."""
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient (``grad = None``, or zero it in place)."""
        for param in self.parameters():
            if set_to_none:
                param.grad = None
            elif param.grad is not None:
                param.grad.fill(0)

    # -- state ----------------------------------------------------------------------
    def state_dict(self) -> "OrderedDict[str, np.ndarray]":
        """Copies of every parameter array, by dotted name."""
        return OrderedDict((name, param.data.copy()) for name, param in self.named_parameters())

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True
                        ) -> IncompatibleKeys:
        """Copy ``state_dict``'s arrays into the parameters, in place.

        With ``strict``, missing or unexpected keys raise ``KeyError``; a shape
        mismatch always raises ``ValueError``.
        """
        params: Dict[str, Parameter] = dict(self.named_parameters())
        missing = [name for name in params if name not in state_dict]
        unexpected = [name for name in state_dict if name not in params]
        if strict and (missing or unexpected):
            raise KeyError(f"state_dict mismatch: missing {missing}, unexpected {unexpected}")
        for name, param in params.items():
            if name not in state_dict:
                continue
            value = state_dict[name]
            value = np.asarray(value.data if isinstance(value, Tensor) else value)
            if value.shape != param.shape:
                raise ValueError(
                    f"{name}: state_dict holds shape {value.shape}, parameter has {param.shape}"
                )
            np.copyto(param.data, value, casting="same_kind")
        return IncompatibleKeys(missing, unexpected)

    # -- display --------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside the parentheses of the module's repr, such as a layer's sizes; empty by
        default."""
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(module).replace("\n", "\n  ")
                 for name, module in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


def as_module(module: Any) -> Module:
    """`module`, checked to be a Module: TypeError for anything else, as torch."""
    if not isinstance(module, Module):
        raise TypeError(f"{type(module).__name__} is not a Module subclass")
    return module
