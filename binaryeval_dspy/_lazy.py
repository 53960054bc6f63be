"""Lazy package exports (PEP 562): a package's public names are imported on first use.

A package ``__init__`` lists where each public name lives and hands the table to
`lazy_exports`; ``import binaryeval_dspy`` (or one of its packages) then costs almost
nothing, and a feature's dependencies (DSPy, LiteLLM, scipy, pandas, an optional extra)
load only when a name that needs them is first used. Type checkers and IDEs read the
package's ``if TYPE_CHECKING:`` block of the real imports instead.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_exports(
    package: str, exports: Mapping[str, str], *, submodules: bool = False
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose names load on first use.

    Args:
        package: the package's ``__name__``.
        exports: public name -> the module that defines it (dotted, absolute).
        submodules: also resolve ``package.<name>`` to the subpackage or module of that
            name when `name` is not an export (``binaryeval_dspy.checks``).

    Returns:
        ``(__getattr__, __dir__)``, to be assigned at the package's top level. A resolved
        name is stored in the package's namespace, so later look-ups are plain attribute
        reads.

    Raises (from the returned ``__getattr__``):
        AttributeError: `name` is neither an export nor (with `submodules`) a submodule.
        MissingExtraError and ImportError: as raised by the defining module.
    """

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        namespace = vars(sys.modules[package])
        if module is not None:
            value = getattr(importlib.import_module(module), name)
            namespace[name] = value
            return value
        if submodules and not name.startswith("_"):
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        import pkgutil

        namespace = vars(sys.modules[package])
        names = set(namespace) | set(exports)
        if submodules:
            names |= {m.name for m in pkgutil.iter_modules(namespace.get("__path__", []))}
        return sorted(names)

    return __getattr__, __dir__
