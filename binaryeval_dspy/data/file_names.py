"""File names that cannot be stored: paths that are not valid UTF-8.

Run files (manifests, results, reports, pages) are UTF-8 JSON, Markdown and HTML, and they
record the paths of the files a run read and wrote. A name that is not valid UTF-8 (a
Latin-1 ``café`` from an old archive: the byte ``0xE9``) reaches Python as a string with a
lone surrogate (``caf\\udce9``) that no UTF-8 file can hold, so such a path is refused
before anything is written, and shown with the replacement character (``caf\ufffd``) in
the message (`printable_path`). The command line checks every argument this way before a
command starts; the library checks the paths it records (`check_utf8_path`).
"""

from __future__ import annotations

import os
from pathlib import Path

from binaryeval_dspy.errors import InputError

__all__ = ["UTF8_FIX", "check_utf8_path", "is_utf8", "printable_path"]

#: The fix of every refusal of a path that is not valid UTF-8.
UTF8_FIX = ("rename the file or folder (or copy it) under a name that is valid UTF-8 (e.g. with convmv -f latin1 "
            "-t utf-8); run files record paths as UTF-8 text.")


def is_utf8(text: str | os.PathLike[str]) -> bool:
    """True when `text` (a path or an argument) can be written as UTF-8, i.e. it holds no
    undecodable byte (a lone surrogate from the file system's surrogateescape decoding)."""
    try:
        os.fspath(text).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable_path(path: str | os.PathLike[str]) -> str:
    """`path` as text any terminal or UTF-8 file can show: each undecodable byte as U+FFFD."""
    return os.fsencode(os.fspath(path)).decode("utf-8", errors="replace")


def check_utf8_path(path: str | Path, *, what: str = "path") -> None:
    """Refuse a path that is not valid UTF-8, before it is recorded anywhere.

    Args:
        path: the path (as given, or resolved).
        what: what it is, for the message (``"items file"``).

    Raises:
        InputError: `path` holds bytes that are not UTF-8 (the message shows it with
            replacement characters and names the fix).
    """
    if not is_utf8(path):
        raise InputError(f"the {what}'s name is not valid UTF-8 (shown with replacement characters), so no run "
                         "file can record it", path=printable_path(path), fix=UTF8_FIX)
