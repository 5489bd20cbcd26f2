"""``Tensor``: a numpy array plus what autograd needs to differentiate through it.

A tensor is a *leaf* when ``grad_fn`` is None (created by the user, or by an op
that did not record a graph); a leaf with ``requires_grad`` receives gradients in
``.grad``.  A non-leaf was produced by an op while grad mode was on and an input
required grad; its ``grad_fn`` is the backward ``Node`` of that op and
``output_nr`` says which of the node's outputs it is.

Arithmetic operators and math methods (``+``, ``@``, ``.sum()``, ``.T``...) are
attached by ``engine.ops.methods`` next to the ops they call.  Tensors hash by
identity; ``==`` and the other comparisons are elementwise and return tensors of
bools, as in torch.
"""
from __future__ import annotations

import weakref
from typing import Any, Optional, Sequence, Union

import numpy as np

from engine.autograd.backward import backward as _run_backward
from engine.autograd.graph import AccumulateGrad, Edge, Node
from engine.autograd.grad_mode import grad_state
from engine.errors import AutogradError

ndarray = np.ndarray


class Tensor:
    """A numpy array with an autograd history (see the module docstring)."""

    __slots__ = ("data", "grad", "requires_grad", "grad_fn", "output_nr", "_accumulator",
                 "post_accumulate_grad_hooks", "__weakref__")
    __array_ufunc__ = None  # ndarray <op> Tensor defers to Tensor's reflected operator
    __hash__ = object.__hash__

    def __init__(
        self,
        data: Any,
        requires_grad: bool = False,
        grad_fn: Optional[Node] = None,
        output_nr: int = 0,
    ) -> None:
        self.data: np.ndarray = data if data.__class__ is ndarray else np.asarray(data)
        self.grad: Optional[np.ndarray] = None
        self.requires_grad = requires_grad
        self.grad_fn = grad_fn
        self.output_nr = output_nr
        self._accumulator: Optional[weakref.ref] = None
        # Called with this tensor once a backward pass has accumulated its .grad.
        self.post_accumulate_grad_hooks: Optional[list] = None

    # -- metadata -------------------------------------------------------------------
    @property
    def is_leaf(self) -> bool:
        """True unless an op that recorded a graph produced this tensor."""
        return self.grad_fn is None

    @property
    def shape(self) -> tuple:
        """The shape of the data, a tuple (torch's is a ``torch.Size``)."""
        return self.data.shape

    def size(self, dim: Optional[int] = None) -> Union[tuple, int]:
        """The shape, or its length along ``dim`` (negative counts from the end), as
        torch's ``size()``."""
        if dim is None:
            return self.data.shape
        return self.data.shape[dim]

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of the data."""
        return self.data.dtype

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return self.data.ndim

    def numel(self) -> int:
        """Number of elements."""
        return self.data.size

    def __len__(self) -> int:
        return len(self.data)

    # -- conversion -----------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The underlying array (shared, not copied)."""
        return self.data

    def item(self) -> Union[float, int, bool]:
        """The value of a one-element tensor as a Python number."""
        return self.data.item()

    def tolist(self) -> Any:
        """The data as nested Python lists (a Python number for a 0-d tensor), as torch's."""
        return self.data.tolist()

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        if dtype is None and not copy:
            return self.data
        return np.array(self.data, dtype=dtype, copy=True)

    def __bool__(self) -> bool:
        return bool(self.data)

    def __float__(self) -> float:
        return float(self.data.item())

    def __int__(self) -> int:
        return int(self.data.item())

    def __format__(self, spec: str) -> str:
        # f"{loss:.4f}" formats a 0-d tensor's value, as torch's __format__ does
        if self.data.ndim == 0:
            return format(self.data.item(), spec)
        return object.__format__(self, spec)

    # -- autograd -------------------------------------------------------------------
    def backward(self, gradient: Any = None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf that requires grad.

        ``gradient`` (same shape as self) is required unless self has one element.
        Without ``retain_graph`` the graph's saved arrays are freed afterwards.
        """
        _run_backward([self], None if gradient is None else [gradient], retain_graph)

    def detach(self) -> "Tensor":
        """A new leaf sharing this tensor's data, outside any graph."""
        return Tensor(self.data)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Set ``requires_grad`` on a leaf (floating-point dtypes only); returns self."""
        if self.grad_fn is not None:
            raise AutogradError("requires_grad can only be changed on leaf tensors")
        if requires_grad and self.data.dtype.kind not in "fc":
            raise TypeError(f"only floating-point tensors can require grad, not {self.dtype}")
        self.requires_grad = bool(requires_grad)
        return self

    def zero_(self) -> "Tensor":
        """Fill the data with zeros in place (see ``_check_in_place``)."""
        self._check_in_place()
        self.data.fill(0)
        return self

    def _check_in_place(self, value: Any = None) -> None:
        """In-place writes are allowed only where no graph would be recorded: there are
        no version counters to protect arrays a graph has saved, and no node to carry the
        gradient of a written `value` that requires grad (torch records one)."""
        if not grad_state.enabled:
            return
        if self.requires_grad:
            raise AutogradError(
                "in-place operations on a tensor that requires grad are not recorded; use "
                "the out-of-place form, engine.no_grad(), or set .grad = None to clear a grad"
            )
        if isinstance(value, Tensor) and value.requires_grad:
            raise AutogradError(
                "in-place operations are not recorded, and this one writes a tensor that "
                "requires grad, whose gradient would be lost; build the result out of place "
                "(engine.stack, engine.concatenate, engine.where, +), or write value.detach()"
            )

    def register_post_accumulate_grad_hook(self, hook: Any) -> "HookHandle":
        """Call ``hook(tensor)`` each time a backward pass has accumulated this leaf's
        ``.grad`` (torch's name); returns a handle whose ``remove()`` unregisters it."""
        if self.grad_fn is not None:
            raise AutogradError("post-accumulate-grad hooks can only be registered on leaves")
        if not self.requires_grad:  # no gradient ever reaches it: the hook would never run
            raise AutogradError("cannot register a hook on a tensor that doesn't require "
                                "gradient")
        if not callable(hook):
            raise TypeError(f"hook must be callable, got {type(hook).__name__}")
        if self.post_accumulate_grad_hooks is None:
            self.post_accumulate_grad_hooks = []
        self.post_accumulate_grad_hooks.append(hook)
        return HookHandle(self.post_accumulate_grad_hooks, hook)

    def _grad_accumulator(self) -> AccumulateGrad:
        ref = self._accumulator
        node = ref() if ref is not None else None
        if node is None:
            node = AccumulateGrad(self)
            self._accumulator = weakref.ref(node)
        return node

    def _edge(self) -> Edge:
        """Where this tensor's gradient goes in the backward graph (``gradient_edge``)."""
        fn = self.grad_fn
        if fn is not None:
            return (fn, self.output_nr)
        return (self._grad_accumulator(), 0)

    # -- python protocols -----------------------------------------------------------
    def __repr__(self) -> str:
        body = np.array2string(self.data, separator=", ", prefix="tensor(")
        extras = [body]
        if self.data.dtype != np.float32:
            extras.append(f"dtype={self.data.dtype}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return f"tensor({', '.join(extras)})"

    def __reduce__(self) -> tuple:
        # Pickling keeps data and requires_grad, never the graph (it arrives as a leaf).
        data = self.data
        if data.nbytes < _SMALL_BYTES and data.dtype.kind in "biufc":
            # Raw bytes: half the time of numpy's own reduction for a small array.
            return (_rebuild_small, (type(self), data.tobytes(), data.dtype.str, data.shape,
                                     self.requires_grad))
        return (_rebuild, (type(self), data, self.requires_grad))


# Arrays below this pickle as raw bytes; larger ones keep numpy's reduction, whose
# buffer can travel out of band (as its own message frame).
_SMALL_BYTES = 1024


class HookHandle:
    """Removes one registered hook."""

    __slots__ = ("_hooks", "_hook")

    def __init__(self, hooks: list, hook: Any):
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


def _rebuild(cls: type, data: np.ndarray, requires_grad: bool) -> Tensor:
    return cls(data, requires_grad=requires_grad)


def _rebuild_small(cls: type, raw: bytes, dtype: str, shape: tuple,
                   requires_grad: bool) -> Tensor:
    data = np.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)  # writable
    return cls(data, requires_grad=requires_grad)


TensorLike = Union[Tensor, np.ndarray, float, int, Sequence[Any]]
