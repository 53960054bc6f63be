"""BinEval: answer every binary question about one output and score the answers (paper 3.2)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Literal

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.analysis.explanation_flags import explanation_flags
from binaryeval_dspy.data.text_checks import is_empty_output
from binaryeval_dspy.engines.call_pool import map_items
from binaryeval_dspy.engines.item_work import CallRequest, ItemDone, ItemWork
from binaryeval_dspy.errors import BinEvalError, ConfigError, InputError, LMConfigError
from binaryeval_dspy.lm.adapters import (
    CUT_REPLY_NOTE,
    is_empty_reply,
    judging_adapter,
    judging_context,
    reply_text,
)
from binaryeval_dspy.lm.cache_identity import cache_scoped
from binaryeval_dspy.lm.evaluated_text import as_evaluated_text
from binaryeval_dspy.lm.final_answer import (
    RAW_REPLY_LIMIT,
    is_incomplete_reply,
    parse_chat_reply,
    parse_json_reply,
)
from binaryeval_dspy.lm.logprobs import p_yes
from binaryeval_dspy.lm.verdict_text import normalize_yes_no, reservation
from binaryeval_dspy.programs.code_checks import answer_with_check
from binaryeval_dspy.programs.question_set_state import QuestionSetState, ScaleState
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.scoring import score_verdicts
from binaryeval_dspy.signatures.binary_judgment import JudgeBinaryQuestion, JudgeBinaryVerdict


def _salvage(raw: str, signature: type[dspy.Signature], *, cut: bool = False,
             failures: list[AdapterParseError] | None = None) -> dspy.Prediction | None:
    """The judge's final answer in `raw`, read by our parsers; None if it holds none (each
    parser's failure is appended to `failures` when given).

    Needed when the configured adapter is not one of ours (e.g. DSPy's own ChatAdapter from
    a plain ``dspy.configure(lm=...)``), or when the reply came in the other format: the
    adapter's parse failed, ours may still read the reply, with the same final-answer,
    planted-text and complete-answer rules (`binaryeval_dspy.lm.final_answer`); `cut` says
    the reply stopped at ``max_tokens``.
    """
    text = (raw or "").strip()
    chat = partial(parse_chat_reply, cut=cut)
    for parse in (parse_json_reply, chat) if text.startswith(("{", "```")) else (chat, parse_json_reply):
        try:
            return dspy.Prediction(**parse(signature, text))
        except AdapterParseError as exc:
            if failures is not None:
                failures.append(exc)
    return None


def _qualified(pred: dspy.Prediction, verdict: str, explanation: str) -> bool:
    """Whether the judge qualified its `verdict` with a reservation (`verdict_text.reservation`):
    in the verdict field (``"Yes, but the date is wrong"``; our adapters name it in the
    prediction's ``qualified``, another adapter leaves the text in ``verdict``), or by opening
    the explanation with the same verdict word and a reservation (``{"verdict": "yes",
    "explanation": "Yes, although it omits the vote."}``, all a schema-held verdict leaves)."""
    named = getattr(pred, "qualified", None)
    if isinstance(named, dict) and named.get("verdict"):
        return True
    if reservation(pred.verdict):
        return True
    return normalize_yes_no(explanation) == verdict and reservation(explanation) is not None


LogprobMode = Literal["auto", "on", "off"]
_TOP_LOGPROBS = 5


_EMPTY_REPLY = "EmptyReply: the LM's reply held no answer (no choices or no text)"


def _parse_reason(exc: AdapterParseError) -> str:
    """The parser's reason in one line, without DSPy's long restatement of the signature."""
    message = str(getattr(exc, "message", None) or "could not read a yes/no verdict")
    return message.splitlines()[0][:300]


_LIBRARY_ADVICE = "\n\n  To fix:"  # DSPy's HTTP layer (lm15) appends advice written for its own API users

_HINTS = {  # error type name -> what to do with bineval's settings (the CLI shows them as flags)
    **dict.fromkeys(("LMRateLimitError", "RateLimitError"),
                    "the endpoint kept refusing after DSPy's retries: lower `concurrency` or wait, then rerun "
                    "(only unanswered questions are asked)"),
    **dict.fromkeys(("LMTimeoutError", "Timeout", "APITimeoutError", "TimeoutError", "ReadTimeout", "ConnectTimeout"),
                    "a request took longer than `timeout` seconds: raise `timeout` or lower `concurrency`, then "
                    "rerun"),
    **dict.fromkeys(("LMAuthError", "AuthenticationError"),
                    "the endpoint refused the key: for a base URL pass `api_key_env` NAME (the variable holding its "
                    "key; without it a placeholder is sent), for a provider set its key variable, then rerun"),
}


_NOT_FOUND_HINT = ("the server has no such path or model: check that `spec` ends where its OpenAI-compatible API "
                   "starts (usually .../v1) and that `model` names a model it serves")

# Advice inside DSPy's HTTP-layer (lm15) messages that names its own API: what it means in bineval's settings.
_LIBRARY_PHRASES = (
    (re.compile(r"this is lm15's read timeout, not a server failure\W+raise it with Timeouts\(read=\.\.\.\) "
                r"if the model needs longer"),
     "the client's read timeout, not a server failure"),
    (re.compile(r"raise max_connections, or Timeouts\(pool=\.\.\.\) to wait longer"), "lower `concurrency`"),
)


def error_text(exc: BaseException, limit: int = 2000) -> str:
    """``"<ErrorType>: <message>"`` of a failed call, cut to `limit` characters (for records).

    Advice that DSPy's HTTP layer appends for its own API (``To fix: ... Timeouts(read=...)``,
    "lm15 never retries for you") is replaced by what to do with bineval's options: DSPy has
    already retried, and the timeout is ``--timeout``. A provider error's HTTP status is
    added when the message lacks it; a 404 says to check the base URL's ``/v1`` and the
    model name.
    """
    name = type(exc).__name__
    message = str(exc).split(_LIBRARY_ADVICE, 1)[0].rstrip()
    for phrase, ours in _LIBRARY_PHRASES:
        message = phrase.sub(ours, message)
    status = getattr(exc, "status", None)  # DSPy's provider errors carry the HTTP status
    if isinstance(status, int) and not isinstance(status, bool) and str(status) not in message:
        message = f"{message} (HTTP {status})"
    hint = _hint(exc) or (_NOT_FOUND_HINT if status == 404 else None)
    return (f"{name}: {message}" + (f" ({hint})" if hint else ""))[:limit]


def _hint(exc: BaseException) -> str | None:
    """What to do about `exc`, by its type or the type of what caused it: DSPy's HTTP layer
    raises a read timeout as an ``LMTransportError`` caused by a ``ReadTimeout`` / `TimeoutError`."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        hint = _HINTS.get(type(cause).__name__) or (_HINTS["TimeoutError"] if isinstance(cause, TimeoutError) else None)
        if hint:
            return hint
        cause = cause.__cause__ or cause.__context__
    return None


class BinEval(dspy.Module):
    """Evaluate an output with binary questions and aggregate yes-rates (paper 3.2).

    Each question is answered in its own LM call (the evaluator sees the input, the
    output and one question). Every question has one of four outcomes:

    * ``yes`` / ``no``: the answer, with its explanation (and P(yes) when the LM
      returns token log-probabilities);
    * ``unparsed``: the LM answered but not as yes/no (the raw reply is kept);
    * ``error``: the call failed after DSPy's retries (rate limit, server error,
      timeout, context overflow); the error is kept and a resumed run asks again.

    Unparsed and error are excluded from every denominator and counted in the score
    card, never treated as "no"; a failed question never discards the others.
    Questions that carry a ``check`` are answered by that code check first, always,
    and never sent to the LM; their verdicts are scored like the LM's.

    Args:
        question_set: the frozen questions (a `QuestionSet` or the path of its JSON);
            kept as program state with the scale, so ``program.save(path)`` /
            ``program.load(path)`` round-trip both.
        scale: interval [a, b] for scaled scores, e.g. ``(1, 5)`` for a Likert scale;
            two different finite numbers.
        num_threads: LM calls in flight for one item's questions when called directly
            (an int >= 1; 1 = one after the other). Runs over many items set their
            concurrency across items instead (`binaryeval_dspy.runs.evaluate_items`).
        explanations: True (default) asks for a verdict and an explanation; False asks
            for the verdict alone (`JudgeBinaryVerdict`): fewer tokens on every LM, about
            2x faster per item on the embedded SmolLM2 (2.26x measured by
            ``benchmarks/remote_throughput.py --parts embedded``), and the cheapest way to
            get P(yes).
        logprobs: ``"auto"`` (default) asks the LM for token log-probabilities and
            records P(yes) per question and mean P(yes) per dimension
            (``score_card.p_yes_scores``) when it returns them; an LM that refuses the
            parameter is not asked again. ``"on"`` always asks, ``"off"`` never.

    Raises:
        BinEvalError: a question set of another type, a bad scale, thread count or
            logprobs mode.
        QuestionSetError: a question-set path that does not load.

    Example:
        >>> evaluator = BinEval(question_set, scale=(1, 5))           # doctest: +SKIP
        >>> pred = evaluator(input=article, output=summary)           # doctest: +SKIP
        >>> pred.score_card.dimension_scores["consistency"]           # in [0, 1]  # doctest: +SKIP
    """

    def __init__(
        self,
        question_set: QuestionSet | None = None,
        *,
        scale: tuple[float, float] = (0.0, 1.0),
        num_threads: int = 1,
        explanations: bool = True,
        logprobs: LogprobMode = "auto",
    ) -> None:
        super().__init__()
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise ConfigError("bad num_threads", expected="an integer >= 1", received=repr(num_threads),
                              fix="pass num_threads=1, or the number of judge calls to run at once.")
        if logprobs not in ("auto", "on", "off"):
            raise ConfigError("bad logprobs", expected="'auto', 'on' or 'off'", received=repr(logprobs),
                              fix="pass logprobs='auto' (use log-probabilities when the LM returns them).")
        if isinstance(question_set, (str, Path)):
            question_set = QuestionSet.load(question_set)
        if question_set is not None and not isinstance(question_set, QuestionSet):
            raise ConfigError("bad question_set", expected="a QuestionSet or the path of its JSON file",
                              received=type(question_set).__name__,
                              fix="load the file with QuestionSet.load(path), or pass its path.")
        self.questions = QuestionSetState(question_set)
        self.explanations = bool(explanations)
        self.judge = dspy.Predict(JudgeBinaryQuestion if self.explanations else JudgeBinaryVerdict)
        self.scale_state = ScaleState(_checked_scale(scale))
        self.num_threads = num_threads
        self.logprobs = logprobs
        self._logprobs_refused = False

    @property
    def scale(self) -> tuple[float, float]:
        """The interval [a, b] of scaled scores (saved with the program)."""
        return self.scale_state.value

    @scale.setter
    def scale(self, value: tuple[float, float]) -> None:
        self.scale_state.value = _checked_scale(value)

    @property
    def question_set(self) -> QuestionSet:
        """The question set in use. Raises BinEvalError if none was given or loaded."""
        if self.questions.value is None:
            raise BinEvalError("this BinEval has no question set.",
                               fix="pass one to BinEval(question_set), or load a saved program.")
        return self.questions.value

    @question_set.setter
    def question_set(self, value: QuestionSet) -> None:
        self.questions.value = value

    def _ask(self, fields: dict[str, str]) -> dspy.Prediction:
        """One judge call, asking for log-probabilities unless the mode or the LM says no.

        The call goes through `judging_adapter`, so the judge's final answer is read even
        when the user configured DSPy's own ChatAdapter or JSONAdapter (or none).
        """
        settings = dspy.settings
        lm = self.judge.lm or settings.lm
        scoped = cache_scoped(lm)  # a plain dspy.LM: cached answers scoped to its endpoint
        if scoped is not lm:
            fields = {**fields, "lm": scoped}
        with judging_context(scoped):
            return self._ask_with_logprobs(fields)

    def _ask_with_logprobs(self, fields: dict[str, str]) -> dspy.Prediction:
        if self.logprobs == "off" or self._logprobs_refused:
            return self.judge(**fields)
        try:
            return self.judge(**fields, config={"logprobs": True, "top_logprobs": _TOP_LOGPROBS})
        except AdapterParseError:
            raise
        except Exception as exc:
            if self.logprobs == "auto" and "logprob" in str(exc).lower():
                self._logprobs_refused = True  # this LM does not take the parameter: stop asking
                return self.judge(**fields)
            raise

    @staticmethod
    def question_fields(input: str, output: str, question: BinaryQuestion) -> dict[str, str]:
        """The judge signature's input fields for one question: the input and output fenced as
        evaluated text (`as_evaluated_text`), then the question and its violation example. The
        first two are the same for every question of an item: its shared prompt prefix."""
        return {"input": as_evaluated_text(input), "output": as_evaluated_text(output),
                "question": question.text, "violation_example": question.violation_example}

    def call_request(self, input: str, output: str, question: BinaryQuestion) -> CallRequest:
        """What `judge_question` will send for one question, for a ``--max-cost`` budget to
        reserve its worst case (`binaryeval_dspy.cost.budget`): the messages as the
        judging adapter in effect formats them (cache padding included) and the LM's
        ``max_tokens`` (None when the LM sets none). Makes no LM call."""
        settings = dspy.settings
        lm = self.judge.lm or settings.lm
        adapter = judging_adapter(settings.adapter, cache_scoped(lm)) or settings.adapter or dspy.ChatAdapter()
        messages = adapter.format(self.judge.signature, demos=self.judge.demos,
                                  inputs=self.question_fields(input, output, question))
        kwargs = getattr(lm, "kwargs", None) or {}
        cap = kwargs.get("max_tokens") or kwargs.get("max_completion_tokens")
        return CallRequest(messages=messages, max_tokens=int(cap) if cap else None)

    def judge_question(self, input: str, output: str, question: BinaryQuestion) -> QuestionVerdict:
        """Answer one binary question f_E(x, y, q) with its explanation (paper 3.2).

        Never raises for LM trouble: the outcome is in the verdict.

        Returns:
            A `QuestionVerdict`: yes/no (with P(yes) when log-probabilities came back,
            ``reply_cut`` when the reply stopped at ``max_tokens`` after its whole answer,
            and ``qualified`` when a reservation follows the verdict word, "Yes, but ...");
            ``unparsed`` (with the raw LM text) when the answer cannot be read as
            yes/no or is not complete (a reply that stops inside its JSON object or a field,
            whatever the finish reason; the error says why, and when the reply was cut at
            ``max_tokens``); ``error`` (with the
            error's type and message) when the call failed.
        """
        fields = self.question_fields(input, output, question)
        cut = False
        try:
            pred = self._ask(fields)
        except AdapterParseError as exc:
            cut = str(getattr(exc, "message", "")).startswith(CUT_REPLY_NOTE)
            raw = reply_text(exc.lm_response)
            if is_empty_reply(exc):
                # a 200 with no choices or an empty message: no answer, not an unreadable one
                return QuestionVerdict(question_id=question.id, verdict="error", error=_EMPTY_REPLY)
            failures: list[AdapterParseError] = []
            pred = _salvage(raw, self.judge.signature, cut=cut, failures=failures)
            if pred is None:
                # say why in the terms of the format the reply was in: a reply cut inside its
                # answer says so, whichever parser saw it first
                exc = next((f for f in (exc, *failures) if is_incomplete_reply(f)), exc)
                reason = _parse_reason(exc)
                if cut and not reason.startswith(CUT_REPLY_NOTE):
                    reason = f"{CUT_REPLY_NOTE}: {reason}"
                return QuestionVerdict(
                    question_id=question.id, verdict="unparsed", raw_answer=raw[:RAW_REPLY_LIMIT],
                    error=f"{type(exc).__name__}: {reason}",
                )
        except LMConfigError:
            raise  # an adapter our parsing rules cannot hold under (`judging_adapter`): refused, not an outcome
        except Exception as exc:  # noqa: BLE001 - transport, rate limit, timeout, overflow: not an answer
            return QuestionVerdict(question_id=question.id, verdict="error", error=error_text(exc))
        if not hasattr(pred, "verdict"):  # e.g. a 200 reply with no choices: the LM gave no answer at all
            return QuestionVerdict(question_id=question.id, verdict="error", error=_EMPTY_REPLY)
        verdict = normalize_yes_no(pred.verdict)
        explanation = str(getattr(pred, "explanation", "") or "").strip()
        raw_reply = getattr(pred, "raw_reply", None)
        if verdict is None:
            return QuestionVerdict(
                question_id=question.id, verdict="unparsed", raw_answer=str(raw_reply or pred.verdict)[:RAW_REPLY_LIMIT],
                error="the verdict field is neither yes nor no",
            )
        qualified = _qualified(pred, verdict, explanation)
        if qualified and not raw_reply:
            raw_reply = f"verdict: {pred.verdict}\nexplanation: {explanation}"  # what the judge wrote
        return QuestionVerdict(question_id=question.id, verdict=verdict, explanation=explanation,
                               p_yes=p_yes(getattr(pred, "logprobs", None)),
                               flags=explanation_flags(verdict, explanation, question.violation_example) or None,
                               raw_answer=str(raw_reply)[:RAW_REPLY_LIMIT] if raw_reply else None,
                               reply_cut=cut or bool(getattr(pred, "reply_cut", False)), qualified=qualified)

    def item_work(
        self, input: str, output: str, previous: Sequence[QuestionVerdict] = (),
        question_set: QuestionSet | None = None,
    ) -> ItemWork[QuestionVerdict, dspy.Prediction]:
        """One item as independent question calls plus a scoring step (for `map_items`).

        Code-checked questions are answered here, before any LM call. Questions with an
        answer in `previous` (yes, no or unparsed from the LM) are not asked again: a
        resumed run asks only the questions whose call failed (``error``) or that have
        no verdict yet.

        Args:
            input: the source x; non-empty.
            output: the output y under evaluation. One that is empty after removing
                whitespace and invisible format characters (`is_empty_output`) is not
                judged: the prediction has ``status="empty_output"``, ``score`` None,
                ``score_card`` None and no verdicts, and no LM call is made.
            previous: verdicts stored for this item by an earlier, incomplete run.
            question_set: the questions for this item only (e.g. an IFBench prompt's
                own questions); None uses the program's `question_set`.

        Returns:
            An `ItemWork` whose calls each return a `QuestionVerdict` and whose finish
            returns the prediction `forward` returns. A question a ``--max-cost`` budget
            kept from being asked (`ItemWork.unsent`) gets an ``error`` verdict
            (``NotAsked: ...``), so a rerun asks it.

        Raises:
            InputError: `input` is empty or not a string, or `output` is not a string.
            BinEvalError: no `question_set` given and the program has none.
        """
        if not isinstance(input, str) or not input.strip():
            raise InputError(f"BinEval needs a non-empty string, got {input!r:.60}", field="input")
        if not isinstance(output, str):
            raise InputError(f"BinEval needs a string, got {output!r:.60}", field="output")
        if question_set is None:
            question_set = self.question_set
        if is_empty_output(output):  # nothing to judge: an outcome, never a score and never an LM call
            return ItemWork(calls=[], finish=lambda _asked: dspy.Prediction(
                score=None, score_card=None, verdicts=[], status="empty_output"), one_call_each=True)
        by_code = {q.id: answer_with_check(q, input=input, output=output) for q in question_set.code_checked}
        kept = {v.question_id: v for v in previous if v.answered and v.source == "lm" and v.question_id not in by_code}
        ask = [q for q in question_set.questions if q.id not in by_code and q.id not in kept]

        def finish(asked: list[QuestionVerdict]) -> dspy.Prediction:
            by_id = {**kept, **{v.question_id: v for v in asked}, **by_code}
            verdicts = [by_id[q.id] for q in question_set.questions]
            card = score_verdicts(verdicts, question_set, scale=self.scale)
            lm_asked = [v for v in verdicts if v.source == "lm"]
            status = ("error" if lm_asked and not any(v.answered for v in lm_asked)  # as `ItemResult.status`
                      else "scored" if card.overall is not None else "unscored")
            return dspy.Prediction(score=card.overall, score_card=card, verdicts=verdicts, status=status)

        def unsent(position: int, reason: str) -> QuestionVerdict:  # a call a --max-cost budget kept back
            return QuestionVerdict(question_id=ask[position].id, verdict="error",
                                   error=f"NotAsked: {reason}"[:2000])

        return ItemWork(calls=[partial(self.judge_question, input, output, q) for q in ask], finish=finish,
                        one_call_each=True, unsent=unsent,
                        request=lambda position: self.call_request(input, output, ask[position]))

    def forward(self, input: str, output: str, question_set: QuestionSet | None = None) -> dspy.Prediction:
        """Answer every question about `output` and score it.

        Args:
            input: the source x (document, dialogue context, instruction); non-empty.
            output: the output y under evaluation; non-empty.
            question_set: the questions for this call only; None uses the program's.

        Returns:
            `dspy.Prediction` with ``status`` (``"scored"``; ``"unscored"`` when no verdict
            parsed; ``"error"`` when every LM call failed; ``"empty_output"``: as
            `ItemResult.status`), ``score`` (overall yes-rate in [0, 1]; None when nothing
            parsed: a failure is never a number, so as a DSPy metric use `BinEvalMetric`,
            which returns a documented fallback score with ``scored=False`` and counts it,
            not ``lambda ex, pred: evaluator(...).score``, whose None fails a whole
            `dspy.Evaluate`), ``score_card`` (`ScoreCard`: per-dimension S_d, counts
            including unparsed and error, scaled scores, P(yes) soft scores when
            available) and ``verdicts`` (list of `QuestionVerdict`, in question order).

        Raises:
            InputError: `input` or `output` is empty or not a string. A failed LM call
                does not raise: it is an ``error`` verdict.
        """
        work = self.item_work(input, output, question_set=question_set)
        outcome: list[ItemDone] = []
        map_items([None], lambda _index, _item: work, outcome.append,
                  concurrency=min(self.num_threads, max(1, len(work.calls))))
        done = outcome[0]
        if done.error is not None:
            raise done.error
        return done.result


def _checked_scale(scale: object) -> tuple[float, float]:
    """(a, b) as floats; raises BinEvalError unless two different finite numbers."""
    try:
        low, high = (float(v) for v in scale)  # type: ignore[union-attr]
    except (TypeError, ValueError) as exc:
        raise ConfigError("bad scale", expected="two numbers (a, b)", received=repr(scale),
                          fix="pass scale=(0, 1), or the interval the scores should span.") from exc
    if not (math.isfinite(low) and math.isfinite(high)) or low == high:
        raise ConfigError("bad scale", expected="two different finite numbers (a, b)", received=repr(scale),
                          fix="pass scale=(0, 1), or the interval the scores should span.")
    return low, high
