"""PromptUpdater: lessons -> dedup -> one substring rewrite per lesson (paper 3.3 steps 4-5).

Each unique lesson becomes one local edit ``prompt.replace(s, s')`` where the updater LM
names s, an exact substring of the current prompt, and writes s'. An edit whose s does
not occur exactly once is retried with the reason, then skipped and logged. A retry
constrains s to the prompt's own sentences that occur once (a ``Literal`` field, which
JSON-schema decoding enforces), so even a small model that cannot copy text exactly
names a real anchor; the replacement stays free text. A length
cap keeps the prompt under the size past which the paper saw accuracy collapse (its
"carrying capacity": an IFBench prompt grown from 22 to 6,248 characters in four
iterations, Appendix A.2.4, Table 6).
"""

from __future__ import annotations

import difflib
import logging
import re
from typing import Literal

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.lm.adapters import PredictorCalls, arun_predictor_calls, run_predictor_calls
from binaryeval_dspy.programs.lesson_memory import LessonMemory
from binaryeval_dspy.schemas.optimization_history import RewriteRecord
from binaryeval_dspy.signatures.substring_rewrite import RewriteSubstring

logger = logging.getLogger(__name__)

DEFAULT_MAX_PROMPT_CHARS = 4000
#: A constrained retry offers at most this many sentences (longer prompts retry unconstrained).
MAX_ANCHORS = 60


def anchor_sentences(prompt: str) -> list[str]:
    """The sentences of `prompt` that occur exactly once in it, in order, on one line each.

    Sentences end at ``.``, ``!`` or ``?`` followed by whitespace, or at a blank line.
    Runs of whitespace (line breaks included) become one space; `PromptUpdater` matches
    such a sentence back to the prompt text whatever whitespace the prompt has there.

    Returns:
        Unique, non-empty sentences (an empty list for an empty prompt).
    """
    flat = " ".join(prompt.split())
    anchors: list[str] = []
    for block in re.split(r"\n\s*\n", prompt):
        for part in re.split(r"(?<=[.!?])\s+", block):
            sentence = " ".join(part.split())
            if sentence and flat.count(sentence) == 1 and sentence not in anchors:
                anchors.append(sentence)
    return anchors


def _sentences(text: str) -> list[str]:
    """Split into lines, then sentences, so a diff of a one-paragraph prompt stays readable."""
    parts: list[str] = []
    for line in text.splitlines() or [""]:
        if line.strip():
            parts.extend(p for p in re.split(r"(?<=[.!?])\s+", line) if p)
        else:
            parts.append("")
    return [p + "\n" for p in parts]


def prompt_diff(old: str, new: str, *, name: str = "prompt") -> str:
    """A unified diff of two prompts, one sentence per line ("" when equal).

    Example:
        >>> print(prompt_diff("Be brief. Be kind.", "Be brief. Be very kind."))  # doctest: +NORMALIZE_WHITESPACE
        --- prompt (before)
        +++ prompt (after)
        @@ -1,2 +1,2 @@
         Be brief.
        -Be kind.
        +Be very kind.
    """
    if old == new:
        return ""
    lines = difflib.unified_diff(_sentences(old), _sentences(new), fromfile=f"{name} (before)",
                                 tofile=f"{name} (after)", n=1)
    return "".join(lines)


class PromptUpdater(dspy.Module):
    """Turn lessons into local edits of a prompt (paper Algorithm 1, lines 16-27).

    Args:
        max_lessons: lesson memory size; at most this many unique lessons are applied
            per call (paper: 10).
        max_attempts: LM attempts per lesson and prompt (first try + retries), >= 1.
            Retries choose the substring among `anchor_sentences` of the prompt.
        max_prompt_chars: an edit that would make the prompt longer than this is
            refused (retried, then skipped); None disables the cap. If the starting
            prompt is already longer, edits may not make it any longer.

    Example:
        >>> updater = PromptUpdater(max_lessons=10, max_prompt_chars=4000)      # doctest: +SKIP
        >>> pred = updater(prompt="Answer yes or no.", lessons=["Omitting a detail is not an error."])  # doctest: +SKIP
        >>> print(pred.prompt, pred.diff)                                     # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        max_lessons: int = 10,
        max_attempts: int = 2,
        max_prompt_chars: int | None = DEFAULT_MAX_PROMPT_CHARS,
    ) -> None:
        super().__init__()
        if max_attempts < 1:
            raise ConfigError("bad max_attempts", expected="an integer >= 1", received=repr(max_attempts),
                              fix="pass max_attempts=2 (the default).")
        if max_prompt_chars is not None and max_prompt_chars < 1:
            raise ConfigError("bad max_prompt_chars", expected="an integer >= 1, or None for no limit",
                              received=repr(max_prompt_chars), fix="pass a positive length, or None.")
        self.memory = LessonMemory(max_lessons=max_lessons)
        self.rewriter = dspy.Predict(RewriteSubstring)
        self.max_attempts = max_attempts
        self.max_prompt_chars = max_prompt_chars

    def _check(self, prompt: str, substring: str, replacement: str) -> tuple[str | None, str]:
        """(reason the edit cannot be applied or None, the substring actually matched)."""
        if not substring.strip():
            return "the substring is empty", substring
        count = prompt.count(substring)
        if count == 0:
            # Only whitespace differs (e.g. a line break in the prompt copied as a space):
            # match the words exactly and any run of whitespace between them.
            pattern = r"\s+".join(re.escape(word) for word in substring.split())
            spans = [m.group(0) for m in re.finditer(pattern, prompt)]
            if len(spans) == 1:
                substring, count = spans[0], 1
            elif spans:
                count = len(spans)
        if count == 0:
            return "the substring does not occur in the prompt", substring
        if count > 1:
            return f"the substring occurs {count} times in the prompt, not once", substring
        if replacement == substring:
            return "the replacement is identical to the substring", substring
        if self.max_prompt_chars is not None:
            new_len = len(prompt) - len(substring) + len(replacement)
            limit = max(self.max_prompt_chars, len(prompt))
            if new_len > limit:
                reason = (f"the edit would make the prompt {new_len} characters long, over the cap of "
                          f"{limit}; shorten the replacement")
                return reason, substring
        return None, substring

    def _anchored(self, anchors: list[str]) -> dspy.Predict:
        """The rewriter with its substring field restricted to `anchors` (same instructions)."""
        signature = self.rewriter.signature.with_updated_fields(
            "substring", type_=Literal[tuple(anchors)],  # type: ignore[valid-type]
            desc="one sentence of the prompt, copied from the allowed values")
        predictor = dspy.Predict(signature)
        predictor.demos = list(self.rewriter.demos)
        return predictor

    def rewrite(self, prompt: str, lesson: str, *, target: str = "prompt") -> tuple[str, RewriteRecord]:
        """Apply one lesson to `prompt` as one substring replacement.

        Args:
            prompt: the current prompt.
            lesson: the lesson to carry.
            target: the prompt's name, for the record.

        Returns:
            (the new prompt, or `prompt` unchanged when skipped; a `RewriteRecord`).
        """
        return run_predictor_calls(self._rewrite_calls(prompt, lesson, target))

    async def arewrite(self, prompt: str, lesson: str, *, target: str = "prompt") -> tuple[str, RewriteRecord]:
        """`rewrite` for async programs: the same result (attempts one after the other)."""
        return await arun_predictor_calls(self._rewrite_calls(prompt, lesson, target))

    def _rewrite_calls(self, prompt: str, lesson: str, target: str) -> PredictorCalls:
        """`rewrite`'s attempts as predictor calls (`binaryeval_dspy.lm.adapters.PredictorCalls`):
        each retry quotes why the previous answer could not be applied."""
        previous = ""
        record = RewriteRecord(target=target, lesson=lesson, prompt_chars=len(prompt))
        anchors = anchor_sentences(prompt)
        for attempt in range(1, self.max_attempts + 1):
            record.attempts = attempt
            constrained = attempt > 1 and 0 < len(anchors) <= MAX_ANCHORS
            record.constrained = constrained
            predictor = self._anchored(anchors) if constrained else self.rewriter
            pred = yield predictor, {"prompt": prompt, "lesson": lesson, "previous_attempt": previous}
            if isinstance(pred, AdapterParseError):
                record.reason = "the updater's answer could not be parsed"
                previous = "Your previous answer could not be read: give both the substring and the replacement."
                logger.debug("rewrite attempt %d unparsed: %s", attempt, pred)
                continue
            substring = str(pred.substring or "")
            replacement = str(pred.replacement or "")
            reason, substring = self._check(prompt, substring, replacement)
            record.substring, record.replacement = substring, replacement
            if reason is None:
                new_prompt = prompt.replace(substring, replacement, 1)
                record.applied, record.reason, record.prompt_chars = True, None, len(new_prompt)
                return new_prompt, record
            record.reason = reason
            previous = f"{reason}. Your substring was: {substring[:300]!r}."
        logger.warning("skipped lesson %r on %s after %d attempts: %s", lesson[:80], target, record.attempts,
                       record.reason)
        return prompt, record

    def rewrite_all(self, prompt: str, lessons: list[str], *, target: str = "prompt") -> tuple[str, list[RewriteRecord]]:
        """Apply each lesson in turn (each edit sees the prompt left by the previous one)."""
        records: list[RewriteRecord] = []
        for lesson in lessons:
            prompt, record = self.rewrite(prompt, lesson, target=target)
            records.append(record)
        return prompt, records

    async def arewrite_all(self, prompt: str, lessons: list[str], *,
                           target: str = "prompt") -> tuple[str, list[RewriteRecord]]:
        """`rewrite_all` for async programs: the same result (each edit waits for the previous one)."""
        records: list[RewriteRecord] = []
        for lesson in lessons:
            prompt, record = await self.arewrite(prompt, lesson, target=target)
            records.append(record)
        return prompt, records

    def forward(self, prompt: str, lessons: list[str], target: str = "prompt") -> dspy.Prediction:
        """Deduplicate `lessons` and apply the unique ones to `prompt`.

        Returns:
            `dspy.Prediction` with ``prompt`` (the updated prompt), ``diff`` (unified
            diff, "" if unchanged), ``lessons`` (unique lessons applied), ``dedup``
            (`DedupDecision` per input lesson) and ``rewrites`` (`RewriteRecord` per
            unique lesson).
        """
        filed = self.memory(lessons=list(lessons))
        new_prompt, records = self.rewrite_all(prompt, filed.lessons, target=target)
        return self._result(prompt, new_prompt, filed, records, target)

    async def aforward(self, prompt: str, lessons: list[str], target: str = "prompt") -> dspy.Prediction:
        """`forward` for async programs (``await updater.acall(...)``): the same result. Dedup
        and edits depend on each other's results, so their calls are made one after the other."""
        filed = await self.memory.acall(lessons=list(lessons))
        new_prompt, records = await self.arewrite_all(prompt, filed.lessons, target=target)
        return self._result(prompt, new_prompt, filed, records, target)

    @staticmethod
    def _result(prompt: str, new_prompt: str, filed: dspy.Prediction, records: list[RewriteRecord],
                target: str) -> dspy.Prediction:
        return dspy.Prediction(
            prompt=new_prompt, diff=prompt_diff(prompt, new_prompt, name=target), lessons=filed.lessons,
            dedup=filed.decisions, rewrites=records,
        )
