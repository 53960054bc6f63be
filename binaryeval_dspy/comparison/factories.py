"""Build a comparison set-up from plain options (what `bineval optimize` passes in)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from binaryeval_dspy.comparison.setups import (
    Checker,
    ComparisonSetup,
    EvaluatorSetup,
    GeneratorSetup,
)
from binaryeval_dspy.comparison.splits import (
    ifbench_split,
    load_ifbench_items,
    load_summeval_items,
    summeval_split,
)
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.optimizers.bineval_optimizer import load_source_verdicts
from binaryeval_dspy.schemas.question_set import QuestionSet

DEFAULT_QUESTIONS = Path(__file__).resolve().parents[2] / "examples" / "summeval" / "questions.json"


@dataclass
class SetupChoice:
    """A built set-up with the texts the report needs."""

    setup: ComparisonSetup
    metric_description: str
    test_description: str
    notes: list[str] = field(default_factory=list)


def trim_questions(question_set: QuestionSet, per_dimension: int | None) -> QuestionSet:
    """Keep the first `per_dimension` questions of each dimension (None or 0 keeps all)."""
    if not per_dimension:
        return question_set
    kept, counts = [], {d: 0 for d in question_set.dimensions}
    for q in question_set.questions:
        if counts[q.dimension] < per_dimension:
            kept.append(q)
            counts[q.dimension] += 1
    return question_set.model_copy(update={"questions": kept})


def make_setup(
    mode: str,
    *,
    data_dir: str | Path | None = None,
    limit: int | None = None,
    seed: int = 42,
    question_set_path: str | Path | None = None,
    questions_per_dimension: int | None = None,
    target_instructions: str | None = None,
    source_lm: LMHandle | None = None,
    source_verdicts_dir: str | Path | None = None,
    regenerate_questions: bool = False,
    prompt_lm: LMHandle | None = None,
    judge_lm: LMHandle | None = None,
    checkers: tuple[Checker, Checker] | None = None,
    num_threads: int = 1,
) -> SetupChoice:
    """The SummEval set-up for ``human`` / ``cross_model`` and the IFBench one for ``generation``.

    Raises:
        InputError: an unknown mode, missing data, a bad question set, or cross-model
            without a source (before any LM call).
    """
    if mode in ("human", "cross_model"):
        path = Path(question_set_path) if question_set_path else DEFAULT_QUESTIONS
        question_set = trim_questions(QuestionSet.load(path), questions_per_dimension)
        split = summeval_split(load_summeval_items(data_dir, dimensions=question_set.dimensions), seed=seed, limit=limit)
        source_verdicts = None
        if mode == "cross_model":
            if source_verdicts_dir is not None:
                source_verdicts = load_source_verdicts(source_verdicts_dir)
            elif source_lm is None:
                raise InputError("cross_model needs a source evaluator", field="`source_lm`",
                                 fix="pass `source_lm` SPEC (an LM for the source BinEval) or "
                                     "`source_verdicts_dir` DIR.")
        setup = EvaluatorSetup(split=split, prompt_lm=prompt_lm, num_threads=num_threads, question_set=question_set,
                               evaluator_mode=mode, judge_instructions=target_instructions, source_lm=source_lm,
                               source_verdicts=source_verdicts, regenerate_questions=regenerate_questions)
        dims = ", ".join(question_set.dimensions)
        if mode == "human":
            metric = ("per item, 1 - mean over dimensions of |evaluator yes-rate - human rating normalized to "
                      "[0, 1]| (the BinEval optimizer uses the same gaps: an item fails above 0.3)")
            test = f"pooled Spearman's rho against SummEval experts, mean over {dims}"
        else:
            metric = "per item, the share of binary questions answered as the source evaluator did"
            test = f"agreement with the source evaluator (and pooled Spearman vs experts, mean over {dims})"
        notes = [f"Question set: {path.name}, {len(question_set.questions)} questions ({dims})."]
        return SetupChoice(setup, metric, test, notes)
    if mode == "generation":
        split = ifbench_split(load_ifbench_items(data_dir), seed=seed, limit=limit)
        setup = GeneratorSetup(split=split, prompt_lm=prompt_lm, num_threads=num_threads, judge_lm=judge_lm,
                               checkers=checkers, starting_instructions=target_instructions)
        metric = ("BinEvalMetric: per prompt, the yes-rate of binary questions generated from that prompt, "
                  "answered by the judge LM (feedback: failed questions with explanations)")
        if setup.checkers is not None:
            test = "IFBench prompt-level loose and strict accuracy from the code checkers"
            notes = []
        else:
            test = "BinEval score on the test prompts (IFBench code checkers not installed)"
            notes = [("The IFBench code checkers (binaryeval_dspy.ifbench) were not available in this build, so "
                      "strict/loose accuracy is missing; the test column is the BinEval judge's score instead.")]
        return SetupChoice(setup, metric, test, notes)
    raise InputError(f"unknown mode {mode!r}; expected cross_model, human or generation", field="`mode`")
