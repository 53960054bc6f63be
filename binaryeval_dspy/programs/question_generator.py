"""QuestionGenerator: task prompt -> requirements -> binary questions (paper section 3.1).

Every fallback is recorded (see `binaryeval_dspy.schemas.generation_report`): each
question's ``origin`` and ``dimension_source``, and the set's ``generation_report``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Sequence
from typing import Literal

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.errors import BinEvalError, ConfigError, InputError
from binaryeval_dspy.lm.adapters import (
    PredictorCalls,
    acall_predictor,
    arun_predictor_calls,
    call_predictor,
    run_predictor_calls,
)
from binaryeval_dspy.lm.final_answer import complete_list_items, is_incomplete_reply
from binaryeval_dspy.schemas.generation_report import (
    DroppedDraft,
    FallbackTemplate,
    GenerationReport,
    LeftOutRequirement,
)
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet, Requirement
from binaryeval_dspy.signatures.decomposition import DecomposeRequirement
from binaryeval_dspy.signatures.dimension_assignment import AssignDimension
from binaryeval_dspy.signatures.dimension_inference import InferDimensions
from binaryeval_dspy.signatures.requirement_summary import SummarizeRequirements

logger = logging.getLogger(__name__)

_FALLBACK_DIMENSION = "overall"
_MAX_INFERRED_DIMENSIONS = 6
MIN_QUESTION_WORDS = 3
"""A drafted question needs at least this many words (``"Is it fluent?"`` has 3)."""

# Whole texts (lowercased, trailing punctuation and quotes removed) that are placeholders,
# not content: "test_1", "question 2", "q3", "TODO", "N/A", "<question>", "{text}", "...".
_PLACEHOLDER = re.compile(
    r"^(?:[a-z]+[\s_\-]*\d+"
    r"|test|question|questions|placeholder|example|sample|dummy|todo|tbd|tba|n/?a|none|null|nil"
    r"|string|text|str|foo|bar|baz|x+|\.+|-+|_+|\?+"
    r"|<[^<>]*>|\{[^{}]*\}|\[[^\[\]]*\]"
    r"|.*lorem ipsum.*|.*(?:your|insert|enter) (?:question|requirement|text) here.*)$"
)
_CLOSERS = "\"')]}»”’ \t\r\n"


def normalize_dimension(name: str) -> str:
    """A dimension name as stored: lowercase snake_case, e.g. ``"Factual Consistency"`` ->
    ``"factual_consistency"``; "" if nothing is left."""
    return re.sub(r"[^a-z0-9]+", "_", str(name).strip().lower()).strip("_")


def question_key(text: str) -> str:
    """Key under which two questions count as identical: lowercase words only."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def question_text_problem(text: str) -> str | None:
    """Why a drafted question cannot be used, or None if it can.

    The rule, checked in this order (the first failing check is the reason):

    * ``"empty"``: nothing but whitespace;
    * ``"placeholder text"``: the whole text, ignoring case and trailing punctuation,
      is a placeholder such as ``test_1``, ``question 2``, ``q3``, ``TODO``, ``N/A``,
      ``<question>``, ``{text}``, ``...`` or contains "lorem ipsum";
    * ``"too short"``: fewer than `MIN_QUESTION_WORDS` (3) words;
    * ``"not a question"``: does not end with ``?`` (closing quotes and brackets after
      it are allowed).

    Args:
        text: the question as the LM wrote it.

    Returns:
        One of the reasons above (the `DropReason` values other than "unknown
        dimension"), or None.

    Example:
        >>> question_text_problem("test_1"), question_text_problem("Is it fluent?")
        ('placeholder text', None)
    """
    stripped = str(text).strip()
    if not stripped:
        return "empty"
    core = stripped.lower().rstrip(_CLOSERS + "?.!:;,").strip()
    if not core or _PLACEHOLDER.match(core) or _PLACEHOLDER.match(stripped.lower()):
        return "placeholder text"
    if len(re.findall(r"\w+", stripped)) < MIN_QUESTION_WORDS:
        return "too short"
    if not stripped.rstrip(_CLOSERS).endswith("?"):
        return "not a question"
    return None


def requirement_text_problem(text: str) -> str | None:
    """Why a summarized requirement cannot be used: ``"empty"`` or ``"placeholder
    text"`` (as in `question_text_problem`), else None. Requirements are statements,
    so the length and question-mark rules do not apply."""
    problem = question_text_problem(text)
    return problem if problem in ("empty", "placeholder text") else None


def _one_line(text: str, limit: int = 60) -> str:
    """`text` on one line, whitespace collapsed, cut to `limit` characters."""
    return " ".join(str(text).split())[:limit]


def _user_dimensions(dimensions: Sequence[str] | None) -> list[str] | None:
    """The caller's dimension names, normalized and de-duplicated; None to infer them.

    Raises:
        InputError: `dimensions` is a single string, or a name has no letter or digit
            (it could match nothing); the message names the value and lists the
            usable names given.
    """
    if dimensions is None:
        return None
    if isinstance(dimensions, str):
        raise InputError(f"dimensions must be a list of names, got the string {dimensions!r}",
                         field="dimensions", fix=f"pass a list, e.g. {dimensions.split(',')!r}.")
    names = [normalize_dimension(d) if isinstance(d, str) else "" for d in dimensions]
    usable = list(dict.fromkeys(n for n in names if n))
    for raw, name in zip(dimensions, names):
        if not name:
            raise InputError(
                f"the dimension name {raw!r} has no letter or digit, so it can name no dimension "
                f"(usable names given: {usable})", field="dimensions",
                fix="use names such as coherence or factual_consistency, or remove it.")
    return usable or None


def _clean_list(values: object) -> list[str]:
    if not isinstance(values, (list, tuple)):
        return []
    seen: set[str] = set()
    out: list[str] = []
    for v in values:
        text = str(v).strip()
        key = question_key(text)
        if text and key and key not in seen:
            seen.add(key)
            out.append(text)
    return out


class QuestionGenerator(dspy.Module):
    """Generate a `QuestionSet` from a task prompt with the two steps of paper 3.1.

    Step 1 summarizes the task prompt into requirements r_1..r_K; step 2 decomposes
    each requirement into atomic yes/no questions, each with a violation example and a
    dimension. Dimension names are the caller's, or inferred from the requirements when
    none are given. Nothing is guessed or dropped silently; every fallback is recorded
    in the questions' ``origin`` / ``dimension_source`` and in the set's
    ``generation_report`` (`GenerationReport`):

    * Dimension names match only when equal after `normalize_dimension` (case, spaces,
      underscores, hyphens and other punctuation ignored: "Factual Consistency" ==
      "factual_consistency"); there is no nearest-name guess. A drafted question whose
      dimension matches none is dropped with reason "unknown dimension" (no retry: at
      temperature 0 the same call gives the same answer). One exception: when the set
      has a single dimension, every question belongs to it; a question the LM labelled
      otherwise is kept under it with ``dimension_source="mapped_from:<LM's name>"``.
    * If dimension inference fails (unparseable answer or no usable name), the set
      uses the single dimension "overall" and records ``dimensions_source="fallback"``
      with the reason.
    * Drafted questions failing `question_text_problem` (empty, placeholder such as
      "test_1", fewer than 3 words, no final "?") are dropped and counted with the
      reason; requirements that are empty or placeholders likewise.
    * Identical questions (same words, ignoring case and punctuation) are merged: the
      first is kept with ``origin="merged"`` and later copies are counted.
    * A requirement left with no usable question (decomposition unparseable, empty, or
      every draft dropped) is asked as one template question, ``origin=
      "fallback_template"``, under the dimension it is about: the only one of a
      one-dimension set (``dimension_source="only_dimension"``), else the one the LM files
      it under (`AssignDimension`, ``dimension_source="assigned"``), asked twice with the
      dimensions listed in opposite orders. When the two answers differ (the choice
      followed the list's order, not the requirement: SmolLM2-135M picks the first name
      whatever the order) or cannot be read, the template is left out and the requirement
      named in ``generation_report.left_out_requirements`` with the reason, and warned
      about; never filed under a dimension it may not be about. A set left with no
      question at all is an error naming each requirement.
    * A dimension left with no question is removed from the set's ``dimensions``
      (a dimension without questions has no score) and listed in
      ``generation_report.empty_dimensions``.

    Args:
        dimensions: dimension names to use (normalized to snake_case, duplicates
            merged); None or an empty list infers them.
        max_requirements: keep at most this many requirements (>= 1).
        on_step: called after each LM step, for progress: ``on_step("requirements", K)``
            once the K requirements are drafted, ``on_step("dimensions", D)`` once the D
            dimensions are known (given or inferred), then ``on_step("requirement", kept,
            fallbacks)`` after each requirement's decomposition, with the questions kept
            so far and the fallback templates among them. None: no calls.

    Raises:
        InputError: `dimensions` is a single string or holds a name with no letter or
            digit (the message names it and lists the usable names given).
        BinEvalError: `max_requirements` < 1.

    Example:
        >>> gen = QuestionGenerator(dimensions=["coherence", "consistency"])   # doctest: +SKIP
        >>> qs = gen(task_prompt="Summarize the article ...").question_set       # doctest: +SKIP
        >>> qs.generation_report.summary()                                       # doctest: +SKIP
        '7 generated, 1 fallback template, 1 dropped (placeholder text)'
    """

    def __init__(self, *, dimensions: list[str] | None = None, max_requirements: int = 12,
                 on_step: Callable[..., None] | None = None) -> None:
        super().__init__()
        self.on_step = on_step
        if max_requirements < 1:
            raise ConfigError("bad max_requirements", expected="an integer >= 1", received=repr(max_requirements),
                              fix="pass max_requirements=12 (the default), or another positive count.")
        self.dimensions = _user_dimensions(dimensions)
        self.max_requirements = max_requirements
        self.summarize = dspy.Predict(SummarizeRequirements)
        self.infer_dimensions = dspy.Predict(InferDimensions)
        self.decompose = dspy.Predict(DecomposeRequirement)
        self.assign_dimension = dspy.Predict(AssignDimension)

    def _requirements(self, task_prompt: str) -> tuple[list[str], list[DroppedDraft]]:
        """Usable requirement texts (at most `max_requirements`) and the dropped ones."""
        try:
            pred = call_predictor(self.summarize, task_prompt=task_prompt)
        except AdapterParseError as exc:
            return self._read_requirements(exc)
        return self._read_requirements(pred.requirements)

    async def _arequirements(self, task_prompt: str) -> tuple[list[str], list[DroppedDraft]]:
        try:
            pred = await acall_predictor(self.summarize, task_prompt=task_prompt)
        except AdapterParseError as exc:
            return self._read_requirements(exc)
        return self._read_requirements(pred.requirements)

    def _read_requirements(self, found: object) -> tuple[list[str], list[DroppedDraft]]:
        """The requirement list the LM wrote (or the `AdapterParseError` of an unreadable reply)."""
        if isinstance(found, AdapterParseError):
            # a reply cut inside its list: the requirements written in full still count
            whole = complete_list_items(found, "requirements") if is_incomplete_reply(found) else None
            if whole is not None:
                return self._usable(_clean_list(whole))
            raise BinEvalError(
                "the LM's requirement list could not be parsed, so no questions can be generated. "
                f"Raw answer (start): {str(found.lm_response)[:300]!r}. Try a stronger LM (a larger model)."
            ) from found
        return self._usable(_clean_list(found))

    def _usable(self, found: list[str]) -> tuple[list[str], list[DroppedDraft]]:
        """The usable requirement texts of `found` (at most `max_requirements`) and the dropped ones."""
        dropped = [DroppedDraft(text=t, reason=problem) for t in found
                   if (problem := requirement_text_problem(t)) is not None]
        usable = [t for t in found if requirement_text_problem(t) is None]
        if not usable:
            got = f" (it returned only unusable ones: {[d.text for d in dropped]!r:.200})" if dropped else ""
            raise BinEvalError(f"the LM returned no requirements for this task prompt{got}; try a stronger LM (a larger model)")
        return usable[: self.max_requirements], dropped

    def _dimensions(self, task_prompt: str, requirements: list[str]) -> tuple[list[str], str, str]:
        """(dimension names, source "given" | "inferred" | "fallback", note)."""
        if self.dimensions:
            return list(self.dimensions), "given", ""
        try:
            pred = call_predictor(self.infer_dimensions, task_prompt=task_prompt, requirements=requirements)
        except AdapterParseError as exc:
            return self._read_dimensions(exc)
        return self._read_dimensions(pred.dimensions)

    async def _adimensions(self, task_prompt: str, requirements: list[str]) -> tuple[list[str], str, str]:
        if self.dimensions:
            return list(self.dimensions), "given", ""
        try:
            pred = await acall_predictor(self.infer_dimensions, task_prompt=task_prompt, requirements=requirements)
        except AdapterParseError as exc:
            return self._read_dimensions(exc)
        return self._read_dimensions(pred.dimensions)

    @staticmethod
    def _read_dimensions(raw: object) -> tuple[list[str], str, str]:
        """The inferred dimensions from the LM's list (or the `AdapterParseError` of an unreadable reply)."""
        if isinstance(raw, AdapterParseError):
            exc = raw
            # a reply cut inside its list: the names written in full still count
            raw = complete_list_items(exc, "dimensions") if is_incomplete_reply(exc) else None
            if raw is None:
                reason = ("dimension inference failed: the LM's answer could not be parsed "
                          f"({_one_line(exc.lm_response, 120)!r})")
                return [_FALLBACK_DIMENSION], "fallback", reason
        dims = list(dict.fromkeys(d for d in (normalize_dimension(x) for x in _clean_list(raw)) if d))
        if not dims:
            reason = f"dimension inference returned no usable name (got {_one_line(repr(raw), 120)})"
            return [_FALLBACK_DIMENSION], "fallback", reason
        note = ""
        if len(dims) > _MAX_INFERRED_DIMENSIONS:
            note = (f"the LM inferred {len(dims)} dimensions; kept the first {_MAX_INFERRED_DIMENSIONS}, "
                    f"left out {dims[_MAX_INFERRED_DIMENSIONS:]}")
            dims = dims[:_MAX_INFERRED_DIMENSIONS]
        return dims, "inferred", note

    def _draft_calls(self, task_prompt: str, dimensions: list[str], requirement: str,
                     source: str) -> PredictorCalls:
        """One requirement's LM work (`binaryeval_dspy.lm.adapters.PredictorCalls`), independent of
        the other requirements': returns its drafts, "" or why there are none, and, when no draft
        is usable, where its template question goes (`_template_dimension`; else None)."""
        pred = yield self.decompose, {"task_prompt": task_prompt, "dimensions": dimensions, "requirement": requirement}
        if isinstance(pred, AdapterParseError):
            drafts, failure = [], "the LM's decomposition could not be parsed"
        else:
            drafts = list(pred.questions or [])
            failure = "" if drafts else "the LM drafted no question"
        if any(_read_draft(d, dimensions, source)[2] is not None for d in drafts):
            return drafts, failure, None
        placement = yield from self._template_dimension(task_prompt, dimensions, requirement)
        return drafts, failure, placement

    def _template_dimension(self, task_prompt: str, dimensions: list[str], requirement: str) -> PredictorCalls:
        """Where a template question about `requirement` goes: (its dimension, its
        ``dimension_source``), or (None, why it cannot be told); see the class docstring."""
        if len(dimensions) == 1:
            return dimensions[0], "only_dimension"
        answers = []
        for order in (list(dimensions), list(reversed(dimensions))):
            # the answer's type lists the allowed names, so a schema-constrained LM can only pick one of them
            signature = AssignDimension.with_updated_fields("dimension", type_=Literal[tuple(order)])
            pred = yield self.assign_dimension, {"signature": signature, "task_prompt": task_prompt,
                                                 "dimensions": order, "requirement": requirement}
            if isinstance(pred, AdapterParseError):
                return None, "the LM's answer to which dimension it is about could not be parsed"
            key = normalize_dimension(str(pred.dimension or ""))
            if key not in dimensions:
                return None, f"the LM filed it under {_one_line(str(pred.dimension))!r}, none of the dimensions"
            answers.append(key)
        if answers[0] != answers[1]:
            return None, (f"the LM filed it under '{answers[0]}' with the dimensions listed in one order and under "
                          f"'{answers[1]}' in the other, so its choice followed the list, not the requirement")
        return answers[0], "assigned"

    def _step(self, step: str, *counts: int) -> None:
        """Tell `on_step` that `step` is done (see the class docstring)."""
        if self.on_step is not None:
            self.on_step(step, *counts)

    @staticmethod
    def _place(lm_name: str, dimensions: list[str], source: str) -> tuple[str | None, str]:
        """The declared dimension a question labelled `lm_name` goes to, and its
        ``dimension_source``; (None, "") when the name matches none of several."""
        key = normalize_dimension(lm_name)
        if key in dimensions:
            return key, source
        if len(dimensions) == 1:
            return dimensions[0], f"mapped_from:{_one_line(lm_name) or '(blank)'}"
        return None, ""

    def forward(self, task_prompt: str) -> dspy.Prediction:
        """Generate the question set for `task_prompt` (paper 3.1, steps 1 and 2).

        Returns:
            `dspy.Prediction` with ``question_set`` (`QuestionSet`; ids
            ``<dimension>-NN``; each question's ``origin`` and ``dimension_source`` set;
            ``generation_report`` filled), ``merged`` (number of duplicate drafts folded
            in, >= 0) and ``report`` (the same `GenerationReport`).

        Raises:
            BinEvalError: empty task prompt, the LM gives no usable requirements, or no
                requirement got a question (each named with the reason).
        """
        _check_task_prompt(task_prompt)
        requirement_texts, dropped_requirements = self._requirements(task_prompt)
        self._step("requirements", len(requirement_texts))
        dimensions, source, note = self._dimensions(task_prompt, requirement_texts)
        self._step("dimensions", len(dimensions))
        rows = _QuestionRows(requirement_texts, dimensions, source)
        for req in rows.requirements:
            rows.add(req, *run_predictor_calls(self._draft_calls(task_prompt, dimensions, req.text, source)))
            self._step("requirement", len(rows.rows), len(rows.templates))
        return rows.finish(task_prompt, note, dropped_requirements)

    async def aforward(self, task_prompt: str) -> dspy.Prediction:
        """`forward` for async programs (``await generator.acall(task_prompt=...)``): the same
        question set, with every requirement decomposed at once (``asyncio.gather``); `on_step`
        hears of the requirements in order once their drafts are in."""
        _check_task_prompt(task_prompt)
        requirement_texts, dropped_requirements = await self._arequirements(task_prompt)
        self._step("requirements", len(requirement_texts))
        dimensions, source, note = await self._adimensions(task_prompt, requirement_texts)
        self._step("dimensions", len(dimensions))
        rows = _QuestionRows(requirement_texts, dimensions, source)
        drafts = await asyncio.gather(*(arun_predictor_calls(self._draft_calls(task_prompt, dimensions, req.text,
                                                                               source))
                                        for req in rows.requirements))
        for req, (found, failure, placement) in zip(rows.requirements, drafts, strict=True):
            rows.add(req, found, failure, placement)
            self._step("requirement", len(rows.rows), len(rows.templates))
        return rows.finish(task_prompt, note, dropped_requirements)


def _check_task_prompt(task_prompt: object) -> None:
    if not isinstance(task_prompt, str) or not task_prompt.strip():
        raise BinEvalError("the task prompt is empty: write the instructions the evaluated model gets")


def _read_draft(draft: object, dimensions: list[str], source: str) -> tuple[str, str, str | None, str, str | None]:
    """A drafted question read: (text, the LM's dimension name, the declared dimension it goes to
    or None, its ``dimension_source``, why it cannot be used or None)."""
    text = str(getattr(draft, "question", "") or "").strip()
    lm_dim = str(getattr(draft, "dimension", "") or "")
    problem = question_text_problem(text)
    if problem is not None:
        return text, lm_dim, None, "", problem
    dim, dim_source = QuestionGenerator._place(lm_dim, dimensions, source)
    return text, lm_dim, dim, dim_source, None if dim is not None else "unknown dimension"


class _QuestionRows:
    """The question set being assembled from each requirement's drafts, in requirement order."""

    def __init__(self, requirement_texts: list[str], dimensions: list[str], source: str) -> None:
        self.requirements = [Requirement(id=f"r{i}", text=t) for i, t in enumerate(requirement_texts, start=1)]
        self.dimensions = dimensions
        self.source = source
        self.rows: list[dict] = []  # BinaryQuestion fields, in order; "origin" may still change to "merged"
        self.by_key: dict[str, dict] = {}
        self.merged = 0
        self.dropped: list[DroppedDraft] = []
        self.templates: list[tuple[dict, str]] = []
        self.left_out: list[LeftOutRequirement] = []

    def add(self, req: Requirement, drafts: list[object], failure: str,
            placement: tuple[str | None, str] | None) -> None:
        """File one requirement's drafts (kept, merged or dropped), or its fallback template under
        `placement` (dimension, ``dimension_source``), or leave it out when that dimension is
        None (the second element then says why)."""
        dimensions, source = self.dimensions, self.source
        used_any = False
        for draft in drafts:
            text, lm_dim, dim, dim_source, problem = _read_draft(draft, dimensions, source)
            if problem is not None and problem != "unknown dimension":
                self.dropped.append(DroppedDraft(text=text, reason=problem, requirement_id=req.id,
                                                 lm_dimension=lm_dim))
                continue
            if dim is None:
                self.dropped.append(DroppedDraft(
                    text=text, reason="unknown dimension", requirement_id=req.id, lm_dimension=lm_dim,
                    detail=f"{lm_dim!r} is none of the dimensions {dimensions}"))
                continue
            used_any = True
            key = question_key(text)
            if key in self.by_key:
                self.merged += 1
                if self.by_key[key]["origin"] == "generated":
                    self.by_key[key]["origin"] = "merged"
                continue
            violation = str(getattr(draft, "violation_example", "") or "").strip()
            self.by_key[key] = row = {
                "dimension": dim, "text": text, "violation_example": violation, "requirement_id": req.id,
                "origin": "generated", "dimension_source": dim_source}
            self.rows.append(row)
        if not used_any:
            reason = failure or f"all {len(drafts)} drafted question(s) were dropped"
            dim, dim_source = placement or (None, "its dimension was not asked for")
            if dim is None:
                self.left_out.append(LeftOutRequirement(requirement_id=req.id, reason=reason, why_left_out=dim_source))
                return
            row = {
                "dimension": dim,
                "text": f"Does the output meet this requirement: {req.text.rstrip('.')}?",
                "violation_example": "", "requirement_id": req.id, "origin": "fallback_template",
                "dimension_source": dim_source}
            self.by_key.setdefault(question_key(row["text"]), row)
            self.rows.append(row)
            self.templates.append((row, reason))

    def finish(self, task_prompt: str, note: str, dropped_requirements: list[DroppedDraft]) -> dspy.Prediction:
        """The generator's prediction: ids given, the report filled, its warnings logged."""
        dimensions, rows, templates, merged, dropped = (self.dimensions, self.rows, self.templates, self.merged,
                                                        self.dropped)
        requirements, source = self.requirements, self.source
        per_dim_count = {d: 0 for d in dimensions}
        questions: list[BinaryQuestion] = []
        for row in rows:
            per_dim_count[row["dimension"]] += 1
            row["id"] = f"{row['dimension']}-{per_dim_count[row['dimension']]:02d}"
            questions.append(BinaryQuestion(**row))
        by_origin = {o: sum(q.origin == o for q in questions) for o in ("generated", "merged", "fallback_template")}
        report = GenerationReport(
            dimensions_source=source, dimensions_note=note,
            empty_dimensions=[d for d in dimensions if not per_dim_count[d]],
            questions_by_origin=by_origin, duplicates_merged=merged,
            fallback_templates=[FallbackTemplate(question_id=row["id"], requirement_id=row["requirement_id"],
                                                 reason=reason) for row, reason in templates],
            relabelled=[q.id for q in questions if (q.dimension_source or "").startswith("mapped_from:")],
            dropped_questions=dropped, dropped_requirements=dropped_requirements, left_out_requirements=self.left_out,
        )
        if not questions:
            causes: dict[str, list[str]] = {}  # one cause, every requirement it applies to
            for r in self.left_out:
                causes.setdefault(f"{r.reason}, and {r.why_left_out}", []).append(r.requirement_id)
            lines = "; ".join(f"{', '.join(ids)}: {cause}" for cause, ids in causes.items())
            raise BinEvalError(f"no usable question for any of the {len(requirements)} requirements ({lines}). "
                               "Try a stronger LM (a larger model), or write the questions by hand (examples/summeval/"
                               "questions.json is a complete example).")
        for warning in report.warnings():
            logger.warning("question generation: %s", warning)
        lm = dspy.settings.lm
        question_set = QuestionSet(
            task_prompt=task_prompt, dimensions=[d for d in dimensions if per_dim_count[d]],
            requirements=requirements, questions=questions, generated_by=getattr(lm, "model", None),
            generation_report=report,
        )
        return dspy.Prediction(question_set=question_set, merged=merged, report=report)
