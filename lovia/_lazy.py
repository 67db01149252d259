"""Internal: re-exports a package loads on first use (PEP 562 module ``__getattr__``).

A package's ``__init__`` names the attributes it serves lazily and the submodule each lives in;
``lazy_exports`` returns the ``__getattr__`` and ``__dir__`` to assign at module level. The first
access imports the submodule and stores the value in the package's globals, so later lookups are
plain attribute reads. Type checkers see the names through ``if TYPE_CHECKING:`` imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, namespace: dict[str, Any], where: Mapping[str, str], listed: Iterable[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Build ``(__getattr__, __dir__)`` for ``package``.

    ``where`` maps each lazy name to its submodule, relative to ``package`` (``".stores"``);
    ``listed`` is the package's ``__all__``, kept in ``dir()`` alongside what is loaded.
    """
    table = dict(where)
    shown = set(listed)

    def __getattr__(name: str) -> Any:
        module_name = table.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_name, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | shown | set(table))

    return __getattr__, __dir__
