"""A run directory: ``manifest.json`` + append-only ``results.jsonl``, resumable.

Each item's result is appended (and fsynced) as soon as it is done, so an
interrupted run loses at most the item in flight; rerunning the same command reads
what is there and skips it. A line cut short by a crash is detected and trimmed.
One process at a time may write a run (a lock file guards it).

One run directory judges one items file: the manifest records its path, SHA-256 and
size (`ItemsFile`), and a resume compares them (see `RunDirectory.check`):

* same content (same SHA-256), same or another path: resumed (a move is noted);
* the old content is a byte prefix of the new one (rows were appended): resumed, the
  new rows are judged, the manifest records the longer file (noted);
* any other change, or another file: refused, naming both files; start over with
  another ``--out`` or with ``--restart`` (`RunDirectory.set_aside` moves the old
  directory to ``<dir>.old-N``; nothing is deleted);
* a manifest written before the items file was recorded: resumed with a warning (it
  cannot be checked), and the file is recorded from then on.

The items file's identity is computed in `binaryeval_dspy.runs.items_file`, and the
results file is read and written by `binaryeval_dspy.runs.results_file.ResultsFile`.
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

from pydantic import BaseModel

from binaryeval_dspy.data.json_files import read_json_file
from binaryeval_dspy.errors import InputError, RunStateError
from binaryeval_dspy.runs.items_file import appended_to
from binaryeval_dspy.runs.results_file import ResultsFile
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.run_manifest import ItemsFile, RunManifest, RunSession, utc_now
from binaryeval_dspy.settings import LEGACY_CONFIG_KEYS, RunSettings

logger = logging.getLogger(__name__)

__all__ = [
    "FROZEN_QUESTION_SET",
    "LOCK",
    "MANIFEST",
    "RESULTS",
    "RunDirectory",
    "refuse_unrelated_folder",
]

MANIFEST = "manifest.json"
RESULTS = "results.jsonl"
LOCK = ".lock"
FROZEN_QUESTION_SET = "question_set.json"

# Manifest fields that must match for a resume to be valid, with the reason shown.
_MUST_MATCH = {
    "question_set_hash": "the question set changed, so old and new verdicts would not be comparable",
    "lm": "the LM changed, so the run would mix two evaluators",
}
_CONFIG_MUST_MATCH = ("input_field", "output_field", "id_field", "scale", "max_tokens", "aggregation",
                      "pressure_test", "explanations", "adapter")
# What a key absent from an older manifest means (runs made before the key existed).
_CONFIG_DEFAULTS: dict[str, object] = {"aggregation": "score", "pressure_test": "non-pass", "explanations": True}
# Keys compared only when both manifests record them (older runs did not say).
_CONFIG_IF_RECORDED = ("adapter",)


def refuse_unrelated_folder(folder: Path, *, kind: str, marker: str, ignore: tuple[str, ...] = ()) -> None:
    """Refuse to write into an existing, non-empty folder that is not one of our runs.

    Used by every command with an ``--out`` folder (evaluate, benchmark, optimize), so
    that the user's own files are never overwritten or read as results.

    Args:
        folder: the ``--out`` folder (need not exist).
        kind: what a run folder of this command is (``"a run directory"``).
        marker: the file that marks one (``"manifest.json"``).
        ignore: names that may be present anyway (a lock file, a temporary file).

    Raises:
        RunStateError: `folder` holds files other than `ignore` (the first 5 are named).
    """
    if not folder.is_dir():
        return
    unrelated = sorted(p.name for p in folder.iterdir() if p.name not in ignore)
    if unrelated:
        raise RunStateError(
            f"{folder} is not empty and is not {kind} (it holds no {marker}; found {unrelated[:5]}); its files "
            "could be overwritten or taken as results.",
            fix="choose a new or empty `out_dir`.",
        )

class RunDirectory(ResultsFile):
    """Files of one run. Create with a path; `start` writes or checks the manifest.

    Args:
        path: the run directory (created if missing).

    Subclasses may store another pydantic result type by setting `result_model`
    (it needs an ``item_id``); the meta-evaluation baselines do.

    Raises:
        InputError: the path exists and is not a directory.
    """

    result_model: type[BaseModel] = ItemResult

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if str(path).strip() == "":
            raise InputError("the run directory path is empty", fix="pass `out_dir` DIR.")
        if self.path.exists() and not self.path.is_dir():
            raise InputError("exists and is not a directory", path=self.path,
                             fix="choose another `out_dir` for the run directory.")
        self.manifest_path = self.path / MANIFEST
        self.results_path = self.path / RESULTS
        self.frozen_question_set_path = self.path / FROZEN_QUESTION_SET
        self._lock_handle = None
        self.notes: list[str] = []  # what `check` accepted but wants said (a moved or appended items file)

    # ------------------------------------------------------------ locking
    def lock(self) -> None:
        """Take the run's lock (released by `unlock` or at process exit).

        Raises:
            RunStateError: another process holds it, or the directory is not writable.
        """
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            handle = (self.path / LOCK).open("a+")
        except OSError as exc:
            raise RunStateError(f"cannot write the run directory {self.path}: {exc.strerror}.",
                                fix="choose a writable `out_dir`.") from exc
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            handle.close()
            raise RunStateError(f"another process is writing the run in {self.path}.",
                                fix="wait for it to finish, or use another `out_dir`.") from exc
        self._lock_handle = handle

    def unlock(self) -> None:
        """Release the lock taken by `lock` (no-op if not held)."""
        if self._lock_handle is not None:
            fcntl.flock(self._lock_handle.fileno(), fcntl.LOCK_UN)
            self._lock_handle.close()
            self._lock_handle = None

    def set_aside(self) -> Path | None:
        """Start the run over: move the existing run directory to ``<dir>.old-N`` (``--restart``).

        Nothing is deleted: the old manifest, results and frozen question set stay in
        the moved directory. A missing or empty directory needs no move.

        Returns:
            Where the old directory now is, or None when there was nothing to move.

        Raises:
            RunStateError: the directory holds files but is not a run directory (its
                files are not ours to move), or another process is writing it.
        """
        if not self.path.is_dir() or not any(self.path.iterdir()):
            return None
        if not self.manifest_path.is_file() and not self.results_path.is_file():
            refuse_unrelated_folder(self.path, kind="a run directory", marker=MANIFEST, ignore=(LOCK,))
            return None  # only a stale lock file: nothing to keep
        n = 1
        while (target := self.path.with_name(f"{self.path.name}.old-{n}")).exists():
            n += 1
        self.lock()  # refuses while another process writes the run
        try:
            os.rename(self.path, target)
        except OSError as exc:
            raise RunStateError(f"cannot move {self.path} aside to {target}: {exc.strerror}.",
                                fix="move or delete it yourself, or choose another `out_dir`.") from exc
        finally:
            self.unlock()
        return target

    def _note(self, message: str) -> None:
        """Record (once) and log something `check` accepted but the user should know."""
        if message not in self.notes:
            self.notes.append(message)
            logger.warning("note: %s", message)

    def _items_file_to_record(self, existing: RunManifest, manifest: RunManifest) -> ItemsFile | None:
        """The items file a resumed run records, after checking it is the run's own.

        Raises:
            RunStateError: another file, or the same file changed other than by appending.
        """
        old, new = existing.items_file, manifest.items_file
        if new is None:  # this caller records no items file (e.g. the benchmark's method directories)
            return old
        if old is None:
            self._note(f"{self.path} was started before runs recorded their items file, so it cannot be checked "
                       f"that {manifest.items_path} is the file it judged (its manifest names "
                       f"{existing.items_path}); resuming, and recording this file from now on.")
            return new
        if new.sha256 == old.sha256:
            if new.path != old.path:
                self._note(f"the items file moved: {old.path} -> {new.path} (same content, sha256 "
                           f"{new.sha256[:12]}); resuming {self.path}.")
            return new
        if appended_to(old, new):
            moved = f" (the run was started on {old.path})" if new.path != old.path else ""
            self._note(f"{new.path} grew from {old.bytes} to {new.bytes} bytes since {self.path} was started and "
                       f"its first {old.bytes} bytes are unchanged{moved}: rows were appended; resuming, the new "
                       "rows will be judged.")
            return new
        if new.path == old.path:
            what = (f"the items file {new.path} changed since the run in {self.path} was started, and not only by "
                    "rows appended at its end")
        else:
            what = (f"{self.path} holds a run of the items file {old.path}, this command gives another file, "
                    f"{new.path}")
        raise RunStateError(
            f"{what} (then sha256 {old.sha256[:12]}, {old.bytes} bytes; now sha256 {new.sha256[:12]}, "
            f"{new.bytes} bytes). One run directory judges one items file (rows appended to it are accepted), "
            "so the stored results and the new ones would describe different items.",
            fix="choose another `out_dir` for a new run, or rerun with `restart` to start this run over (the old "
                f"directory is moved to {self.path.name}.old-N; nothing is deleted).",
        )

    # ------------------------------------------------------------ manifest
    def read_manifest(self) -> RunManifest | None:
        """The manifest, or None for a new run directory.

        Raises:
            InputError: the manifest exists but is not a valid manifest.
        """
        if not self.manifest_path.is_file():
            return None
        return read_json_file(self.manifest_path, RunManifest, what="run manifest",
                              fix="point `out_dir` at a new directory.")

    def write_manifest(self, manifest: RunManifest) -> None:
        """Write the manifest atomically (temp file + rename)."""
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.manifest_path.with_suffix(".json.tmp")
        tmp.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.manifest_path)

    def start(self, manifest: RunManifest) -> RunManifest:
        """Begin (or resume) a run and record a new session in the manifest.

        Returns the manifest in effect; raises as `check` does.
        """
        current = self.check(manifest)
        current.sessions.append(RunSession(started_at=utc_now()))
        current.finished_at = None
        self.write_manifest(current)
        return current

    def check(self, manifest: RunManifest) -> RunManifest:
        """The manifest a run with `manifest`'s settings would continue, without writing.

        A directory holding a manifest but no results yet may be restarted with other
        settings (nothing would be mixed); one holding results may only be resumed
        with the same question set, LM, field mapping, scale and max_tokens, and the
        same items file when `manifest` records one (``items_file``: same SHA-256, or
        the old bytes a prefix of the new ones; see the module docstring). The resumed
        manifest takes this session's settings and options, except ``limit``: it keeps the
        largest range any session asked (None: every item), since the directory holds them. What was
        accepted but should be said (a moved or appended file, an old manifest that
        recorded no file) is logged as a warning and kept in `notes`.

        Args:
            manifest: the manifest this invocation would write for a new run.

        Returns:
            The manifest in effect (the existing one, when resuming).

        Raises:
            RunStateError: the directory holds results made with other settings or
                from another items file (or one changed other than by appending),
                holds results without a manifest, or holds unrelated files; the
                message says which and how to proceed.
        """
        existing = self.read_manifest()
        has_results = self.results_path.is_file() and self.results_path.stat().st_size > 0
        if existing is None and has_results:
            raise RunStateError(
                f"{self.path} holds {RESULTS} but no {MANIFEST}, so its settings cannot be checked.",
                fix="choose another `out_dir`, or restore the manifest.",
            )
        if existing is None:
            refuse_unrelated_folder(self.path, kind="a run directory", marker=MANIFEST,
                                    ignore=(LOCK, MANIFEST + ".tmp", FROZEN_QUESTION_SET))
        if existing is None or not has_results:
            current = manifest
        else:
            items_file = self._items_file_to_record(existing, manifest)
            for key, why in _MUST_MATCH.items():
                old, new = getattr(existing, key), getattr(manifest, key)
                if old != new:
                    raise RunStateError(
                        f"{self.path} holds a run with {key} {old!r}, this command has {new!r}: {why}.",
                        fix="choose another `out_dir` for a new run, or rerun with the original settings.",
                    )
            for key in _CONFIG_MUST_MATCH:
                default = _CONFIG_DEFAULTS.get(key)
                if (key not in existing.config and key not in _CONFIG_DEFAULTS and key not in _CONFIG_IF_RECORDED
                        and manifest.config.get(key) is not None):  # an edited or damaged manifest, not a mismatch
                    what = "has no `config`" if not existing.config else f"records no {key} in its `config`"
                    raise RunStateError(
                        f"{self.manifest_path} {what}, so the results in {self.path} cannot be checked against "
                        f"this command's {key}={manifest.config.get(key)!r} (the manifest was edited or damaged).",
                        fix="restore the manifest, or choose another `out_dir` for a new run.",
                    )
                old, new = existing.config.get(key, default), manifest.config.get(key, default)
                if key in _CONFIG_IF_RECORDED and (old is None or new is None):
                    continue
                if _norm(old) != _norm(new):
                    raise RunStateError(
                        f"{self.path} holds a run with {key}={old!r}, this command has {key}={new!r}.",
                        fix="choose another `out_dir`, or rerun with the original value.",
                    )
            asked = [config["limit"] for config in (existing.config, manifest.config) if "limit" in config]
            current = existing
            if existing.settings is not None:
                RunSettings.of_manifest(existing, path=self.manifest_path)  # damaged settings are named, not replaced
            if manifest.settings is not None:  # this session's settings; an older manifest's copies in config go
                current.settings = manifest.settings
                current.config = {k: v for k, v in existing.config.items() if k not in LEGACY_CONFIG_KEYS}
            current.config = {**current.config, **{k: v for k, v in manifest.config.items()
                                                    if k not in _CONFIG_MUST_MATCH}}
            if len(asked) == 2:  # the largest range any session asked (None: every item), not the last one's
                current.config["limit"] = None if None in asked else max(int(n) for n in asked)  # type: ignore[call-overload]
            if manifest.items_file is not None:  # the (possibly moved or longer) file this run now judges
                current.items_file, current.items_path = items_file, manifest.items_path
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

    # ------------------------------------------------- frozen question set
    def freeze_question_set(self, question_set: QuestionSet) -> None:
        """Keep a copy of the question set in the run (``question_set.json``), written once.

        `bineval rejudge` re-judges with this frozen copy, so a later edit of the
        user's file cannot silently move the bar.

        Raises:
            RunStateError: a frozen copy with another content hash is already there.
        """
        existing = self.read_frozen_question_set()
        if existing is None:
            self.path.mkdir(parents=True, exist_ok=True)
            tmp = self.frozen_question_set_path.with_suffix(".json.tmp")
            question_set.save(tmp)
            os.replace(tmp, self.frozen_question_set_path)
        elif existing.content_hash != question_set.content_hash:
            raise RunStateError(
                f"{self.frozen_question_set_path} holds a question set with hash {existing.content_hash}, "
                f"this command has {question_set.content_hash}.",
                fix="choose another `out_dir`.",
            )

    def read_frozen_question_set(self) -> QuestionSet | None:
        """The frozen question set of the run, or None for runs made before it was kept.

        Raises:
            QuestionSetError: the copy does not validate (e.g. it names a user check
                that is not registered in this process).
        """
        if not self.frozen_question_set_path.is_file():
            return None
        return QuestionSet.load(self.frozen_question_set_path)


def _norm(value: object) -> object:
    """Compare lists and tuples alike (JSON turns tuples into lists)."""
    if isinstance(value, (list, tuple)):
        return [float(v) if isinstance(v, (int, float)) else v for v in value]
    return value
