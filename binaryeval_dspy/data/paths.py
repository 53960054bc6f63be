"""Where the benchmark data lives: ``--data-dir``, ``$BINEVAL_DATA_DIR``, else the copy shipped in the package.

The benchmark loaders read the cleaned JSONL files (``summeval/summeval.jsonl``,
``topical_chat/topical_chat.jsonl``, ``qags/qags_{cnndm,xsum}.jsonl``,
``ifbench/IFBench_test.jsonl``). A gzipped copy of each ships inside the package
(``binaryeval_dspy/benchmark_data/<name>.jsonl.gz``, read through
`importlib.resources`; provenance and licences in its ``PROVENANCE.md``), so the
benchmarks work after ``pip install`` with no data folder. A data folder given with
``--data-dir`` / ``data_dir=`` or ``$BINEVAL_DATA_DIR`` replaces the packaged copy;
in a folder, ``<name>.jsonl`` or ``<name>.jsonl.gz`` is accepted. The environment is
read at call time, never at import time, so tests and long-running programs can
change it.
"""

from __future__ import annotations

import atexit
import contextlib
import gzip
import os
import zlib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import IO

from binaryeval_dspy.errors import InputError

DATA_DIR_ENV = "BINEVAL_DATA_DIR"
#: The package holding the shipped data folder, and that folder's name inside it.
PACKAGED_DATA_PACKAGE = "binaryeval_dspy"
PACKAGED_DATA_FOLDER = "benchmark_data"
GZIP_SUFFIX = ".gz"

_extracted = contextlib.ExitStack()  # packaged files copied out of a zip import, removed at exit
atexit.register(_extracted.close)


def default_data_dir() -> Path | None:
    """The benchmark data folder configured by the environment, if any.

    Returns:
        ``$BINEVAL_DATA_DIR`` when set (returned even if it does not exist, so a typo
        gives a clear "not found" error later), else None: the loaders then read the
        data shipped in the package (`packaged_data_file`).
    """
    configured = os.environ.get(DATA_DIR_ENV, "").strip()
    return Path(configured).expanduser() if configured else None


def packaged_data_file(relative: str | Path) -> Path:
    """The shipped, gzipped copy of a benchmark file, as a path on disk.

    Args:
        relative: the file's path inside a data folder (``summeval/summeval.jsonl``);
            the packaged copy is that path plus ``.gz``.

    Returns:
        The ``.jsonl.gz`` file inside the installed package (copied to a temporary
        file, kept until exit, when the package is imported from a zip).

    Raises:
        InputError: the package ships no such file.
    """
    name = Path(relative).as_posix()
    if not name.endswith(GZIP_SUFFIX):
        name += GZIP_SUFFIX
    resource = resources.files(PACKAGED_DATA_PACKAGE) / PACKAGED_DATA_FOLDER
    for part in name.split("/"):
        resource = resource / part
    if not resource.is_file():
        raise InputError(
            f"the package ships no benchmark file {name}", path=f"{PACKAGED_DATA_PACKAGE}/{PACKAGED_DATA_FOLDER}/{name}",
            fix=f"reinstall binaryeval-dspy, or point `data_dir` (or {DATA_DIR_ENV}) at a folder holding {relative}.",
        )
    if isinstance(resource, Path):
        return resource
    return Path(_extracted.enter_context(resources.as_file(resource)))


def _in_folder(folder: Path, relative: str | Path) -> Path | None:
    """``folder/relative`` or its gzipped twin ``folder/relative.gz``, whichever exists first."""
    plain = folder / relative
    for candidate in (plain, plain.with_name(plain.name + GZIP_SUFFIX)):
        if candidate.is_file():
            return candidate
    return None


def resolve_data_file(relative: str | Path, *, path: str | Path | None = None,
                      data_dir: str | Path | None = None) -> Path:
    """The file a benchmark loader should read.

    Resolution order: `path`; else `relative` (or ``relative.gz``) in `data_dir`
    (``--data-dir``); else in ``$BINEVAL_DATA_DIR``; else the copy shipped in the
    package. A file ending in ``.gz`` is read through gzip (`open_data_file`).

    Args:
        relative: the file's path inside the data folder (e.g. ``summeval/summeval.jsonl``).
        path: an explicit file path; wins over everything else.
        data_dir: an explicit data folder (``--data-dir``); wins over the environment.

    Returns:
        An existing file path.

    Raises:
        InputError: the explicit file, or the file in the chosen folder, does not
            exist; the message names the folder searched and how to point at the data.
    """
    if path is not None:
        file = Path(path).expanduser()
        if not file.is_file():
            raise InputError("benchmark file not found", path=file,
                             fix="give the path of the benchmark's JSONL file.")
        return file
    if data_dir is not None:
        folder, origin = Path(data_dir).expanduser(), "`data_dir`"
    else:
        folder, origin = default_data_dir(), f"${DATA_DIR_ENV}"
    if folder is None:
        return packaged_data_file(relative)
    file = _in_folder(folder, relative)
    if file is None:
        raise InputError(
            f"benchmark file not found in the data folder {folder} (set by {origin})", path=folder / relative,
            fix=f"point `data_dir` (or {DATA_DIR_ENV}) at the folder that holds {relative} (or {relative}.gz), "
                f"or unset {DATA_DIR_ENV} to use the data shipped with the package.",
        )
    return file


def _checked_gzip_lines(handle: IO[bytes], path: Path) -> Iterator[bytes]:
    try:
        yield from handle
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise InputError(f"not a readable gzip file ({exc})", path=path,
                         fix="restore the file, or give the uncompressed .jsonl.") from exc


@contextlib.contextmanager
def open_data_file(path: Path) -> Iterator[Iterator[bytes]]:
    """Open a data file for reading its raw lines, through gzip when its name ends in ``.gz``.

    Yields:
        An iterable of the file's lines as bytes.

    Raises:
        InputError: (while iterating) a ``.gz`` file is not valid gzip or is cut short.
    """
    if path.name.lower().endswith(GZIP_SUFFIX):
        with gzip.open(path, "rb") as handle:
            yield _checked_gzip_lines(handle, path)
    else:
        with path.open("rb") as handle:
            yield handle
