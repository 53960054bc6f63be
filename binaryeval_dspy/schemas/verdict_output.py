"""The versioned JSON document downstream code reads in verdict mode (``verdicts.json``).

One document per run: the declared labels, the label counts and, per item, the named
verdict, its grounds (every "no"), every binary answer with its evidence (code checks
included), the fatal rule and the pressure test. With aggregation "verdict" it holds
no numeric score at all; with "both" each item also carries its yes-rate score card.

The JSON Schema of this model is kept in ``docs/verdict_output.schema.json``
(regenerate with `write_verdict_output_schema`; a test fails if the two drift).
Compatibility: additive optional fields keep ``schema_version`` 1; any removal,
rename or change of meaning bumps it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from binaryeval_dspy.schemas.named_verdict import FatalRuleRecord, PressureTestRecord
from binaryeval_dspy.schemas.score_card import ScoreCard
from binaryeval_dspy.schemas.verdict import VerdictValue
from binaryeval_dspy.schemas.verdict_policy import VerdictLabel
from binaryeval_dspy.schemas.versioned import SchemaVersion

VERDICT_OUTPUT_SCHEMA_ID = "binaryeval-dspy/verdict-output"
VERDICT_OUTPUT_SCHEMA_VERSION = 1


class EvidenceEntry(BaseModel):
    """One binary question's answer for one item, as evidence for the verdict.

    Attributes:
        question_id / question / dimension: the question answered.
        answered_by: "code" (a registered check, run before any LM) or "lm".
        check: the check's name when answered by code, else None.
        answer: yes / no / unparsed / error (unparsed: no usable answer; error: the LM call
            failed, a rerun asks again; neither is ever counted as no).
        detail: the LM's explanation, or the check's evidence line.
        data: the check's machine-readable findings (counts, missing paths, ...).
        fatal: True when a "no" here forces the fatal label.
        error: why the answer is unparsed, or the failed call's error, else None.
        qualified: the LM's answer came with a reservation (``"yes, but ..."``): kept as
            the answer named, not a plain one. Omitted from JSON when False.
    """

    model_config = ConfigDict(extra="forbid")

    question_id: str
    question: str
    dimension: str
    answered_by: Literal["code", "lm"]
    check: str | None = None
    answer: VerdictValue
    detail: str = ""
    data: dict[str, Any] | None = None
    fatal: bool = False
    error: str | None = None
    qualified: bool = Field(default=False, exclude_if=lambda v: not v)


class ItemVerdictOutput(BaseModel):
    """The named verdict of one item.

    Attributes:
        item_id: the item's id; output_hash: hash of the judged output.
        verdict: the final label (a declared name), or None when ``status`` is "unparsed".
        status: "decided" or "unparsed" (the LM named no declared label twice and no
            fatal rule applied): branch on this before using ``verdict``. A decided
            label of an item with ``complete`` False was decided without some answers.
        complete: False when some question has no answer (its LM call failed: evidence
            answer ``error``); the label was then decided from the answers there are, and
            a rerun of the same command asks the rest and decides again (it may change).
            True for an item with every question answered (yes, no or unparsed).
        questions_answered: questions with an answer (yes, no or unparsed), of
            ``questions_total``; None only in files written before this field existed.
        questions_total: the item's questions (code-checked ones included).
        is_pass / action: from the declared label (None when unparsed).
        decided_by: "lm", "pressure_test" or "fatal_rule" (None when unparsed).
        provisional_verdict: the LM's pick before the code rules.
        reason: the LM's reason for its pick.
        grounds: every question answered "no", in question-set order.
        evidence: every question's answer, in question-set order.
        fatal_rule: set when a fatal question was answered "no" (says what code did).
        pressure_test: the refutation questions, answers and outcome.
        notes: anything else the reader must know.
        fields: the item's other fields (ids, paths, ...), copied from the items file.
        scores: the yes-rate score card, only with aggregation "both" (absent otherwise).
    """

    model_config = ConfigDict(extra="forbid")

    item_id: str
    output_hash: str
    verdict: str | None
    status: Literal["decided", "unparsed"]
    complete: bool = True
    questions_answered: int | None = Field(default=None, ge=0)
    questions_total: int | None = Field(default=None, ge=0)
    is_pass: bool | None
    action: str | None
    decided_by: Literal["lm", "pressure_test", "fatal_rule"] | None
    provisional_verdict: str | None
    reason: str = ""
    grounds: list[EvidenceEntry] = Field(default_factory=list)
    evidence: list[EvidenceEntry] = Field(default_factory=list)
    fatal_rule: FatalRuleRecord | None = None
    pressure_test: PressureTestRecord | None = None
    notes: list[str] = Field(default_factory=list)
    fields: dict[str, Any] = Field(default_factory=dict)
    scores: ScoreCard | None = Field(default=None, exclude_if=lambda v: v is None)


class VerdictOutput(BaseModel):
    """``verdicts.json``: every item's named verdict in one run.

    Attributes:
        schema_id: always ``"binaryeval-dspy/verdict-output"``.
        schema_version: 1.
        lm: the LM that answered the questions and picked the labels.
        question_set_hash: content hash of the frozen question set.
        aggregation: "verdict" (no scores) or "both".
        pressure_test: the pressure-test mode of the run.
        labels: the declared labels, best first; fatal_label: the label a fatal "no" forces.
        counts: items per label, plus "unparsed" for items with no decided label, and
            "empty_output" / "error" for items that were not judged or whose label could
            not be decided because a call failed (not in `items`; their answers are in
            ``results.jsonl``). Incomplete items are counted under their label: see
            `ItemVerdictOutput.complete`.
        items: one `ItemVerdictOutput` per item, in results order.

    Example:
        >>> out = VerdictOutput.model_validate_json(Path("runs/x/verdicts.json").read_text())  # doctest: +SKIP
        >>> retire = [i.item_id for i in out.items if i.verdict == "Retire"]                   # doctest: +SKIP
    """

    model_config = ConfigDict(extra="forbid")

    schema_id: Literal["binaryeval-dspy/verdict-output"] = VERDICT_OUTPUT_SCHEMA_ID
    schema_version: SchemaVersion(
        VERDICT_OUTPUT_SCHEMA_VERSION, "verdict output", base=Literal[1],
        older_fix="write it again with `bineval evaluate` on its run directory") = (
        VERDICT_OUTPUT_SCHEMA_VERSION)
    lm: str
    question_set_hash: str
    aggregation: Literal["verdict", "both"]
    pressure_test: Literal["always", "non-pass", "never"]
    labels: list[VerdictLabel]
    fatal_label: str | None = None
    counts: dict[str, int]
    items: list[ItemVerdictOutput]


def verdict_output_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of `VerdictOutput`, as written to ``docs/verdict_output.schema.json``."""
    schema = VerdictOutput.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"{VERDICT_OUTPUT_SCHEMA_ID}/v{VERDICT_OUTPUT_SCHEMA_VERSION}",
        **schema,
    }


def write_verdict_output_schema(path: str | Path) -> Path:
    """Write `verdict_output_json_schema` as indented JSON to `path`; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(verdict_output_json_schema(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
