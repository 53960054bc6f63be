"""What came back from the provider for each batch request, and how it is recorded.

`submission_outcomes` reads a submission's downloaded output and error files into one
`RequestOutcome` per request (pending, succeeded with the reply body, or failed with the
provider's error). Step 5 of a batch invocation (`_Recording.record`, a part of `_Run` in
`binaryeval_dspy.runs.batch_run`) parses the replies with the live judge call, turns
failed and expired requests into ``error`` verdicts tagged with `request_tag`, and stores
each finished item in results.jsonl as a live run would.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import dspy

from binaryeval_dspy.lm.batch_calls import ReplayLM
from binaryeval_dspy.lm.call_pool import ItemDone, ItemWork, map_items
from binaryeval_dspy.programs.bineval import error_text
from binaryeval_dspy.runs.batch_journal import BatchRequestRef, BatchStore, BatchSubmission
from binaryeval_dspy.runs.evaluation import empty_item_result, failed_item_result, item_result
from binaryeval_dspy.schemas.question_set import BinaryQuestion
from binaryeval_dspy.schemas.verdict import QuestionVerdict

if TYPE_CHECKING:
    from binaryeval_dspy.runs.batch_run import _Planned

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RequestOutcome:
    """What became of one batch request: ``pending``, ``succeeded`` (with the reply body)
    or ``failed`` (with the provider's error)."""

    state: Literal["pending", "succeeded", "failed"]
    body: dict | None = None
    error: str | None = None


def request_tag(custom_id: str) -> str:
    """The mark an ``error`` verdict from batch request `custom_id` carries (how a rerun knows it is recorded)."""
    return f"[batch request {custom_id}]"


def _outcome_from_line(entry: dict) -> RequestOutcome:
    error = entry.get("error")
    response = entry.get("response") or {}
    if error:
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else str(error)
        return RequestOutcome("failed", error=f"{code or 'error'}: {message or ''}".strip())
    status = response.get("status_code")
    body = response.get("body")
    if status == 200 and isinstance(body, dict):
        return RequestOutcome("succeeded", body=body)
    detail = body.get("error") if isinstance(body, dict) else None
    message = (detail.get("message") if isinstance(detail, dict) else None) or json.dumps(body)[:500]
    code = detail.get("code") or detail.get("type") if isinstance(detail, dict) else None
    return RequestOutcome("failed", error=f"HTTP {status}{f' {code}' if code else ''}: {message}")


def submission_outcomes(store: BatchStore, sub: BatchSubmission) -> dict[str, RequestOutcome]:
    """custom_id -> `RequestOutcome` for every request of `sub` (``pending`` until downloaded)."""
    if sub.phase != "submitted" or not (sub.ended and sub.downloaded):
        return {r.custom_id: RequestOutcome("pending") for r in sub.requests}
    found: dict[str, RequestOutcome] = {}
    for kind in ("output", "errors"):
        path = store.download_path(sub.number, kind)
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                logger.warning("%s:%d: not JSON; skipped", path, number)
                continue
            custom_id = str(entry.get("custom_id"))
            outcome = _outcome_from_line(entry)
            if custom_id not in found or found[custom_id].state != "succeeded":
                found[custom_id] = outcome
    why = f"the batch {sub.batch_id} ended with status {sub.status}"
    if sub.errors:
        why += " (" + "; ".join(sub.errors)[:500] + ")"
    missing = RequestOutcome("failed", error=f"no result for this request: {why}")
    return {r.custom_id: found.get(r.custom_id, missing) for r in sub.requests}


def failure_verdict(question_id: str, sub: BatchSubmission, custom_id: str, error: str) -> QuestionVerdict:
    """The ``error`` verdict of a failed or expired batch request (with the provider's error)."""
    return QuestionVerdict(question_id=question_id, verdict="error",
                           error=f"BatchRequestError: {error} (batch {sub.batch_id}) {request_tag(custom_id)}")


def _tagged(verdict: QuestionVerdict, custom_id: str) -> QuestionVerdict:
    if verdict.verdict != "error" or request_tag(custom_id) in (verdict.error or ""):
        return verdict
    return verdict.model_copy(update={"error": f"{verdict.error or 'error'} {request_tag(custom_id)}"})


class _Recording:
    """Step 5 of a batch invocation, as methods of `_Run` (`binaryeval_dspy.runs.batch_run`):
    store every item whose requests all have an outcome."""

    # ------------------------------------------------------------ 5. record

    def record(self, planned: list[_Planned]) -> None:
        ready = [p for p in planned if all(s in ("succeeded", "failed") for s in p.states)]
        if not ready:
            return
        replay = ReplayLM(self.handle)
        evaluation = self.result.evaluation

        def plan(_index: int, entry: _Planned) -> ItemWork:
            if entry.stored is None and _has_empty_output(entry.item):
                return ItemWork(calls=[], finish=lambda _r: _EMPTY)
            calls = [self.replayed(call, question, ref, replay)
                     for call, question, ref in zip(entry.work.calls, entry.questions, entry.refs)]
            return ItemWork(calls=calls, finish=entry.work.finish, one_call_each=True)

        def on_done(done: ItemDone) -> None:
            entry = ready[done.index]
            item = entry.item
            if done.result is _EMPTY:
                result = empty_item_result(self.program, item)
            elif done.error is not None:
                result = failed_item_result(self.program, item, done, entry.stored, lm=self.manifest.lm)
                evaluation.errors.append((result.item_id, error_text(done.error)))
            else:
                result = item_result(self.program, item, done, entry.stored, lm=self.manifest.lm)
            self.by_id[result.item_id] = result
            self.appended = True
            self.run_dir.append(result)
            evaluation.new_items += 1
            evaluation.usage += done.usage
            if entry.stored is not None:
                evaluation.resumed_items += 1
            evaluation.count_verdicts(result.verdicts)

        map_items(ready, plan, on_done, concurrency=1)

    def replayed(self, call: Callable[[], QuestionVerdict], question: BinaryQuestion,
                 ref: tuple[BatchSubmission, BatchRequestRef] | None, replay: ReplayLM) -> Callable[[], QuestionVerdict]:
        assert ref is not None
        sub, request = ref
        outcome = self.outcome_of(sub, request.custom_id)

        def answer() -> QuestionVerdict:
            if outcome.state != "succeeded" or outcome.body is None:
                return failure_verdict(question.id, sub, request.custom_id, outcome.error or "no result")
            return _tagged(replay.verdict(call, outcome.body), request.custom_id)

        return answer


_EMPTY = object()


def _has_empty_output(item: dspy.Example) -> bool:
    from binaryeval_dspy.data.text_checks import is_empty_output

    if "output" not in item:
        return False
    output = item.output
    return output is None or (isinstance(output, str) and is_empty_output(output))
