"""Our IFBench checkers reproduce IFBench's published strict and loose verdicts, item by item.

Fixture: tests/data/ifbench/sample_results.jsonl.gz (294 prompts of the July 2025
release, the sample responses, and IFBench's own eval_results_strict/loose; see the
README there). Every instruction verdict must match, except the listed expected
differences, each justified by a documented upstream change.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from binaryeval_dspy.ifbench import INSTRUCTION_IDS, check_loose, check_strict, ifbench_accuracy

FIXTURE = Path(__file__).parents[1] / "data" / "ifbench" / "sample_results.jsonl.gz"

#: (mode, key, instruction id) -> reason, for verdicts that cannot match because of a
#: documented upstream change. None are needed: all 294 x 2 items match.
EXPECTED_DIFFERENCES: dict[tuple[str, str, str], str] = {}


@pytest.fixture(scope="module")
def sample_items() -> list[dict]:
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module")
def our_results(sample_items) -> dict[str, list]:
    return {
        "strict": [check_strict(item, item["response"]) for item in sample_items],
        "loose": [check_loose(item, item["response"]) for item in sample_items],
    }


def test_fixture_is_the_full_sample(sample_items):
    ids = Counter(i for item in sample_items for i in item["instruction_id_list"])
    assert len(sample_items) == 294
    assert len(ids) == 57 and set(ids) <= set(INSTRUCTION_IDS)
    assert sum(ids.values()) == 294 + sum(len(item["instruction_id_list"]) > 1 for item in sample_items)


@pytest.mark.parametrize("mode", ["strict", "loose"])
def test_verdicts_match_ifbench_item_by_item(sample_items, our_results, mode):
    mismatched: set[tuple[str, str, str]] = set()
    matching_prompts = 0
    for item, result in zip(sample_items, our_results[mode], strict=True):
        assert result.key == item["key"] and result.instruction_id_list == item["instruction_id_list"]
        differing = {
            (mode, item["key"], instruction_id)
            for instruction_id, ours, theirs in zip(
                item["instruction_id_list"], result.follow_instruction_list, item[mode], strict=True
            )
            if ours != theirs
        }
        mismatched |= differing
        matching_prompts += not differing
    expected = {entry for entry in EXPECTED_DIFFERENCES if entry[0] == mode}
    unexpected = sorted(mismatched - expected)
    assert not unexpected, f"{mode}: {matching_prompts}/{len(sample_items)} prompts match; differ: {unexpected}"
    assert mismatched == expected, f"{mode}: listed differences now match: {sorted(expected - mismatched)}"


@pytest.mark.parametrize("mode", ["strict", "loose"])
def test_accuracy_equals_ifbench_on_the_sample(sample_items, our_results, mode):
    prompts = sum(all(item[mode]) for item in sample_items) / len(sample_items)
    verdicts = [verdict for item in sample_items for verdict in item[mode]]
    expected = {"prompt_level": prompts, "instruction_level": sum(verdicts) / len(verdicts)}
    assert ifbench_accuracy(our_results[mode]) == expected
    assert 0 < expected["prompt_level"] < 1  # the sample has both passing and failing prompts
