"""BinEval in a test suite: the ``bineval_judge`` fixture and `assert_bineval` (docs/pytest.md).

Installed with the package as a ``pytest11`` entry point, and off unless used: loading it
adds three command-line options and one hook, and imports nothing heavy (DSPy, the LM
and the question set are loaded by the first judged assertion). A test writes::

    from binaryeval_dspy.pytest_plugin import assert_bineval

    def test_summary(summary):
        assert_bineval(summary, questions="my_questions.json", input=ARTICLE, min_score=0.8)

or asks for the ``bineval_judge`` fixture and calls it the same way. Each call judges
the output with BinEval, stores the run under ``.bineval/pytest/<test id>/`` (a run
directory `bineval view` shows, with the judged texts beside it in ``items.jsonl``),
and fails the test when:

* an answer is unparsed or its LM call failed (its own message: the score would be over
  fewer questions, so it is never a silent pass), or the output is empty;
* the overall yes-rate is below ``min_score`` (the message lists every question answered
  "no" with its explanation).

The judge LM comes from, first to last: ``--bineval-lm``, the ``BINEVAL_LM`` environment
variable, a ``pytest_bineval_lm(config)`` hook in a ``conftest.py`` (returning an
``--lm`` value, a `dspy.LM` or an `LMHandle`), else the embedded model (``local``). A
base URL takes its model from ``--bineval-lm-model`` / ``BINEVAL_LM_MODEL`` and its key's
variable from ``--bineval-api-key-env`` / ``BINEVAL_API_KEY_ENV``; an error about the LM
names these options. DSPy's response cache answers a rerun of an unchanged test with no
LM call; ``--bineval-no-cache`` turns it off for the session.

``pytest -p no:bineval`` switches the plugin off; the hook's declaration is a plugin of its
own (`binaryeval_dspy.pytest_hooks`, entry point ``bineval-hooks``), so a conftest that
implements it still loads. A session whose judge LM cannot be built leaves nothing on
disk: the LM is built before a test's run folder is made, and every folder the plugin
makes is marked as its own, so the next session replaces whatever an interrupted one left.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from binaryeval_dspy.lm.factory import LMHandle
    from binaryeval_dspy.schemas.item_result import ItemResult
    from binaryeval_dspy.schemas.question_set import QuestionSet

__all__ = ["API_KEY_ENV_ENV", "LM_ENV", "LM_MODEL_ENV", "RUNS_FOLDER", "BinEvalCheck", "BinEvalJudge",
           "assert_bineval"]

#: the environment variable naming the judge LM (an ``--lm`` value)
LM_ENV = "BINEVAL_LM"
#: the environment variable naming the model served at a base URL given as the judge LM
LM_MODEL_ENV = "BINEVAL_LM_MODEL"
#: the environment variable naming the variable that holds a base URL's API key
API_KEY_ENV_ENV = "BINEVAL_API_KEY_ENV"
#: the file that marks a test's run folder as the plugin's own (written first, so a folder an
#: interrupted session left half made is replaced by the next one, never in the way)
FOLDER_MARK = ".bineval-pytest-run"
#: how this plugin's options and variables spell the LM factory's parameter names in messages
#: (`make_lm`'s errors say "`model`"; a pytest user sets --bineval-lm-model or $BINEVAL_LM_MODEL)
PLUGIN_FLAGS = {"spec": f"--bineval-lm (or ${LM_ENV})", "model": f"--bineval-lm-model (or ${LM_MODEL_ENV})",
                "api_key_env": f"--bineval-api-key-env (or ${API_KEY_ENV_ENV})"}
#: where each judged assertion's run is stored, relative to pytest's root directory
RUNS_FOLDER = ".bineval/pytest"
DEFAULT_MIN_SCORE = 0.8


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from binaryeval_dspy.pytest_hooks import declare_hooks

    declare_hooks(pluginmanager)  # also when the bineval-hooks plugin is not loaded (-p binaryeval_dspy.pytest_plugin)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bineval", "BinEval judged assertions (binaryeval-dspy)")
    group.addoption("--bineval-lm", default=None, metavar="LM",
                    help=f"judge LM of assert_bineval / bineval_judge: any `bineval --lm` value (default: ${LM_ENV}, "
                         "a conftest pytest_bineval_lm hook, else the embedded model)")
    group.addoption("--bineval-lm-model", default=None, metavar="NAME",
                    help=f"the model served at a base URL given as the judge LM (default: ${LM_MODEL_ENV})")
    group.addoption("--bineval-api-key-env", default=None, metavar="VAR",
                    help="the environment variable holding a base URL's API key (default: "
                         f"${API_KEY_ENV_ENV}; none for a server without keys)")
    group.addoption("--bineval-no-cache", action="store_true", default=False,
                    help="do not answer judge calls from DSPy's response cache (on by default: an unchanged test "
                         "costs nothing on a rerun)")
    group.addoption("--bineval-runs", default=RUNS_FOLDER, metavar="DIR",
                    help=f"folder of the stored runs, relative to the root directory (default {RUNS_FOLDER})")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_JUDGE] = BinEvalJudge(config)


_JUDGE = pytest.StashKey["BinEvalJudge"]()
_CURRENT: list[pytest.Config] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Remember the running test's config (fixtures included), so `assert_bineval` needs no fixture."""
    _CURRENT.append(item.config)
    try:
        return (yield)
    finally:
        _CURRENT.pop()


@dataclass
class BinEvalCheck:
    """What one judged assertion found.

    Attributes:
        result: the stored item result (verdicts, score card, status).
        question_set: the questions asked.
        run_dir: the run directory (``bineval view RUN_DIR`` shows it).
        lm: the judge LM's name.
        min_score: the bar the overall yes-rate had to reach.
        problems: why the assertion failed ("" when it passed).
    """

    result: ItemResult
    question_set: QuestionSet
    run_dir: Path
    lm: str
    min_score: float
    problems: list[str] = field(default_factory=list)

    @property
    def score(self) -> float | None:
        """The overall yes-rate in [0, 1] (None when no answer was yes or no)."""
        card = self.result.score_card
        return card.overall if card is not None else None

    @property
    def failed(self) -> list[tuple[str, str, str]]:
        """(question id, question text, explanation) of every question answered "no"."""
        texts = {q.id: q.text for q in self.question_set.questions}
        return [(v.question_id, texts.get(v.question_id, ""), v.explanation)
                for v in self.result.verdicts if v.verdict == "no"]

    @property
    def passed(self) -> bool:
        return not self.problems

    def message(self) -> str:
        """The failure message: what went wrong, the "no" answers with explanations, the run."""
        lines = [f"BinEval ({self.lm}): " + "; ".join(self.problems)]
        if self.failed:
            lines.append('Questions answered "no":')
            lines += [f"  - {qid}: {text}\n      because: {why or '(no explanation)'}"
                      for qid, text, why in self.failed]
        lines.append(f"Run stored in {self.run_dir} (bineval view {self.run_dir})")
        return "\n".join(lines)


class BinEvalJudge:
    """Judges outputs for the tests of one pytest session (one LM, made on first use).

    Call it as `assert_bineval` (same arguments); it is the ``bineval_judge`` fixture.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._handle: LMHandle | None = None
        self._calls: dict[str, int] = {}

    # ------------------------------------------------------------ the LM
    def lm_spec(self) -> Any:
        """The judge LM as configured: option, environment, conftest hook, else ``"local"``."""
        return self.lm_choice()[0]

    def lm_choice(self) -> tuple[Any, str]:
        """The judge LM as configured and where it came from, as messages name it:
        ``--bineval-lm``, ``$BINEVAL_LM``, the ``pytest_bineval_lm`` hook, or the default."""
        if self.config.getoption("bineval_lm"):
            return self.config.getoption("bineval_lm"), "--bineval-lm"
        if os.environ.get(LM_ENV):
            return os.environ[LM_ENV], f"${LM_ENV}"
        hooked = self.config.hook.pytest_bineval_lm(config=self.config)
        if hooked is not None and not (isinstance(hooked, str) and not hooked.strip()):
            return hooked, "the pytest_bineval_lm hook's value"
        return "local", "the default judge LM"

    def lm_model(self) -> str | None:
        """The model served at a base URL: ``--bineval-lm-model``, else ``BINEVAL_LM_MODEL``."""
        return self.config.getoption("bineval_lm_model") or os.environ.get(LM_MODEL_ENV) or None

    def api_key_env(self) -> str | None:
        """The variable holding a base URL's key: ``--bineval-api-key-env``, else ``BINEVAL_API_KEY_ENV``."""
        return self.config.getoption("bineval_api_key_env") or os.environ.get(API_KEY_ENV_ENV) or None

    def handle(self) -> LMHandle:
        """The session's `LMHandle` (made on first use, with DSPy's cache unless turned off).

        Raises:
            LMConfigError: the LM cannot be built; the message names this plugin's options
                and variables (`PLUGIN_FLAGS`), never an option pytest does not have.
        """
        if self._handle is None:
            import dspy

            from binaryeval_dspy.cli.error_handling import with_flag_names
            from binaryeval_dspy.errors import BinEvalError, LMConfigError
            from binaryeval_dspy.lm import factory

            spec, source = self.lm_choice()
            cache = not self.config.getoption("bineval_no_cache")
            if isinstance(spec, factory.LMHandle):
                handle = spec
            elif isinstance(spec, dspy.BaseLM):
                handle = factory.LMHandle(lm=spec, adapter=None, name=str(getattr(spec, "model", spec)),
                                          embedded=False)
            elif not isinstance(spec, str):  # only the hook can give anything but text
                raise LMConfigError(f"the judge LM cannot be built: {source} is not an LM",
                                    expected="an --lm value (a str such as 'openai/gpt-4o-mini'), a dspy.LM or an "
                                             "LMHandle, or None for the default",
                                    received=f"{spec!r} ({type(spec).__name__})",
                                    fix="return one of those from pytest_bineval_lm in your conftest.py.")
            else:
                flags = {**PLUGIN_FLAGS, "spec": source}
                try:
                    handle = factory.make_lm(spec, model=self.lm_model(), api_key_env=self.api_key_env(),
                                             cache=cache)
                except BinEvalError as exc:
                    # from None: the test report shows this message only, not make_lm's own wording
                    raise LMConfigError(f"the judge LM cannot be built: {with_flag_names(str(exc), flags)}"
                                        ) from None
            if not cache and hasattr(handle.lm, "cache"):
                handle.lm.cache = False
            self._handle = handle
        return self._handle

    # ------------------------------------------------------------ judging
    def _run_dir(self, test_id: str) -> Path:
        """The folder of this call's stored run, emptied of an earlier session's run of it.

        Raises:
            pytest.UsageError: something that is not the plugin's own is in the way (a file
                where the folder goes, files the plugin does not write, an unmarked folder
                whose ``run/manifest.json`` is not a pytest run); nothing is deleted then.
        """
        n = self._calls[test_id] = self._calls.get(test_id, 0) + 1
        base = run_folder_name(test_id)
        folder = Path(self.config.rootpath) / self.config.getoption("bineval_runs") / (
            base if n == 1 else f"{base}-{n}")
        _clear_own_folder(folder)
        return folder

    def __call__(self, output: str, *, questions: str | Path | QuestionSet, input: str = "",
                 min_score: float = DEFAULT_MIN_SCORE, test_id: str | None = None) -> BinEvalCheck:
        """Judge `output` and fail the test (AssertionError) unless it passes.

        Args:
            output: the text to judge.
            questions: a question-set file (relative paths from the current directory)
                or a `QuestionSet`.
            input: what the output answers (task, source document); "" when none.
            min_score: the overall yes-rate in [0, 1] the output must reach.
            test_id: the folder name of the stored run (default: the running test's id).

        Returns:
            The `BinEvalCheck` (score, verdicts, run directory) of a passing output.

        Raises:
            AssertionError: an answer was unparsed or its call failed, the output was
                empty, or the score is below `min_score` (message: the "no" questions
                with their explanations, and the stored run).
            InputError / QuestionSetError: the question set file is missing or invalid.
        """
        __tracebackhide__ = True  # pytest shows the test's line, not the plugin's
        check = self.judge(output, questions=questions, input=input, min_score=min_score, test_id=test_id)
        if not check.passed:
            raise AssertionError(check.message())
        return check

    def judge(self, output: str, *, questions: str | Path | QuestionSet, input: str = "",
              min_score: float = DEFAULT_MIN_SCORE, test_id: str | None = None) -> BinEvalCheck:
        """As calling the judge, without failing: the `BinEvalCheck`, its ``problems`` set."""
        from binaryeval_dspy.data.items import load_items
        from binaryeval_dspy.programs.bineval import BinEval
        from binaryeval_dspy.runs.evaluation import evaluate_items
        from binaryeval_dspy.runs.items_file import items_file_identity
        from binaryeval_dspy.runs.run_directory import RunDirectory
        from binaryeval_dspy.schemas.question_set import QuestionSet
        from binaryeval_dspy.schemas.run_manifest import RunManifest
        from binaryeval_dspy.settings import RunSettings

        if not 0.0 <= min_score <= 1.0:
            raise ValueError(f"min_score must be in [0, 1] (a yes-rate), got {min_score!r}")
        question_set = questions if isinstance(questions, QuestionSet) else QuestionSet.load(questions)
        handle = self.handle()  # before anything is written: an LM that cannot be built leaves no folder
        test_id = test_id or _current_test_id()
        folder = self._run_dir(test_id)
        items_path = folder / "items.jsonl"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / FOLDER_MARK).write_text("made by the bineval pytest plugin; replaced by its next session\n",
                                              encoding="utf-8")
            items_path.write_text(json.dumps({"id": test_id, "input": input or "(none)", "output": output},
                                             ensure_ascii=False) + "\n", encoding="utf-8")
        except OSError as exc:  # e.g. a file where a parent folder should be
            raise pytest.UsageError(f"cannot make the stored run's folder {folder}: {exc.strerror or exc}; "
                                    "move what is in the way, or pass --bineval-runs with another folder") from None
        items = load_items(items_path, input_field="input", output_field="output", id_field="id")
        run_dir = RunDirectory(folder / "run")
        manifest = RunManifest(
            command="pytest", lm=handle.name, question_set_hash=question_set.content_hash,
            question_set_path=str(questions if not isinstance(questions, QuestionSet) else "(in the test)"),
            items_path=str(items_path.resolve()), items_file=items_file_identity(items_path),
            settings=RunSettings().recorded(handle), config={"input_field": "input", "output_field": "output", "id_field": "id", "scale": [0.0, 1.0],
                    "min_score": min_score, "test_id": test_id},
        )
        outcome = evaluate_items(BinEval(question_set), items, run_dir, manifest, lm=handle)
        result = outcome.results[-1]  # evaluate_items wrote the run's summary
        check = BinEvalCheck(result=result, question_set=question_set, run_dir=run_dir.path, lm=handle.name,
                             min_score=min_score)
        check.problems = _problems(check)
        return check


#: what the plugin writes in a test's folder; nothing else there is ever deleted
_OWN_ENTRIES = frozenset({FOLDER_MARK, "items.jsonl", "run"})
_NAME_HASH = 8  # hex digits of the node id's SHA-256 appended to a sanitized folder name


def run_folder_name(test_id: str) -> str:
    """The folder name of a test's stored run: injective and stable in the node id.

    ``file.py::test_x`` becomes ``file.py__test_x``. When that is not the id itself in
    file-name-safe characters (``/``, ``[...]`` of parametrize ids, spaces, ``__`` already
    in the id, more than 60 characters), the readable part is followed by ``-`` and the
    first 8 hex digits of the id's SHA-256, so ids that sanitize alike (``a/b``, ``a-b``)
    get folders of their own, whichever runs first or alone.
    """
    import hashlib

    from binaryeval_dspy.cli.file_arguments import slug

    plain = test_id.replace("::", "__")
    readable = slug(plain)
    if readable == plain and "__" not in test_id:
        return readable
    digest = hashlib.sha256(test_id.encode("utf-8", "surrogatepass")).hexdigest()[:_NAME_HASH]
    return f"{readable[:60 - _NAME_HASH - 1]}-{digest}"


def _is_pytest_run(manifest: Path) -> bool:
    """Whether `manifest` parses as the manifest of a run this plugin stored."""
    from binaryeval_dspy.schemas.run_manifest import RunManifest

    try:
        return RunManifest.model_validate_json(manifest.read_text(encoding="utf-8")).command == "pytest"
    except Exception:  # noqa: BLE001 - unreadable, not JSON, not a manifest: not a stored run
        return False


def _clear_own_folder(folder: Path) -> None:
    """Delete an earlier session's run in `folder` (the plugin's own entries only).

    The folder is the plugin's when it holds the mark, or (made before the mark existed)
    a ``run/manifest.json`` that parses as a pytest run; and it may be cleared only when it
    holds nothing but what the plugin writes (`_OWN_ENTRIES`).

    Raises:
        pytest.UsageError: naming the folder, with nothing deleted: it is a file, it holds
            other files, or it is not marked as the plugin's.
    """
    if not folder.exists() and not folder.is_symlink():
        return
    fix = "move them, or pass --bineval-runs with another folder"
    if not folder.is_dir() or folder.is_symlink():
        raise pytest.UsageError(f"{folder} is in the way of a stored BinEval test run: it is not a folder; {fix}")
    entries = sorted(entry.name for entry in folder.iterdir())
    foreign = [name for name in entries if name not in _OWN_ENTRIES]
    if foreign:
        raise pytest.UsageError(f"{folder} holds files that are not a stored BinEval test run "
                                f"({', '.join(foreign[:5])}); nothing was deleted; {fix}")
    if not entries:
        return
    if not ((folder / FOLDER_MARK).is_file() or _is_pytest_run(folder / "run" / "manifest.json")):
        raise pytest.UsageError(f"{folder} holds files that are not a stored BinEval test run (no {FOLDER_MARK} "
                                f"mark, and run/manifest.json is not a pytest run); nothing was deleted; {fix}")
    for name in entries:
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _problems(check: BinEvalCheck) -> list[str]:
    """Why a judged output fails, failures of the judge first (never read as a pass)."""
    result = check.result
    if result.status == "empty_output":
        return ["the output is empty (nothing to judge)"]
    if result.status == "error":
        return [f"the output could not be judged: {result.error}"]
    problems = []
    unparsed = [v for v in result.verdicts if v.verdict == "unparsed"]
    failed = [v for v in result.verdicts if v.verdict == "error"]
    if failed:
        problems.append(f"{len(failed)} of {len(result.verdicts)} judge calls failed, e.g. {failed[0].question_id}: "
                        f"{failed[0].error}")
    if unparsed:
        raw = (unparsed[0].raw_answer or "")[:120]
        problems.append(f"{len(unparsed)} of {len(result.verdicts)} answers could not be read as yes or no, e.g. "
                        f"{unparsed[0].question_id}: {raw!r}")
    score = check.score
    if score is None:
        problems.append("no question got a yes or no answer")
    elif not problems and score < check.min_score:
        no = sum(1 for v in result.verdicts if v.verdict == "no")
        problems.append(f"score {score:.2f} < min_score {check.min_score:.2f} ({no} of {len(result.verdicts)} "
                        'questions answered "no")')
    return problems


def _current_test_id() -> str:
    """The running test's node id (pytest sets ``PYTEST_CURRENT_TEST``)."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    return re.sub(r" \((setup|call|teardown)\)$", "", current) or "outside-a-test"


def _session_judge() -> BinEvalJudge:
    if not _CURRENT:
        raise RuntimeError("assert_bineval runs inside a test collected by pytest with the bineval plugin "
                           "(installed with binaryeval-dspy; enable it with -p binaryeval_dspy.pytest_plugin if "
                           "plugin autoloading is off)")
    return _CURRENT[-1].stash[_JUDGE]


def assert_bineval(output: str, *, questions: str | Path | QuestionSet, input: str = "",
                   min_score: float = DEFAULT_MIN_SCORE) -> BinEvalCheck:
    """Fail the running test unless BinEval's overall yes-rate for `output` reaches `min_score`.

    Same arguments, result and errors as calling `BinEvalJudge` (the ``bineval_judge``
    fixture); the run is stored under ``.bineval/pytest/<test id>/``.

    Example:
        >>> assert_bineval(summary, questions="my_questions.json", input=article, min_score=0.8)  # doctest: +SKIP
    """
    __tracebackhide__ = True
    return _session_judge()(output, questions=questions, input=input, min_score=min_score)


@pytest.fixture
def bineval_judge(request: pytest.FixtureRequest) -> BinEvalJudge:
    """The session's `BinEvalJudge`: ``bineval_judge(output, questions=..., input=..., min_score=0.8)``."""
    return request.config.stash[_JUDGE]
