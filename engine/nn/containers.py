"""Containers that register the modules they hold: ModuleList and ModuleDict.

Their modules are children under the names torch gives them ("0", "1", ... for a list,
the keys for a dict), so ``parameters()``, ``train()``, ``state_dict()`` and the rest
reach them and the state's keys are torch's (``blocks.0.weight``). They are kept in
``_modules`` alone, never as attributes, so a key such as "keys" or "update" cannot
hide a method.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping, Optional, Tuple, Union

from engine.nn.module import Module, as_module


class ModuleList(Module):
    """A list of modules, each registered as a child named by its index, as torch's.

    It has no ``forward``: iterate over it in the owner's forward.
    """

    def __init__(self, modules: Optional[Iterable[Module]] = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _renumber(self, modules: Iterable[Module]) -> None:
        """Hold exactly `modules`, named "0", "1", ... (torch renumbers after a deletion)."""
        named = [(str(index), as_module(module)) for index, module in enumerate(modules)]
        self._modules.clear()
        self._modules.update(named)

    def append(self, module: Module) -> "ModuleList":
        """Add `module` at the end; returns the list."""
        self._modules[str(len(self))] = as_module(module)
        return self

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        """Add each of `modules` at the end; returns the list."""
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert `module` before position `index`."""
        modules = list(self)
        modules.insert(index, module)
        self._renumber(modules)

    def __getitem__(self, index: Union[int, slice]) -> Any:
        if isinstance(index, slice):
            return ModuleList(list(self)[index])
        return list(self)[index]

    def __setitem__(self, index: int, module: Module) -> None:
        modules = list(self)
        modules[index] = module
        self._renumber(modules)

    def __delitem__(self, index: Union[int, slice]) -> None:
        modules = list(self)
        del modules[index]
        self._renumber(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(list(self._modules.values()))

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)


class ModuleDict(Module):
    """An ordered dict of modules, each registered as a child under its key, as torch's.

    It has no ``forward``: look the modules up in the owner's forward.
    """

    def __init__(self, modules: Optional[Union[Mapping[str, Module],
                                               Iterable[Tuple[str, Module]]]] = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(key, str) or not key or "." in key:
            # a dot would make state_dict keys that name no module
            raise KeyError(f"module name must be a non-empty string without '.', not {key!r}")
        self._modules[key] = as_module(module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._modules))

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> Iterable[str]:
        """The keys, in insertion order."""
        return self._modules.keys()

    def values(self) -> Iterable[Module]:
        """The modules, in insertion order."""
        return self._modules.values()

    def items(self) -> Iterable[Tuple[str, Module]]:
        """(key, module) pairs, in insertion order."""
        return self._modules.items()

    def update(self, modules: Union[Mapping[str, Module], Iterable[Tuple[str, Module]]]
               ) -> None:
        """Add or replace modules from a mapping or from (key, module) pairs."""
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, module in pairs:
            self[key] = module

    def pop(self, key: str) -> Module:
        """Remove the module under `key` and return it."""
        return self._modules.pop(key)

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()


__all__ = ["ModuleList", "ModuleDict"]
