"""Optional dependencies (pip extras) and the one-line error when one is missing.

The core install judges items; four features need more:

* ``ifbench``: IFBench's constraint checkers (nltk with its models from PyPI, emoji, syllapy)
  and the ``language`` code check (langdetect);
* ``bench``: benchmark reports' figures (matplotlib) and the ROUGE-L baseline (rouge-score);
* ``ray``: the Ray engine, requests sent from Ray workers (``ray[data]``);
* ``server``: ``bineval serve``, the embedded model behind llama-cpp-python's
  OpenAI-compatible server (fastapi, uvicorn, ...).

Modules of those features import their dependency through `require`, at the point of use,
so that importing the library never needs them.

Example:
    >>> from binaryeval_dspy.extras import require
    >>> require("json", "ifbench", "IFBench checkers").__name__
    'json'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from binaryeval_dspy.errors import MissingExtraError

EXTRAS: dict[str, str] = {
    "ifbench": "IFBench checkers and the language check",
    "bench": "benchmark figures and the ROUGE-L baseline",
    "ray": "the Ray engine (requests sent from Ray workers)",
    "server": "bineval serve (the embedded model behind an OpenAI-compatible server)",
}
"""Each extra of pyproject.toml that a feature may need, and what it is for."""


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import `module`, or fail with one line naming the extra that provides it.

    Args:
        module: the module to import (``"emoji"``, ``"nltk.tag.perceptron"``, ...).
        extra: the pip extra that installs it (a key of `EXTRAS`).
        feature: what needs it, as the start of a sentence (``"IFBench checkers"``).

    Returns:
        The imported module.

    Raises:
        MissingExtraError: the module cannot be imported; the message says
            ``<feature>: the '<extra>' extra is not installed (no module '<module>'). Fix: pip
            install 'binaryeval-dspy[<extra>]'``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing_extra(module, extra, feature) from exc


def missing_extra(module: str, extra: str, feature: str) -> MissingExtraError:
    """The error `require` raises, for code that finds a missing module another way."""
    return MissingExtraError(
        f"{feature}: the '{extra}' extra is not installed (no module '{module.split('.')[0]}').",
        fix=f"pip install 'binaryeval-dspy[{extra}]'",
    )
