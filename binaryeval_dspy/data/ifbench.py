"""IFBench prompts (Pyatkin et al., 2025) as `dspy.Example`s.

IFBench ("Generalizing Verifiable Instruction Following", allenai/IFBench; data
ODC-BY-1.0) has 300 test prompts, each carrying one or two of 58 constraint types
that code can verify (`binaryeval_dspy.ifbench`). A line of ``IFBench_test.jsonl``
holds ``key``, ``prompt``, ``instruction_id_list`` and ``kwargs`` (one argument
object per instruction, listing every argument name with ``null`` for unused ones).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dspy

from binaryeval_dspy.data.benchmark_rows import require_rows
from binaryeval_dspy.data.paths import resolve_data_file
from binaryeval_dspy.data.rows import read_jsonl_rows
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.ifbench import bind_prompt_checkers

#: Where `load_ifbench` looks inside a data directory (the package ships it gzipped).
IFBENCH_TEST_FILE = Path("ifbench") / "IFBench_test.jsonl"


def _required(row: dict[str, Any], name: str, *, path: Path, line: int) -> Any:
    if name not in row:
        present = ", ".join(sorted(row)) or "none"
        raise InputError(
            f"the field is missing (fields present: {present})", path=path, line=line, field=name,
            fix="each IFBench line needs key, prompt, instruction_id_list and kwargs.",
        )
    return row[name]


def _to_example(row: dict[str, Any], *, path: Path, line: int) -> dspy.Example:
    key = _required(row, "key", path=path, line=line)
    if isinstance(key, bool) or not isinstance(key, (str, int)) or str(key).strip() == "":
        raise InputError(f"expected a non-empty string or integer key, got {key!r}", path=path, line=line,
                         field="key")
    prompt = _required(row, "prompt", path=path, line=line)
    if not isinstance(prompt, str) or not prompt.strip():
        raise InputError("expected a non-empty prompt string", path=path, line=line, field="prompt")
    ids = _required(row, "instruction_id_list", path=path, line=line)
    kwargs = _required(row, "kwargs", path=path, line=line)
    fields = {"key": str(key), "instruction_id_list": ids, "kwargs": kwargs}
    bind_prompt_checkers(fields, path=str(path), line=line)  # unknown ids, bad arguments
    arguments = [{name: value for name, value in entry.items() if value is not None} for entry in kwargs]
    return dspy.Example(
        key=str(key), prompt=prompt, instruction_id_list=list(ids), kwargs=arguments
    ).with_inputs("prompt")


def load_ifbench(
    path: str | Path | None = None,
    *,
    data_dir: str | Path | None = None,
    limit: int | None = None,
) -> list[dspy.Example]:
    """Load IFBench test prompts (Pyatkin et al., 2025).

    Args:
        path: an IFBench JSONL file; by default ``<data_dir>/ifbench/IFBench_test.jsonl``
            (the current 300-prompt release). The July 2025 release
            (``IFBench_test.2025-07-02.jsonl``, 294 prompts) loads the same way.
        data_dir: a benchmark data directory; default ``$BINEVAL_DATA_DIR``, else the
            data shipped in the package (`binaryeval_dspy.data.paths`). Ignored when `path` is given.
        limit: keep only the first `limit` prompts (None keeps all).

    Returns:
        One `dspy.Example` per prompt, in file order, with ``key`` (str),
        ``prompt`` (str), ``instruction_id_list`` (list of str) and ``kwargs``
        (list of dicts, ``null`` arguments dropped); the input is ``prompt``.
        Check a response with `binaryeval_dspy.ifbench.check_strict(example, response)`.

    Raises:
        InputError: missing file, a line that is not a JSON object, a missing or
            malformed field, an unknown instruction id, bad arguments, a
            duplicate key, or no prompt at all; the message names file, line and field.
    """
    if limit is not None and limit < 0:
        raise InputError(f"limit must be >= 0, got {limit}", fix="pass a positive `limit` or none.")
    path = resolve_data_file(IFBENCH_TEST_FILE, path=path, data_dir=data_dir)
    examples: list[dspy.Example] = []
    first_line: dict[str, int] = {}
    for number, row in read_jsonl_rows(path):
        if limit is not None and len(examples) >= limit:
            break
        example = _to_example(row, path=path, line=number)
        if example.key in first_line:
            raise InputError(
                f"key {example.key!r} was already used on line {first_line[example.key]}",
                path=path, line=number, field="key", fix="make the keys unique.",
            )
        first_line[example.key] = number
        examples.append(example)
    if limit != 0:
        require_rows(examples, path)
    return examples
