"""A run directory: ``manifest.json`` + append-only ``results.jsonl``, resumable.

Each item's result is appended (and fsynced) as soon as it is done, so an
interrupted run loses at most the item in flight; rerunning the same command reads
what is there and skips it. A line cut short by a crash is detected and trimmed.
"""

from __future__ import annotations


import os
from pathlib import Path

from pydantic import BaseModel, ValidationError

from binaryeval_dspy.errors import InputError, RunStateError
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.run_manifest import RunManifest, RunSession, utc_now

MANIFEST = "manifest.json"
RESULTS = "results.jsonl"

# Manifest fields that must match for a resume to be valid, with the reason shown.
_MUST_MATCH = {
    "question_set_hash": "the question set changed, so old and new verdicts would not be comparable",
    "lm": "the LM changed, so the run would mix two evaluators",
}
_CONFIG_MUST_MATCH = ("input_field", "output_field", "id_field", "scale")


class RunDirectory:
    """Files of one run. Create with a path; `start` writes or checks the manifest.

    Args:
        path: the run directory (created if missing).

    Subclasses may store another pydantic result type by setting `result_model`
    (it needs an ``item_id``); the meta-evaluation baselines do.
    """

    result_model: type[BaseModel] = ItemResult

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.manifest_path = self.path / MANIFEST
        self.results_path = self.path / RESULTS

    # ------------------------------------------------------------ manifest
    def read_manifest(self) -> RunManifest | None:
        """The manifest, or None for a new run directory.

        Raises:
            InputError: the manifest exists but is not a valid manifest.
        """
        if not self.manifest_path.is_file():
            return None
        try:
            return RunManifest.model_validate_json(self.manifest_path.read_text(encoding="utf-8"))
        except ValidationError as exc:
            raise InputError(f"not a valid run manifest: {exc.errors()[0]['msg']}", path=self.manifest_path,
                             fix="point --out at a new directory.") from exc

    def write_manifest(self, manifest: RunManifest) -> None:
        """Write the manifest atomically (temp file + rename)."""
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.manifest_path.with_suffix(".json.tmp")
        tmp.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.manifest_path)

    def start(self, manifest: RunManifest) -> RunManifest:
        """Begin (or resume) a run and record a new session in the manifest.

        Args:
            manifest: the manifest this invocation would write for a new run.

        Returns:
            The manifest in effect (the existing one, when resuming).

        Raises:
            RunStateError: the directory holds a run made with another question set,
                LM, field mapping or scale; the message says which and how to proceed.
        """
        existing = self.read_manifest()
        if existing is None:
            current = manifest
        else:
            for key, why in _MUST_MATCH.items():
                old, new = getattr(existing, key), getattr(manifest, key)
                if old != new:
                    raise RunStateError(
                        f"{self.path} holds a run with {key} {old!r}, this command has {new!r}: {why}. "
                        "Fix: choose another --out for a new run, or rerun with the original settings."
                    )
            for key in _CONFIG_MUST_MATCH:
                old, new = existing.config.get(key), manifest.config.get(key)
                if _norm(old) != _norm(new):
                    raise RunStateError(
                        f"{self.path} holds a run with {key}={old!r}, this command has {key}={new!r}. "
                        "Fix: choose another --out, or rerun with the original value."
                    )
            current = existing
            current.config = {**existing.config, **{k: v for k, v in manifest.config.items()
                                                     if k not in _CONFIG_MUST_MATCH}}
        current.sessions.append(RunSession(started_at=utc_now()))
        current.finished_at = None
        self.write_manifest(current)
        return current

    def finish(self, manifest: RunManifest, *, items_done: int, interrupted: bool) -> RunManifest:
        """Close the current session (finish time, items done, whether interrupted)."""
        session = manifest.sessions[-1]
        session.finished_at = utc_now()
        session.items_done = items_done
        session.interrupted = interrupted
        if not interrupted:
            manifest.finished_at = session.finished_at
        self.write_manifest(manifest)
        return manifest

    # ------------------------------------------------------------- results
    def read_results(self, *, repair: bool = True) -> list[ItemResult]:
        """All stored item results, in file order; a truncated last line is trimmed.

        Args:
            repair: trim a truncated last line from the file (the default, for the
                process that owns the run). Readers that may run beside a live run
                (reports) pass False: the fragment is only skipped, never cut.

        Raises:
            InputError: a complete line in the middle of the file is not a valid
                result (names the file and line; nothing is deleted).
        """
        if not self.results_path.is_file():
            return []
        raw = self.results_path.read_bytes()
        lines = raw.split(b"\n")
        results: list[ItemResult] = []
        keep_bytes = 0
        for number, line in enumerate(lines, start=1):
            is_last = number == len(lines)
            if not line.strip():
                keep_bytes += len(line) + (0 if is_last else 1)
                continue
            try:
                results.append(self.result_model.model_validate_json(line))
            except ValidationError as exc:
                if is_last:  # the write was cut short: drop the fragment, keep the rest
                    if repair:
                        self._truncate(keep_bytes)
                    break
                raise InputError(
                    f"not a valid item result ({exc.errors()[0]['msg']})", path=self.results_path, line=number,
                    fix="move the damaged line out of the file; the other results are kept.",
                ) from exc
            keep_bytes += len(line) + (0 if is_last else 1)
        return results

    def _truncate(self, size: int) -> None:
        with self.results_path.open("r+b") as handle:
            handle.truncate(size)

    def append(self, result: ItemResult) -> None:
        """Append one result as a JSON line and fsync it."""
        self.path.mkdir(parents=True, exist_ok=True)
        with self.results_path.open("a", encoding="utf-8") as handle:
            handle.write(result.model_dump_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def rewrite_results(self, results: list[ItemResult]) -> None:
        """Replace results.jsonl atomically (used when re-judging replaces items)."""
        tmp = self.results_path.with_suffix(".jsonl.tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            for r in results:
                handle.write(r.model_dump_json() + "\n")
        os.replace(tmp, self.results_path)


def _norm(value: object) -> object:
    """Compare lists and tuples alike (JSON turns tuples into lists)."""
    if isinstance(value, (list, tuple)):
        return [float(v) if isinstance(v, (int, float)) else v for v in value]
    return value


