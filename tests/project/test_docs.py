"""Every code block of README.md and docs/*.md runs as written (pydantic-evals' habit).

How a fenced block is treated, by its info string and its first line:

* Every block names its language: ``python`` and ``bash`` are code; ``json``, ``jsonl``,
  ``csv`` and ``text`` are data or output and are not run.
* ``# needs <what>`` as the first line (``# needs OPENAI_API_KEY``, ``# needs a served
  model at localhost:8000``) marks a block that needs something these tests do not have:
  a hosted key or a running server. It is not run; a Python block is compiled and every
  ``bineval`` command of a shell block is parsed by click (its options and arguments
  exist), so it cannot name an option that is gone.
* ``file=NAME`` in the info string (```` ```json file=questions.json ````) writes the
  block to NAME in the page's directory instead of running it; the prose says "save this
  as NAME".
* ``embedded`` in the info string runs the block on the real embedded model, in a test
  marked ``embedded``, in a directory of its own; keep such blocks tiny (``--limit 1``).
* Every other ``python`` / ``bash`` block runs, in page order, in one temporary directory
  per page that holds copies of ``examples/``, ``benchmarks/``, ``docs/`` and README.md,
  so that later blocks see the files earlier ones wrote. Every LM is a scripted one
  (`docs_script`, plumbing only, never a model's judgment): ``make_lm`` and the CLI's
  ``--lm`` resolve to it, and asking for anything but the embedded model there is an
  error (mark the block ``# needs ...`` instead). Python blocks run with `exec` in a fresh
  namespace each. Shell blocks are split into commands at ``&&``, ``;`` and new lines
  (a trailing ``\\`` continues a line); ``bineval ...`` runs through click's CliRunner and
  must exit 0; ``python FILE``, ``python -m MODULE`` and ``python -c CODE`` run in this
  process; ``pytest ARGS`` runs a page's example tests in this process with the bineval
  plugin and must pass; ``cd``, ``export NAME=value`` and ``NAME=value command`` work as in a shell,
  ``> FILE`` redirects the output. Set-up commands are skipped by rule: ``python3 -m
  venv``, ``. .venv/bin/activate`` / ``source``, ``pip install`` and ``python -m pytest``.
  Any other command fails the test: add a rule here or mark the block.

The README's own Python API block also runs on the embedded model with two questions
(`test_readme_python_api_on_the_embedded_model`), in the exact form it is written:
``dspy.configure(lm=handle.lm)`` with no adapter.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
import re
import runpy
import shlex
import shutil
import sys
import traceback
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import dspy
import pytest
from click.testing import CliRunner

import binaryeval_dspy
import binaryeval_dspy.lm
import binaryeval_dspy.lm.factory
from binaryeval_dspy.checks import registry as check_registry
from binaryeval_dspy.cli import common
from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.cli.reference import reference
from binaryeval_dspy.lm.factory import LMHandle
from tests.fakes import field_value, scripted_lm

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]
CODE = {"python", "bash"}
DATA = {"json", "jsonl", "csv", "text"}
FLAGS = {"embedded"}
NEEDS = re.compile(r"^#\s*needs\s+\S")
COPIED = ["examples", "benchmarks", "docs", "README.md", "tests/data"]


# ------------------------------------------------------------------ reading the blocks


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown page."""

    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    flags: frozenset[str]
    file: str | None
    code: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def needs(self) -> str | None:
        """What a ``# needs ...`` first line says the block needs, else None."""
        first = self.code.lstrip("\n").splitlines()[0] if self.code.strip() else ""
        return first.split("needs", 1)[1].strip() if NEEDS.match(first) else None

    @property
    def runs_here(self) -> bool:
        """Run by `test_docs_code_blocks_run` (scripted LM)."""
        return self.lang in CODE and self.file is None and self.needs is None and "embedded" not in self.flags


_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def read_blocks(page: str) -> list[Block]:
    """The fenced blocks of `page` (a path relative to the repository root), in order."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, info = match["indent"], match["fence"], match["info"].strip()
        body = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            body.append(lines[j].removeprefix(indent))
            j += 1
        if j == len(lines):
            raise AssertionError(f"{page}:{i + 1}: code block never closed")
        words = info.split()
        files = [w.split("=", 1)[1] for w in words[1:] if w.startswith("file=")]
        flags = frozenset(w for w in words[1:] if not w.startswith("file="))
        blocks.append(Block(page=page, line=i + 1, lang=words[0] if words else "", flags=flags,
                            file=files[0] if files else None, code="\n".join(body) + "\n"))
        i = j + 1
    return blocks


ALL_BLOCKS = [b for page in PAGES for b in read_blocks(page)]


# ------------------------------------------------------------------ the scripted LM


LESSON = "Answer no when a number in the output differs from the input."


def _output_fields(system: str) -> list[str] | None:
    """The output field names a DSPy adapter asks for, or None for a call without one."""
    parts = system.split("Your output fields are:", 1)
    if len(parts) < 2:
        return None
    section = parts[1].split("All interactions will be structured", 1)[0]
    return re.findall(r"^\d+\. `(\w+)`", section, re.MULTILINE)


def _pick(user: str, n: int) -> int:
    """A stable pseudo-random index in [0, n) from the request (same request, same pick)."""
    return zlib.crc32(user.encode("utf-8")) % n


def _json_field(user: str, name: str) -> Any:
    try:
        return json.loads(field_value(user, name))
    except ValueError:
        return None


def _first_sentence(text: str) -> str:
    match = re.match(r"\s*(.+?[.!?])(\s|$)", text, re.DOTALL)
    return match.group(1) if match else text.strip()


def _value(name: str, user: str) -> Any:
    """A type-appropriate answer for output field `name` of any signature the docs meet."""
    if name in ("verdict", "answer"):
        return "no" if _pick(user, 3) == 0 else "yes"
    if name == "score":
        bounds = [int(n) for n in re.findall(r"\d+", field_value(user, "score_range"))] or [1, 5]
        low, high = min(bounds), max(bounds)
        return low + _pick(user, high - low + 1)
    if name == "label":
        labels = _json_field(user, "allowed_labels") or []
        names = [entry["name"] for entry in labels if isinstance(entry, dict) and "name" in entry]
        return names[_pick(user, len(names))] if names else "Keep"
    if name == "questions":
        if "[[ ## requirement ## ]]" in user:
            dimensions = _json_field(user, "dimensions") or ["overall"]
            requirement = field_value(user, "requirement").strip().rstrip(".")
            return [{"question": f"Does the output meet this requirement: {requirement}?",
                     "dimension": dimensions[_pick(user, len(dimensions))],
                     "violation_example": "An output that ignores the requirement."}]
        return ["Does the output in fact meet what the verdict says it lacks?"]
    if name == "requirements":
        return ["The output states only facts found in the input.", "Every sentence is easy to read."]
    if name == "dimensions":
        return ["coherence", "fluency"]
    if name == "lessons":
        return [LESSON]
    if name == "is_duplicate":
        return False
    if name == "duplicate_number":
        return 0
    if name == "merged_lesson":
        return field_value(user, "new_lesson")
    if name == "substring":
        return _first_sentence(field_value(user, "prompt"))
    if name == "replacement":
        return f"{_first_sentence(field_value(user, 'prompt'))} {field_value(user, 'lesson')}"
    if name == "response":
        return "A scripted response. DONE"
    return f"Scripted {name.replace('_', ' ')}."


def docs_script(system: str, user: str) -> Any:
    """Answers any signature, in the format its adapter asked for (JSON or chat fields)."""
    fields = _output_fields(system)
    if fields is None:  # a raw call (GEPA's reflection): an instruction in a code fence
        return "```Scripted instruction: answer each question strictly.```"
    values = {name: _value(name, user) for name in fields}
    if "Outputs will be a JSON object" in system:
        return values
    rendered = [f"[[ ## {k} ## ]]\n{v if isinstance(v, str) else json.dumps(v)}" for k, v in values.items()]
    return "\n\n".join([*rendered, "[[ ## completed ## ]]"])


def scripted_make_lm(spec: str = "local", **kwargs: Any) -> LMHandle:
    """`make_lm` for the docs tests: the embedded model's forms give a scripted LM, others fail."""
    if spec != "local" and not str(spec).endswith(".gguf"):
        raise AssertionError(f"a docs block asked for --lm {spec!r}: mark the block '# needs ...' "
                             "(it needs a hosted key or a served model), or use the embedded model")
    lm, _engine = scripted_lm(docs_script)
    return LMHandle(lm=lm, adapter=dspy.JSONAdapter(), name="scripted-docs", embedded=False)


def scripted_python_make_lm(spec: str = "local", **kwargs: Any) -> LMHandle:
    """As `scripted_make_lm`, with no adapter: Python blocks configure the LM alone."""
    handle = scripted_make_lm(spec, **kwargs)
    handle.adapter = None
    return handle


# ------------------------------------------------------------------ running the blocks


SKIPPED = [  # set-up commands: (prefix of the command's words, why)
    (["python3", "-m", "venv"], "creates a virtual environment"),
    (["python", "-m", "venv"], "creates a virtual environment"),
    (["."], "activates the virtual environment"),
    (["source"], "activates the virtual environment"),
    (["pip", "install"], "installs packages"),
    (["python", "-m", "pip"], "installs packages"),
    (["python", "-m", "pytest"], "runs the test suite"),
]


def shell_commands(code: str) -> list[list[str]]:
    """The commands of a shell block as word lists (comments dropped)."""
    text = code.replace("\\\n", " ")
    commands: list[list[str]] = []
    for line in text.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        current: list[str] = []
        for word in lexer:
            if word in ("&&", ";"):
                if current:
                    commands.append(current)
                current = []
            elif word in ("|", "||", "&", "<", ">>"):
                raise AssertionError(f"shell operator {word!r} in {line!r}: the docs tests do not run it")
            else:
                current.append(word)
        if current:
            commands.append(current)
    return commands


def skip_reason(words: list[str]) -> str | None:
    for prefix, why in SKIPPED:
        if words[: len(prefix)] == prefix:
            return why
    return None


@contextlib.contextmanager
def output_to(path: str | None):
    """Standard output into `path` (a shell's ``> path``), else into a throwaway buffer."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        yield
    if path is not None:
        Path(path).write_text(buffer.getvalue(), encoding="utf-8")


def run_python_command(words: list[str], where: str) -> None:
    """``python FILE args``, ``python -m MODULE args`` or ``python -c CODE``, in this process."""
    saved = sys.argv[:]
    try:
        if words[1] == "-c":
            exec(compile(words[2], f"{where} (python -c)", "exec"), {"__name__": "__main__"})  # noqa: S102
        elif words[1] == "-m":
            # Run the module's file: the package's pytest11 plugin makes pytest load the package's
            # modules through its assertion-rewriting hook, which runpy.run_module cannot use.
            origin = importlib.util.find_spec(words[2]).origin
            sys.argv = [origin, *words[3:]]
            runpy.run_path(origin, run_name="__main__")
        else:
            sys.argv = words[1:]
            runpy.run_path(words[1], run_name="__main__")
    except SystemExit as exc:
        assert exc.code in (0, None), f"{where}: {' '.join(words)} exited with {exc.code}"
    finally:
        sys.argv = saved


def run_shell_block(block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
    for words in shell_commands(block.code):
        command = " ".join(words)
        if skip_reason(words):
            continue
        env: dict[str, str] = {}
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            name, value = words.pop(0).split("=", 1)
            env[name] = value
        target = None
        if ">" in words:
            at = words.index(">")
            target, words = words[at + 1], words[:at]
        if not words:
            for name, value in env.items():
                monkeypatch.setenv(name, value)
        elif words[0] == "export":
            for assignment in words[1:]:
                name, value = assignment.split("=", 1)
                monkeypatch.setenv(name, value)
        elif words[0] == "cd":
            monkeypatch.chdir(words[1])
        elif words[0] == "bineval":
            result = CliRunner().invoke(cli, words[1:], env=env or None)
            detail = "".join(traceback.format_exception(result.exception)) \
                if result.exception and not isinstance(result.exception, SystemExit) else ""
            assert result.exit_code == 0, f"{block.where}: `{command}` exited {result.exit_code}:\n" \
                                          f"{result.output}\n{detail}"
            if target is not None:
                Path(target).write_text(result.output, encoding="utf-8")
        elif words[0] == "pytest":  # a docs page's example tests, with the bineval plugin, in this process
            import litellm  # noqa: F401 - imported first inside pytest.main, it breaks importlib.metadata after

            with output_to(target):
                code = pytest.main([*words[1:], *bineval_plugin_args(), "-p", "no:cacheprovider", "-q"])
            assert code == 0, f"{block.where}: `{command}` exited {code}"
        elif words[0] in ("python", "python3"):
            with monkeypatch.context() as patch:
                for name, value in env.items():
                    patch.setenv(name, value)
                with output_to(target):
                    run_python_command(words, block.where)
        else:
            raise AssertionError(f"{block.where}: no rule to run `{command}`; add one to tests/project/test_docs.py "
                                 "or mark the block '# needs ...'")


def bineval_plugin_args() -> list[str]:
    """``-p binaryeval_dspy.pytest_plugin`` unless the installed package's entry point loads it already."""
    import importlib.metadata

    installed = any(ep.value == "binaryeval_dspy.pytest_plugin"
                    for ep in importlib.metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", "binaryeval_dspy.pytest_plugin"]


def run_python_block(block: Block) -> None:
    code = compile(block.code, block.where, "exec")
    with output_to(None):
        exec(code, {"__name__": "__main__"})  # noqa: S102


def check_needs_block(block: Block) -> None:
    """A block that is not run: Python must compile and every `bineval` command must parse."""
    if block.lang == "python":
        compile(block.code, block.where, "exec")
        return
    for words in shell_commands(block.code):
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words = words[1:]
        if not words or words[0] != "bineval":
            continue
        try:
            with contextlib.ExitStack() as stack:  # parsing runs the options' type checks, not the command
                ctx = stack.enter_context(cli.make_context("bineval", words[1:]))
                command: click.Command = cli
                while isinstance(command, click.Group):
                    name, command, rest = command.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
                    ctx = stack.enter_context(command.make_context(name, list(rest), parent=ctx))
        except click.ClickException as exc:
            raise AssertionError(f"{block.where}: `{' '.join(words)}` does not parse: {exc.format_message()}") \
                from exc


# ------------------------------------------------------------------ fixtures


@pytest.fixture
def docs_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory that looks like a fresh clone, as the working directory, with a clean
    environment, the scripted LM, and DSPy settings and the check registry restored after."""
    work = tmp_path / "clone"
    work.mkdir()
    for name in COPIED:
        source = ROOT / name
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, work / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, work / name)
    monkeypatch.chdir(work)
    for name in list(os.environ):
        if name.startswith("BINEVAL_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(common, "make_lm", scripted_make_lm)
    for module in (binaryeval_dspy, binaryeval_dspy.lm, binaryeval_dspy.lm.factory):
        monkeypatch.setattr(module, "make_lm", scripted_python_make_lm)
    monkeypatch.setattr(sys, "path", [str(work), *sys.path])
    lm, adapter = dspy.settings.lm, dspy.settings.adapter
    checks = dict(check_registry._REGISTRY)
    # A fresh clone has only the built-in checks: user checks registered by earlier tests
    # (e.g. the audit example's, imported from another path) would collide with the page's.
    for name in [n for n, d in check_registry._REGISTRY.items() if not d.builtin]:
        del check_registry._REGISTRY[name]
    yield work
    dspy.configure(lm=lm, adapter=adapter)
    check_registry._REGISTRY.clear()
    check_registry._REGISTRY.update(checks)


def write_block_file(block: Block) -> None:
    path = Path(block.file)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(block.code, encoding="utf-8")


# ------------------------------------------------------------------ the tests


def test_every_block_names_a_known_language_and_known_flags():
    for block in ALL_BLOCKS:
        assert block.lang in CODE | DATA, f"{block.where}: fenced block with language {block.lang!r}; " \
                                          f"use one of {sorted(CODE | DATA)}"
        assert block.flags <= FLAGS, f"{block.where}: unknown flags {sorted(block.flags - FLAGS)}"
        assert not (block.needs and block.flags), f"{block.where}: a '# needs' block is not run, so no flags"
        if block.file is not None:
            assert not Path(block.file).is_absolute() and ".." not in Path(block.file).parts, block.where


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.runs_here or b.file for b in read_blocks(p))])
def test_docs_code_blocks_run(page: str, docs_workdir: Path, monkeypatch: pytest.MonkeyPatch):
    """Every block of `page` that needs nothing these tests lack runs, in order, on the scripted LM."""
    ran = 0
    for block in read_blocks(page):
        if block.file is not None:
            write_block_file(block)
        elif block.runs_here:
            if block.lang == "python":
                run_python_block(block)
            else:
                run_shell_block(block, monkeypatch)
            ran += 1
    assert ran or any(b.file for b in read_blocks(page))


NEEDS_BLOCKS = [b for b in ALL_BLOCKS if b.lang in CODE and b.needs]


@pytest.mark.parametrize("block", NEEDS_BLOCKS, ids=[b.where for b in NEEDS_BLOCKS])
def test_blocks_that_need_a_hosted_or_served_model_still_parse(block: Block, docs_workdir: Path):
    check_needs_block(block)


EMBEDDED_BLOCKS = [b for b in ALL_BLOCKS if "embedded" in b.flags]


@pytest.mark.embedded
@pytest.mark.parametrize("block", EMBEDDED_BLOCKS, ids=[b.where for b in EMBEDDED_BLOCKS])
def test_embedded_blocks_run_on_the_embedded_model(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   no_dspy_cache):
    monkeypatch.chdir(tmp_path)
    for name in COPIED:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).symlink_to(ROOT / name)
    if block.lang == "python":
        run_python_block(block)
    else:
        run_shell_block(block, monkeypatch)


def readme_python_api_block() -> Block:
    heading = (ROOT / "README.md").read_text(encoding="utf-8").splitlines().index("## Python API") + 1
    return next(b for b in read_blocks("README.md") if b.lang == "python" and b.line > heading)


@pytest.mark.embedded
def test_readme_python_api_on_the_embedded_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog,
                                                 no_dspy_cache):
    """The README's snippet as written (make_lm("local"), then plain dspy.configure(lm=...)),
    on the real embedded model, with its question set cut to two questions to keep it short."""
    block = readme_python_api_block()
    assert 'make_lm("local")' in block.code and "dspy.configure(lm=handle.lm)" in block.code
    from binaryeval_dspy import QuestionSet

    full = QuestionSet.load(ROOT / "examples/summeval/questions.json")
    first = full.questions[0].dimension
    two = full.model_copy(update={"dimensions": [first], "questions": [q for q in full.questions
                                                                       if q.dimension == first][:2]})
    small = tmp_path / "two_questions.json"
    QuestionSet.model_validate(two.model_dump()).save(small)
    code = block.code.replace("examples/summeval/questions.json", str(small))
    assert code != block.code
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("BINEVAL_LLAMA_THREADS", "1")
    lm, adapter = dspy.settings.lm, dspy.settings.adapter
    namespace: dict[str, Any] = {"__name__": "__main__"}
    try:
        with caplog.at_level(logging.WARNING):
            code = code.replace('"evaluator.json"', repr(str(tmp_path / "evaluator.json")))
            exec(compile(code, block.where, "exec"), namespace)  # noqa: S102
    finally:
        dspy.configure(lm=lm, adapter=adapter)
    pred = namespace["pred"]
    assert [v.verdict in ("yes", "no") for v in pred.verdicts] == [True, True], pred.verdicts
    assert 0.0 <= pred.score <= 1.0
    assert not [r for r in caplog.records if "truncated" in r.getMessage()]
    assert namespace["restored"].question_set.content_hash == namespace["evaluator"].question_set.content_hash


def test_command_reference_is_current():
    on_disk = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert on_disk == reference(), ("docs/cli.md is stale; regenerate it with: "
                                    "python -m binaryeval_dspy.cli.reference > docs/cli.md")


def test_readme_is_a_short_entry_point():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 155, "README.md is the entry point: move details to docs/"
    assert "arXiv:2606.27226" in text and "https://arxiv.org/abs/2606.27226" in text
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    for heading in headings[1:]:
        anchor = re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")
        assert f"(#{anchor})" in contents, f"the table of contents lacks '{heading}'"


def test_readme_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    commands = [b.code.strip() for b in read_blocks("README.md") if b.lang == "bash"]
    assert ci in commands, f"README's test command differs from .ci/run's: {ci!r}"


def test_every_relative_link_resolves():
    link = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")
    for page in PAGES:
        text = (ROOT / page).read_text(encoding="utf-8")
        for target, _anchor in link.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue
            assert ((ROOT / page).parent / target).exists(), f"{page}: broken link to {target}"


def test_every_docs_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in PAGES[1:]:
        assert f"({page})" in readme, f"README.md does not link {page}"
