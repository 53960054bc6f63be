"""Loading user check modules named on the command line (``--checks-module``).

A checks module is an ordinary Python file (or importable module) whose functions are
decorated with `register_check`; importing it registers them. It runs with the
user's permissions like any script, so it is only ever imported when the user names
it explicitly: question-set files and run manifests can name checks, never modules.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from binaryeval_dspy.errors import InputError


def module_fingerprint(spec: str) -> str | None:
    """16 hex characters of SHA-256 of a checks module file's bytes (None for dotted names)."""
    path = Path(spec)
    if path.suffix == ".py" and path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return None


def load_checks_module(spec: str) -> ModuleType:
    """Import a checks module so its `register_check` functions become available.

    Args:
        spec: a path to a ``.py`` file, or a dotted module name importable from
            ``sys.path`` (e.g. ``mypackage.checks``).

    Returns:
        The imported module. Importing the same file again runs it again; its
        checks replace their earlier registration (same module, same names).

    Raises:
        InputError: the file is missing, or importing it failed (the message names
            the file and the error).
    """
    path = Path(spec)
    if spec.endswith(".py") or path.exists():
        if not path.is_file():
            raise InputError("checks module not found", path=path,
                             fix="pass the path of a .py file that registers checks with @register_check.")
        resolved = path.resolve()
        name = "binaryeval_user_checks_" + hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
        module_spec = importlib.util.spec_from_file_location(name, resolved)
        if module_spec is None or module_spec.loader is None:
            raise InputError("cannot be imported as a Python module", path=path,
                             fix="give a .py file that defines check functions.")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:  # the user's code can raise anything; report it with the file named
            sys.modules.pop(name, None)
            raise InputError(f"importing the checks module failed: {type(exc).__name__}: {exc}", path=path,
                             fix="run `python FILE` to see the full traceback and correct the module.") from exc
        return module
    try:
        return importlib.import_module(spec)
    except Exception as exc:  # ImportError, or whatever the module raises while importing
        raise InputError(f"checks module {spec!r} could not be imported: {type(exc).__name__}: {exc}",
                         fix="give a .py path or a module importable from the current environment.") from exc
