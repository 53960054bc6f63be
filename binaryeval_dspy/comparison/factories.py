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
from binaryeval_dspy.data.verdicts_file import read_verdicts
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.optimizers.bineval_optimizer import load_source_verdicts
from binaryeval_dspy.optimizers.bineval_optimizer.label_failures import label_reference
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


def _labels_note(setup: EvaluatorSetup, labels_file: str | Path | None) -> str:
    """How many labelled questions fall on each split, e.g. "Labels (labels.jsonl): 36 labelled
    questions on 4 training, 0 validation and 8 test items."

    Raises:
        InputError: no label names a training item and one of the questions (nothing to learn from).
    """
    reference = label_reference(setup.labels or [])
    questions = {q.id for q in setup.question_set.questions} if setup.question_set is not None else set()
    counts = {}
    for name in ("train", "val", "test"):
        ids = {str(ex.item_id) for ex in getattr(setup.split, name)}
        pairs = [pair for pair in reference if pair[0] in ids and pair[1] in questions]
        counts[name] = (len(pairs), len({item for item, _ in pairs}))
    if not counts["train"][0]:
        raise InputError("no label names a training item and one of the questions", path=labels_file,
                         field="labels_file",
                         fix="label questions of the training items (their ids are in the comparison's config.json "
                             "under setup.ids), or pass another labels file.")
    total = sum(n for n, _ in counts.values())
    return (f"Labels ({Path(str(labels_file)).name}): {total} labelled questions on {counts['train'][1]} training, "
            f"{counts['val'][1]} validation and {counts['test'][1]} test items.")


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
    labels_file: str | Path | None = None,
) -> SetupChoice:
    """The SummEval set-up for ``human`` / ``cross_model`` and the IFBench one for ``generation``.

    `labels_file` (``human`` only): a verdicts file of question-level labels on the
    SummEval items (`binaryeval_dspy.data.verdicts_file.read_verdicts`); the BinEval
    optimizer then learns from the questions answered against them, and the test reports
    the agreement with them (`EvaluatorSetup.labels`).

    Raises:
        InputError: an unknown mode, missing data, a bad question set, cross-model
            without a source, `labels_file` outside ``human`` or a bad labels file (before
            any LM call).
    """
    if labels_file is not None and mode != "human":
        raise InputError(f"`labels_file` applies to the human mode only, not {mode}", field="labels_file",
                         fix="drop the labels, or use the human mode.")
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
        labels = read_verdicts(labels_file) if labels_file is not None else None
        setup = EvaluatorSetup(split=split, prompt_lm=prompt_lm, num_threads=num_threads, question_set=question_set,
                               evaluator_mode=mode, judge_instructions=target_instructions, source_lm=source_lm,
                               source_verdicts=source_verdicts, regenerate_questions=regenerate_questions,
                               labels=labels)
        dims = ", ".join(question_set.dimensions)
        if mode == "human" and labels is not None:
            metric = ("per item, 1 - mean over dimensions of |evaluator yes-rate - human rating normalized to "
                      f"[0, 1]|; the BinEval optimizer learns instead from the questions answered against the "
                      f"labels of {labels_file}")
            test = (f"pooled Spearman's rho against SummEval experts, mean over {dims}; agreement with the labels "
                    "(Cohen's kappa, accuracy) on the test items' labelled questions")
        elif mode == "human":
            metric = ("per item, 1 - mean over dimensions of |evaluator yes-rate - human rating normalized to "
                      "[0, 1]| (the BinEval optimizer uses the same gaps: an item fails above 0.3)")
            test = f"pooled Spearman's rho against SummEval experts, mean over {dims}"
        else:
            metric = "per item, the share of binary questions answered as the source evaluator did"
            test = f"agreement with the source evaluator (and pooled Spearman vs experts, mean over {dims})"
        notes = [f"Question set: {path.name}, {len(question_set.questions)} questions ({dims})."]
        if labels is not None:
            notes.append(_labels_note(setup, labels_file))
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
