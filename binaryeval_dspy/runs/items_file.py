"""The items file a run judged: its identity (path, SHA-256, size) and whether rows were appended.

A run manifest records its items file as an `ItemsFile` (`items_file_identity`);
`binaryeval_dspy.runs.run_directory.RunDirectory.check` resumes a run only on the same
content, or on the old content with rows appended (`appended_to`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from binaryeval_dspy.data.file_names import check_utf8_path
from binaryeval_dspy.schemas.run_manifest import ItemsFile

_HASH_CHUNK = 1 << 20


def _sha256_of(path: Path, limit: int | None = None) -> str:
    """SHA-256 (hex) of the file's bytes, or of its first `limit` bytes."""
    digest = hashlib.sha256()
    left = limit
    with path.open("rb") as handle:
        while left is None or left > 0:
            chunk = handle.read(_HASH_CHUNK if left is None else min(_HASH_CHUNK, left))
            if not chunk:
                break
            digest.update(chunk)
            if left is not None:
                left -= len(chunk)
    return digest.hexdigest()


def items_file_identity(path: str | Path) -> ItemsFile:
    """What a run manifest records about its items file: resolved path, SHA-256 of the bytes, size.

    Args:
        path: the items file (``.jsonl`` or ``.csv``) as given on the command line.

    Returns:
        An `ItemsFile` (``sha256``: 64 hex characters; ``bytes``: size >= 0).

    Raises:
        OSError: the file cannot be read (callers load the items first, which reports
            a missing file as an `InputError` naming it).
        InputError: the resolved path is not valid UTF-8 (`check_utf8_path`).
    """
    file = Path(path)
    resolved = file.resolve()
    check_utf8_path(resolved, what="items file")  # also a UTF-8 name reached through a folder or link that is not
    return ItemsFile(path=str(resolved), sha256=_sha256_of(file), bytes=file.stat().st_size)


def appended_to(old: ItemsFile, new: ItemsFile) -> bool:
    """True when the file now at ``new.path`` starts with exactly the bytes `old` recorded."""
    if new.bytes <= old.bytes:
        return False
    try:
        return _sha256_of(Path(new.path), old.bytes) == old.sha256
    except OSError:
        return False
