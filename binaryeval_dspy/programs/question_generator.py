"""QuestionGenerator: task prompt -> requirements -> binary questions (paper section 3.1)."""

from __future__ import annotations

import difflib
import logging
import re

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet, Requirement
from binaryeval_dspy.signatures.decomposition import DecomposeRequirement, DraftQuestion
from binaryeval_dspy.signatures.dimension_inference import InferDimensions
from binaryeval_dspy.signatures.requirement_summary import SummarizeRequirements

logger = logging.getLogger(__name__)

_FALLBACK_DIMENSION = "overall"


def normalize_dimension(name: str) -> str:
    """A dimension name as stored: lowercase snake_case, e.g. ``"Factual Consistency"`` ->
    ``"factual_consistency"``; "" if nothing is left."""
    return re.sub(r"[^a-z0-9]+", "_", str(name).strip().lower()).strip("_")


def question_key(text: str) -> str:
    """Key under which two questions count as identical: lowercase words only."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


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
    dimension. Dimension names are the user's, or inferred from the requirements when
    none are given. Identical questions (same words, ignoring case and punctuation) are
    merged; a requirement whose decomposition cannot be parsed becomes one question
    asking whether the output meets it, so no requirement is silently dropped.

    Args:
        dimensions: dimension names to use (normalized to snake_case); None infers them.
        max_requirements: keep at most this many requirements (>= 1).

    Example:
        >>> gen = QuestionGenerator(dimensions=["coherence", "consistency"])   # doctest: +SKIP
        >>> qs = gen(task_prompt="Summarize the article ...").question_set       # doctest: +SKIP
    """

    def __init__(self, *, dimensions: list[str] | None = None, max_requirements: int = 12) -> None:
        super().__init__()
        if max_requirements < 1:
            raise BinEvalError(f"max_requirements must be >= 1, got {max_requirements}")
        self.dimensions = [d for d in (normalize_dimension(x) for x in (dimensions or [])) if d] or None
        self.max_requirements = max_requirements
        self.summarize = dspy.Predict(SummarizeRequirements)
        self.infer_dimensions = dspy.Predict(InferDimensions)
        self.decompose = dspy.Predict(DecomposeRequirement)

    def _requirements(self, task_prompt: str) -> list[str]:
        try:
            found = _clean_list(self.summarize(task_prompt=task_prompt).requirements)
        except AdapterParseError as exc:
            raise BinEvalError(
                "the LM's requirement list could not be parsed, so no questions can be generated. "
                f"Raw answer (start): {str(exc.lm_response)[:300]!r}. Try a stronger --lm."
            ) from exc
        if not found:
            raise BinEvalError("the LM returned no requirements for this task prompt; try a stronger --lm")
        return found[: self.max_requirements]

    def _dimensions(self, task_prompt: str, requirements: list[str]) -> list[str]:
        if self.dimensions:
            return list(dict.fromkeys(self.dimensions))
        try:
            raw = self.infer_dimensions(task_prompt=task_prompt, requirements=requirements).dimensions
        except AdapterParseError:
            raw = []
        dims = list(dict.fromkeys(d for d in (normalize_dimension(x) for x in _clean_list(raw)) if d))[:6]
        return dims or [_FALLBACK_DIMENSION]

    def _drafts(self, task_prompt: str, dimensions: list[str], requirement: str) -> list[DraftQuestion]:
        try:
            drafts = self.decompose(task_prompt=task_prompt, dimensions=dimensions, requirement=requirement).questions
        except AdapterParseError:
            drafts = []
        drafts = [d for d in (drafts or []) if isinstance(d, DraftQuestion) and d.question.strip()]
        if not drafts:
            logger.warning("no parseable questions for requirement %r; asking it as one question", requirement)
            drafts = [DraftQuestion(
                question=f"Does the output meet this requirement: {requirement.rstrip('.')}?",
                dimension=dimensions[0], violation_example="",
            )]
        return drafts

    @staticmethod
    def _match_dimension(name: str, dimensions: list[str]) -> str:
        key = normalize_dimension(name)
        if key in dimensions:
            return key
        close = difflib.get_close_matches(key, dimensions, n=1, cutoff=0.0)
        return close[0] if close else dimensions[0]

    def forward(self, task_prompt: str) -> dspy.Prediction:
        """Generate the question set for `task_prompt`.

        Returns:
            `dspy.Prediction` with ``question_set`` (`QuestionSet`, origin "generated",
            ids ``<dimension>-NN``) and ``merged`` (number of duplicate questions merged).

        Raises:
            BinEvalError: empty task prompt, or the LM gives no usable requirements.
        """
        if not isinstance(task_prompt, str) or not task_prompt.strip():
            raise BinEvalError("the task prompt is empty: write the instructions the evaluated model gets")
        requirement_texts = self._requirements(task_prompt)
        dimensions = self._dimensions(task_prompt, requirement_texts)
        requirements = [Requirement(id=f"r{i}", text=t) for i, t in enumerate(requirement_texts, start=1)]
        seen: set[str] = set()
        merged = 0
        per_dim_count = {d: 0 for d in dimensions}
        questions: list[BinaryQuestion] = []
        for req in requirements:
            for draft in self._drafts(task_prompt, dimensions, req.text):
                key = question_key(draft.question)
                if key in seen:
                    merged += 1
                    continue
                seen.add(key)
                dim = self._match_dimension(draft.dimension, dimensions)
                per_dim_count[dim] += 1
                questions.append(BinaryQuestion(
                    id=f"{dim}-{per_dim_count[dim]:02d}", dimension=dim, text=draft.question.strip(),
                    violation_example=(draft.violation_example or "").strip(),
                    requirement_id=req.id, origin="generated",
                ))
        used = [d for d in dimensions if per_dim_count[d]]
        lm = dspy.settings.lm
        question_set = QuestionSet(
            task_prompt=task_prompt, dimensions=used, requirements=requirements, questions=questions,
            generated_by=getattr(lm, "model", None),
        )
        return dspy.Prediction(question_set=question_set, merged=merged)
