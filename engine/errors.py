"""Exceptions raised by the engine.

Every error the engine raises on purpose derives from ``AutogradError`` (itself a
``RuntimeError``, as torch's autograd errors are), or is a plain ``TypeError`` /
``ValueError`` for a bad argument.
"""
from __future__ import annotations


class AutogradError(RuntimeError):
    """A backward pass could not run as asked."""


class GraphFreedError(AutogradError):
    """A node's saved arrays were freed by an earlier backward (retain_graph=False)."""


class GradientShapeError(AutogradError, ValueError):
    """A gradient does not fit the tensor it belongs to."""


class GradcheckError(AutogradError):
    """Analytical and numerical gradients disagree (see ``engine.gradcheck``)."""
