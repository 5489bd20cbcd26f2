"""``save`` and ``load`` (torch.save and torch.load's roles): a checkpoint is a pickle.

``load`` reads only what a checkpoint holds unless told otherwise, as torch's
``weights_only=True`` (its default since 2.6): containers, numbers, strings, numpy
arrays and scalars, tensors and parameters. Any other global a file names (a
function, a class, ``os.system`` in a crafted file) raises ``pickle.UnpicklingError``
before anything of it runs. ``weights_only=False`` unpickles anything: only for files
you trust.
"""
from __future__ import annotations

import os
import pickle
from typing import IO, Any, Optional, Union

FileLike = Union[str, os.PathLike, IO[bytes]]

# (module, name) pairs a weights-only load may look up; numpy's are under both its 2.x
# and 1.x module names, so files written with either load.
_ALLOWED = {
    ("collections", "OrderedDict"), ("collections", "Counter"),
    ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "slice"),
    ("builtins", "complex"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
    ("numpy._core.numeric", "_frombuffer"), ("numpy.core.numeric", "_frombuffer"),
    ("engine.tensor", "Tensor"), ("engine.tensor", "_rebuild"),
    ("engine.tensor", "_rebuild_small"), ("engine.nn.parameter", "Parameter"),
}


class _WeightsUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(
                f"Weights only load failed: unsupported global {module}.{name}. A checkpoint "
                f"holds containers, numbers, strings, arrays and tensors; load a file you "
                f"trust with weights_only=False")
        return super().find_class(module, name)


# Protocol 4: numpy writes an array of protocol 5 as a buffer that loads read-only.
_PROTOCOL = 4


def save(obj: Any, f: FileLike) -> None:
    """Pickle `obj` (a ``state_dict()``, a dict of them, ...) to the path or binary file
    `f`."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as file:
            pickle.dump(obj, file, protocol=_PROTOCOL)
    else:
        pickle.dump(obj, f, protocol=_PROTOCOL)


def load(f: FileLike, map_location: Optional[str] = None, *,
         weights_only: bool = True) -> Any:
    """What `save` wrote to the path or binary file `f`.

    With `weights_only` (the default) only the types of a checkpoint are rebuilt (see
    the module docstring); `map_location` may be None or "cpu", the one device here.
    """
    if map_location not in (None, "cpu"):
        raise ValueError(f"map_location={map_location!r}: tensors live on the CPU only, "
                         f"pass None or 'cpu'")
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as file:
            return _unpickle(file, weights_only)
    return _unpickle(f, weights_only)


# torch.save writes a zip archive; pickle would misread its first byte as an opcode
_ZIP_MAGIC = b"PK\x03\x04"


def _unpickle(file: IO[bytes], weights_only: bool) -> Any:
    if file.seekable():
        start = file.tell()
        head = file.read(len(_ZIP_MAGIC))
        file.seek(start)
        if head == _ZIP_MAGIC:
            raise pickle.UnpicklingError(
                "this file is a zip archive, as torch.save writes: engine.load reads the "
                "pickles engine.save writes (convert with torch: load it there and save "
                "its arrays, tensor.numpy(), with engine.save)")
    if not weights_only:
        return pickle.load(file)
    return _WeightsUnpickler(file).load()


__all__ = ["save", "load"]
