"""Built-in check: the text is written in an expected language (langdetect, seeded).

langdetect samples internally; its seed is fixed before every detection, so the same
text always gets the same answer. Texts with too few letters cannot be judged and get
an undecided result (recorded as unparsed, never as "no").

langdetect comes with the ``ifbench`` extra; without it a question set that uses this
check fails to load, with one line naming the extra.
"""

from __future__ import annotations

import importlib.util
import re
import threading

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from binaryeval_dspy.checks.registry import CheckResult, register_check
from binaryeval_dspy.extras import missing_extra, require

LANGDETECT_SEED = 0
_FEATURE = "The 'language' check"
_LOCK = threading.Lock()
_CODE_BLOCK = re.compile(r"```.*?```", re.DOTALL)


class LanguageParams(BaseModel):
    """Parameters of `language`.

    Attributes:
        expected: ISO 639-1 code(s) accepted, e.g. ``"en"`` or ``["en", "de"]``.
        min_probability: the detected language must have at least this probability, in (0, 1].
        min_letters: below this many letters the check is undecided.
        ignore_code_blocks: leave Markdown code fences out of the detection.
    """

    model_config = ConfigDict(extra="forbid")

    expected: list[str] = Field(min_length=1)
    min_probability: float = Field(default=0.5, gt=0.0, le=1.0)
    min_letters: int = Field(default=20, ge=1)
    ignore_code_blocks: bool = True

    @field_validator("expected", mode="before")
    @classmethod
    def _listify(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("expected")
    @classmethod
    def _codes(cls, value: list[str]) -> list[str]:
        codes = [v.strip().lower() for v in value]
        bad = [c for c in codes if not re.fullmatch(r"[a-z]{2,3}(-[a-z]{2,4})?", c)]
        if bad:
            raise ValueError(f"not language codes: {bad} (use ISO 639-1 codes such as 'en')")
        return codes

    @model_validator(mode="after")
    def _langdetect_installed(self) -> LanguageParams:
        # checked when a question set is loaded, so a missing extra stops the run before it starts
        if importlib.util.find_spec("langdetect") is None:
            raise missing_extra("langdetect", "ifbench", _FEATURE)
        return self


def detect_languages(text: str) -> list[tuple[str, float]]:
    """(language code, probability) pairs, most probable first; deterministic.

    Raises:
        langdetect.LangDetectException: the text has no usable features.
    """
    langdetect = require("langdetect", "ifbench", _FEATURE)

    with _LOCK:
        langdetect.DetectorFactory.seed = LANGDETECT_SEED
        return [(str(item.lang).lower(), float(item.prob)) for item in langdetect.detect_langs(text)]


@register_check("language", params=LanguageParams, _builtin=True)
def language(text: str, *, expected: list[str], min_probability: float, min_letters: int,
             ignore_code_blocks: bool) -> CheckResult:
    """Yes when the detected language is one of `expected` with enough probability."""
    errors = require("langdetect.lang_detect_exception", "ifbench", _FEATURE)

    body = _CODE_BLOCK.sub(" ", text) if ignore_code_blocks else text
    letters = sum(ch.isalpha() for ch in body)
    if letters < min_letters:
        return CheckResult(passed=None, evidence=f"only {letters} letters; at least {min_letters} needed to detect a language")
    try:
        found = detect_languages(body)
    except errors.LangDetectException as exc:
        return CheckResult(passed=None, evidence=f"language could not be detected ({exc})")
    top, prob = found[0]
    ok = top in expected and prob >= min_probability
    return CheckResult(
        passed=ok, evidence=f"detected '{top}' (p={prob:.2f}); expected {expected} with p >= {min_probability:g}",
        data={"detected": top, "probability": round(prob, 4)},
    )
