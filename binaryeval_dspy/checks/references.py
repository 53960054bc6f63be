"""Built-in checks on references: referenced paths exist; URLs are well formed.

Both only look: `path_exists` asks the file system whether a path exists (it never
reads or writes a file) and `url_well_formed` parses URLs without any network access
(a well-formed URL may still be dead).
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from binaryeval_dspy.checks.regex_checks import compiled_pattern
from binaryeval_dspy.checks.registry import CheckResult, register_check

# Backticked tokens with a slash that are not URLs or options: `examples/summeval/`, `a/b.py`.
DEFAULT_PATH_PATTERN = r"(?<!`)`([A-Za-z0-9_.~][^`\s]*/[^`\s]*)`(?!`)"
_TRAILING = ".,;:)]}\"'"


class PathExistsParams(BaseModel):
    """Parameters of `path_exists`.

    Attributes:
        pattern: regex finding referenced paths in the text (group 1 if it has
            groups, else the whole match). Default: backticked tokens containing a
            slash, e.g. `` `examples/audit/` ``.
        whole_text: treat the whole (stripped) text as one path instead of searching.
        base_dir: directory relative paths are resolved against; a relative
            base_dir is taken from the current working directory.
        kind: "any", "file" or "dir": what must exist.
        ignore: glob patterns of referenced paths not to check (e.g. ``"runs/*"``
            for outputs that exist only after a run).
        min_found: referenced paths needed for "yes" (default 0: a text that
            references nothing passes).
    """

    model_config = ConfigDict(extra="forbid")

    pattern: str = DEFAULT_PATH_PATTERN
    whole_text: bool = False
    base_dir: str = "."
    kind: Literal["any", "file", "dir"] = "any"
    ignore: list[str] = Field(default_factory=list)
    min_found: int = Field(default=0, ge=0)

    _compiles = field_validator("pattern")(compiled_pattern)


def referenced_paths(text: str, pattern: str) -> list[str]:
    """Distinct paths matched by `pattern` in `text`, in order, trailing punctuation removed."""
    compiled = re.compile(pattern)
    found: list[str] = []
    for match in compiled.finditer(text):
        value = (match.group(1) if compiled.groups else match.group(0)).rstrip(_TRAILING)
        if value and value not in found:
            found.append(value)
    return found


def _exists(path: Path, kind: str) -> bool:
    return path.is_file() if kind == "file" else path.is_dir() if kind == "dir" else path.exists()


@register_check("path_exists", params=PathExistsParams, _builtin=True)
def path_exists(text: str, *, pattern: str, whole_text: bool, base_dir: str, kind: str, ignore: list[str],
                min_found: int) -> CheckResult:
    """Yes when every path the text references exists (and at least `min_found` are referenced)."""
    candidates = [text.strip()] if whole_text else referenced_paths(text, pattern)
    candidates = [c for c in candidates if c and not any(fnmatch.fnmatch(c, g) for g in ignore)]
    base = Path(base_dir).expanduser()
    missing = [c for c in candidates if not _exists(base / Path(c).expanduser(), kind)]
    what = "path" if kind == "any" else kind
    if len(candidates) < min_found:
        return CheckResult(passed=False, evidence=f"{len(candidates)} {what}(s) referenced, {min_found} needed",
                           data={"found": candidates, "missing": missing})
    if missing:
        return CheckResult(
            passed=False,
            evidence=f"{len(missing)} of {len(candidates)} referenced {what}s missing: {', '.join(missing[:8])}",
            data={"found": candidates, "missing": missing},
        )
    if not candidates:
        return CheckResult(passed=True, evidence=f"no referenced {what}s found", data={"found": [], "missing": []})
    return CheckResult(passed=True, evidence=f"all {len(candidates)} referenced {what}s exist: "
                       + ", ".join(candidates[:8]), data={"found": candidates, "missing": []})


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s<>\"'`()\[\]{}]+")
_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


class UrlParams(BaseModel):
    """Parameters of `url_well_formed`.

    Attributes:
        schemes: allowed schemes (lowercase), default http and https.
        whole_text: the whole (stripped) text must be one URL, instead of checking
            every URL found in it.
        min_count: URLs needed for "yes" (default 0: a text without URLs passes).
    """

    model_config = ConfigDict(extra="forbid")

    schemes: list[str] = Field(default_factory=lambda: ["http", "https"], min_length=1)
    whole_text: bool = False
    min_count: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _lower(self) -> UrlParams:
        self.schemes = [s.lower() for s in self.schemes]
        return self


def url_problem(url: str, schemes: list[str]) -> str | None:
    """Why `url` is not a well-formed URL with one of `schemes`, or None if it is."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a bad port
    except ValueError as exc:
        return str(exc)
    if parts.scheme.lower() not in schemes:
        return f"scheme '{parts.scheme}' not in {schemes}"
    host = parts.hostname
    if not host:
        return "no host"
    if port is not None and not 0 < port < 65536:
        return f"port {port} out of range"
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    labels = host.rstrip(".").split(".")
    if not all(_HOST_LABEL.match(label) for label in labels):
        return f"host '{host}' is not a valid host name"
    return None


@register_check("url_well_formed", params=UrlParams, _builtin=True)
def url_well_formed(text: str, *, schemes: list[str], whole_text: bool, min_count: int) -> CheckResult:
    """Yes when every URL in the text is well formed (parsed offline, not fetched)."""
    urls = [text.strip()] if whole_text else list(dict.fromkeys(u.rstrip(".,;:") for u in _URL.findall(text)))
    bad = {u: p for u in urls if (p := url_problem(u, schemes))}
    if len(urls) < min_count:
        return CheckResult(passed=False, evidence=f"{len(urls)} URL(s) found, {min_count} needed",
                           data={"urls": urls, "malformed": list(bad)})
    if bad:
        shown = "; ".join(f"{u[:60]} ({p})" for u, p in list(bad.items())[:5])
        return CheckResult(passed=False, evidence=f"{len(bad)} of {len(urls)} URL(s) malformed: {shown}",
                           data={"urls": urls, "malformed": list(bad)})
    if not urls:
        return CheckResult(passed=True, evidence="no URLs found", data={"urls": [], "malformed": []})
    return CheckResult(passed=True, evidence=f"all {len(urls)} URL(s) well formed", data={"urls": urls, "malformed": []})
