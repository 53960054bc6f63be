"""The packaged LLMBar slice: public per-question verdicts of six named LLM judges with the
gold labels for the same questions (Zeng et al., ICLR 2024; MIT; see
``benchmark_data/PROVENANCE.md`` and docs/meta-evaluation.md).

`llmbar_path` gives the path of one of its files, to pass to `read_verdicts` or to
``bineval agreement --labels ... --verdicts ...``:

* ``labels``: ``llmbar_labels.jsonl.gz``, 838 rows, judge ``human`` (the gold label of
  each of the 419 instances, for both questions);
* ``verdicts``: ``llmbar_verdicts.jsonl.gz``, 10,056 rows: GPT-4, ChatGPT (0613),
  ChatGPT-0301, PaLM 2, LLaMA-2-70B-Chat and Falcon-180B-Chat, each with the prompting
  strategies ``Vanilla`` (the paper's Vanilla*, with rules) and ``Metrics_Reference``
  (Metrics+Reference*), judges named ``<LM>/<strategy>``;
* ``items``: ``llmbar_items.jsonl.gz``, the 419 instances (instruction, both outputs, label).

Items are ``<subset>-<nnn>`` (subsets ``natural``, ``neighbor``, ``gptinst``, ``gptout``,
``manual``); questions ``o1_first`` (Output 1 shown first) and ``o2_first`` (Output 2 shown
first), both "is Output 1 the better one?".
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from binaryeval_dspy.errors import InputError

LLMBAR_FILES = {"labels": "llmbar/llmbar_labels.jsonl.gz", "verdicts": "llmbar/llmbar_verdicts.jsonl.gz",
                "items": "llmbar/llmbar_items.jsonl.gz"}
LLMBAR_SUBSETS = ("natural", "neighbor", "gptinst", "gptout", "manual")


def llmbar_path(name: str) -> Path:
    """The packaged file `name` (``labels``, ``verdicts`` or ``items``) of the LLMBar slice.

    Raises:
        InputError: another name.
    """
    if name not in LLMBAR_FILES:
        raise InputError(f"no LLMBar file {name!r}; the files are {', '.join(LLMBAR_FILES)}")
    return Path(str(resources.files("binaryeval_dspy") / "benchmark_data" / LLMBAR_FILES[name]))
