"""A module imported on its first use, for the few heavy libraries the server's start does not need.

`memloci serve` answers `tools/list` without touching numpy: only a search, an embedding or a
consolidation does. A module that needs numpy writes

    if TYPE_CHECKING:
        import numpy as np
    else:
        np = on_first_use("numpy", globals(), "np")

and uses `np` as before. The first attribute read imports numpy and puts the real module in the
importing module's globals under that name, so every later use is a plain global lookup (no
cost on hot paths). tests/test_start_imports.py checks that the start stays free of it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class ModuleOnFirstUse:
    """Stands in for a module until an attribute of it is read; then it is the module itself."""

    def __init__(self, module: str, namespace: dict[str, Any], name: str) -> None:
        self._module, self._namespace, self._name = module, namespace, name

    def loaded(self) -> ModuleType:
        module = importlib.import_module(self._module)
        if self._namespace.get(self._name) is self:  # from now on the importer sees the module itself
            self._namespace[self._name] = module
        return module

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.loaded(), attribute)

    def __repr__(self) -> str:
        return f"<{self._module}, imported on first use>"


def on_first_use(module: str, namespace: dict[str, Any], name: str) -> Any:
    """`module`, imported when an attribute of it is first read (see the module's docstring)."""
    return ModuleOnFirstUse(module, namespace, name)
