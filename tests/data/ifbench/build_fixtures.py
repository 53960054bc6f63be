"""Rebuild the IFBench test fixtures in this folder from the shared benchmark data.

Run from the repository root (needs ../shared/data or $BINEVAL_DATA_DIR):

    python tests/data/ifbench/build_fixtures.py

Writes, deterministically (gzip mtime 0):

* ``IFBench_test.jsonl.gz``: byte-for-byte gzip of ``ifbench/IFBench_test.jsonl``
  (300 prompts).
* ``sample_results.jsonl.gz``: one line per prompt of ``IFBench_test.2025-07-02.jsonl``
  (294 prompts) joining, by line, the prompt's ``key``, ``instruction_id_list`` and
  ``kwargs`` (null arguments dropped), the ``response`` from ``sample_output.jsonl``
  and IFBench's published verdicts ``strict`` / ``loose`` (``follow_instruction_list``
  of ``eval_results_strict.jsonl`` / ``eval_results_loose.jsonl``). The prompt text
  is left out (it is not needed to check a response).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from binaryeval_dspy.data.paths import default_data_dir


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write_gzip(path: Path, data: bytes) -> None:
    path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    print(f"{path.name}: {len(data)} bytes -> {path.stat().st_size} gzipped")


def main() -> None:
    source = (default_data_dir() or Path("../shared/data")) / "ifbench"  # needs the full copy, not the package's
    _write_gzip(HERE / "IFBench_test.jsonl.gz", (source / "IFBench_test.jsonl").read_bytes())
    prompts = _rows(source / "IFBench_test.2025-07-02.jsonl")
    outputs = _rows(source / "sample_output.jsonl")
    strict = _rows(source / "eval_results_strict.jsonl")
    loose = _rows(source / "eval_results_loose.jsonl")
    lines = []
    for prompt, output, strict_row, loose_row in zip(prompts, outputs, strict, loose, strict=True):
        # The four files are parallel: same prompt, same response, line by line.
        assert prompt["prompt"] == output["prompt"] == strict_row["prompt"] == loose_row["prompt"]
        assert output["response"] == strict_row["response"] == loose_row["response"]
        assert prompt["instruction_id_list"] == strict_row["instruction_id_list"] == loose_row["instruction_id_list"]
        row = {
            "key": prompt["key"],
            "instruction_id_list": prompt["instruction_id_list"],
            "kwargs": [{k: v for k, v in entry.items() if v is not None} for entry in prompt["kwargs"]],
            "response": output["response"],
            "strict": strict_row["follow_instruction_list"],
            "loose": loose_row["follow_instruction_list"],
        }
        lines.append(json.dumps(row, ensure_ascii=False))
    _write_gzip(HERE / "sample_results.jsonl.gz", ("\n".join(lines) + "\n").encode("utf-8"))


if __name__ == "__main__":
    main()
