"""Where the benchmark data lives: ``--data-dir``, ``$BINEVAL_DATA_DIR`` or a shared folder.

The benchmark loaders read the cleaned JSONL copies described in the data folder's
README (``summeval/summeval.jsonl``, ``topical_chat/topical_chat.jsonl``,
``qags/qags_{cnndm,xsum}.jsonl``). The environment is read at call time, never at
import time, so tests and long-running programs can change it.
"""

from __future__ import annotations

import os
from pathlib import Path

from binaryeval_dspy.errors import InputError

DATA_DIR_ENV = "BINEVAL_DATA_DIR"
SHARED_DATA_DIRS = ("../shared/data", "/work/shared/data")


def default_data_dir() -> Path | None:
    """The benchmark data folder to use when none is given.

    Resolution order: ``$BINEVAL_DATA_DIR`` when set (returned even if it does not
    exist, so a typo gives a clear "not found" error later), else the first existing
    folder among ``../shared/data`` (relative to the current directory) and
    ``/work/shared/data``.

    Returns:
        The folder, or None when nothing is set and no shared folder exists.
    """
    configured = os.environ.get(DATA_DIR_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    for candidate in SHARED_DATA_DIRS:
        path = Path(candidate)
        if path.is_dir():
            return path.resolve()
    return None


def resolve_data_file(relative: str | Path, *, path: str | Path | None = None,
                      data_dir: str | Path | None = None) -> Path:
    """The file a benchmark loader should read.

    Args:
        relative: the file's path inside the data folder (e.g. ``summeval/summeval.jsonl``).
        path: an explicit file path; wins over everything else.
        data_dir: an explicit data folder (``--data-dir``); wins over `default_data_dir`.

    Returns:
        An existing file path.

    Raises:
        InputError: no data folder can be found, or the file is not in it; the
            message names the folder searched and how to point at the data.
    """
    if path is not None:
        file = Path(path).expanduser()
        if not file.is_file():
            raise InputError("benchmark file not found", path=file,
                             fix="give the path of the benchmark's JSONL file.")
        return file
    folder = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
    if folder is None:
        raise InputError(
            f"no benchmark data folder: ${DATA_DIR_ENV} is not set and none of "
            f"{', '.join(SHARED_DATA_DIRS)} exists",
            fix=f"pass --data-dir (or data_dir=) pointing at the folder holding {relative}, "
                f"or set {DATA_DIR_ENV}.",
        )
    file = folder / relative
    if not file.is_file():
        raise InputError(
            f"benchmark file not found in the data folder {folder}", path=file,
            fix=f"point --data-dir (or {DATA_DIR_ENV}) at the folder that holds {relative}.",
        )
    return file
