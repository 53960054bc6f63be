"""The declaration of the pytest plugin's one hook, ``pytest_bineval_lm``, as a plugin of its own.

Installed as its own ``pytest11`` entry point (``bineval-hooks``), beside the plugin
(``bineval``, `binaryeval_dspy.pytest_plugin`): ``pytest -p no:bineval`` switches the
plugin off (no options, fixtures or judged assertions) while a ``conftest.py`` that
implements the hook still loads, its hook declared and never called. Without this
declaration pytest refuses such a ``conftest.py`` ("unknown hook"), so a project could not
turn the plugin off without editing its conftest. Imports nothing but pytest.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["BinEvalHooks", "declare_hooks"]


class BinEvalHooks:
    """The hooks a ``conftest.py`` may implement for the bineval plugin."""

    @staticmethod
    @pytest.hookspec(firstresult=True)
    def pytest_bineval_lm(config: pytest.Config) -> Any:
        """The judge LM for BinEval assertions: an ``--lm`` value (``"openai/gpt-4o-mini"``,
        ``"local"``, a base URL, whose model is ``--bineval-lm-model``), a `dspy.LM`, or an
        `LMHandle`; None to leave the choice to the default (the embedded model).
        ``--bineval-lm`` and ``BINEVAL_LM`` win."""


def declare_hooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Declare `BinEvalHooks` once (this module and the plugin both call it, whichever loads first)."""
    caller = getattr(pluginmanager.hook, "pytest_bineval_lm", None)
    if caller is None or getattr(caller, "spec", None) is None:
        pluginmanager.add_hookspecs(BinEvalHooks)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    declare_hooks(pluginmanager)
