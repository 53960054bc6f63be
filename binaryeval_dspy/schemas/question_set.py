"""Requirements, binary questions and the question set that holds them (paper section 3.1).

A question set is the frozen evaluation instrument: a task prompt summarized into
requirements, each requirement decomposed into binary questions grouped by dimension.
It is saved as hand-editable JSON and validated on load.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from binaryeval_dspy.errors import QuestionSetError, UnknownNameError
from binaryeval_dspy.schemas.check_spec import CheckSpec
from binaryeval_dspy.schemas.generation_report import GenerationReport
from binaryeval_dspy.schemas.question_set_errors import as_question_set_error
from binaryeval_dspy.schemas.verdict_policy import VerdictPolicy
from binaryeval_dspy.schemas.versioned import (
    SchemaVersion,
    write_json_model,
)

QUESTION_SET_SCHEMA_VERSION = 1
_QUESTION_SET_OLDER_FIX = ("regenerate it with `bineval questions`, or rewrite it in the current "
                           "format (docs/question-sets.md)")


class Requirement(BaseModel):
    """One requirement r_k summarized from the task prompt (paper 3.1, step 1).

    Attributes:
        id: short stable identifier, e.g. ``"r1"``.
        text: the requirement in one sentence, non-empty.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)

    @field_validator("text", "id")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()


class BinaryQuestion(BaseModel):
    """One atomic yes/no question; "yes" means the output satisfies it (paper 3.1, step 2).

    Attributes:
        id: stable identifier, unique in its question set (e.g. ``"coherence-03"``).
        dimension: the evaluation dimension the question scores; must be declared in
            the question set's ``dimensions``.
        text: the question, non-empty.
        violation_example: a short example of an output that would get "no".
        requirement_id: the requirement it was decomposed from, if any.
        origin: how the question was made: ``"generated"`` (drafted by the LM in
            `QuestionGenerator`), ``"merged"`` (generated, and identical drafts for
            other requirements were folded into it), ``"fallback_template"`` (the
            requirement asked as one template question because its decomposition gave
            nothing usable) or ``"manual"`` (written by hand; the default, so files
            without the field load as before).
        dimension_source: how the question got its dimension, when generated:
            ``"given"`` / ``"inferred"`` / ``"fallback"`` (the LM named one of the
            caller's dimensions / of the dimensions it inferred / the fallback
            dimension ``overall``, equal after normalising case, spaces, underscores
            and hyphens), ``"mapped_from:<LM's name>"`` (the set has one dimension and
            the LM named another; the question was put under the only one), or
            ``"only_dimension"`` (a fallback template in a one-dimension set),
            ``"assigned"`` (a fallback template filed by the LM under the dimension it is
            about, the same answer with the dimensions listed in either order) or
            ``"first_declared"`` (a fallback template placed under the first dimension,
            by earlier versions: still read, no longer written). None (absent from the file)
            for hand-written questions and files written before this field existed.
            Hashed when present.
        check: optional `CheckSpec`: a registered code check answers this question
            before and instead of the LM (verdict mode, seed 004). Omitted from the
            saved file and the content hash when absent.
        fatal: a "no" to this question forces the question set's ``fatal_label``
            (needs a ``verdict_policy``). Omitted from file and hash when False.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    dimension: str = Field(min_length=1)
    text: str = Field(min_length=1)
    violation_example: str = ""
    requirement_id: str | None = None
    origin: Literal["generated", "merged", "fallback_template", "manual"] = "manual"
    dimension_source: str | None = Field(
        default=None, exclude_if=lambda v: v is None,
        pattern=r"^(given|inferred|fallback|only_dimension|assigned|first_declared|mapped_from:.+)$")
    check: CheckSpec | None = Field(default=None, exclude_if=lambda v: v is None)
    fatal: bool = Field(default=False, exclude_if=lambda v: v is False)

    @field_validator("id", "dimension", "text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()


class QuestionSet(BaseModel):
    """The binary questions for one task, grouped by dimension (paper 3.1).

    Attributes:
        schema_version: version of this file format (currently 1).
        task_prompt: the task prompt T the questions were generated from.
        dimensions: declared dimension names, unique, in display order.
        requirements: requirements r_1..r_K summarized from the task prompt.
        questions: the binary questions q_1..q_N; ids unique, dimensions declared.
        generated_by: the LM id that generated the questions, if any (not hashed).
        generation_report: the `GenerationReport` of `QuestionGenerator` (fallbacks,
            dropped drafts, emptied dimensions), as generated; not hashed, omitted from
            the file when absent (hand-written and older sets).
        verdict_policy: optional named verdict labels with the fatal and refutation
            rules (verdict mode). Hashed when present; omitted from file and hash
            when absent, so sets without it keep their hash.

    Hand-written shorthands are accepted on load and construction (`_hand_written`)
    and saved back in the full form:

    * ``requirements`` as plain strings: ``["Only facts.", "Short."]`` become
      ``{"id": "r1", "text": ...}``, ``{"id": "r2", ...}`` (ids by position, from 1).
    * ``questions`` as plain strings when the set declares exactly one dimension
      (they get that dimension), or grouped by dimension as an object
      ``{"coherence": ["Is it ordered?", ...], ...}`` (``dimensions`` may then be left
      out: the keys, in order). A plain-string question gets the id ``q<n>``, its
      1-based position in the whole list.

    Objects keep needing their ``id`` (a missing one is an error, as before). An
    explicit id that collides with a generated one is reported as a duplicate id.

    Raises:
        pydantic.ValidationError: on construction with duplicate ids, blank text, an
            undeclared dimension, an unknown requirement id, or plain-string questions
            in a set with several dimensions. `QuestionSet.load` turns that into a
            `QuestionSetError` naming the file, line and question.

    Example:
        >>> qs = QuestionSet(dimensions=["fluency"], questions=[
        ...     BinaryQuestion(id="fluency-01", dimension="fluency", text="Is it grammatical?")])
        >>> len(qs.content_hash)
        16
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: SchemaVersion(QUESTION_SET_SCHEMA_VERSION, "question set", base=StrictInt,
                                  older_fix=_QUESTION_SET_OLDER_FIX) = QUESTION_SET_SCHEMA_VERSION
    task_prompt: str = ""
    dimensions: list[str] = Field(min_length=1)
    requirements: list[Requirement] = Field(default_factory=list)
    questions: list[BinaryQuestion] = Field(min_length=1)
    generated_by: str | None = None
    generation_report: GenerationReport | None = Field(default=None, exclude_if=lambda v: v is None)
    verdict_policy: VerdictPolicy | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="before")
    @classmethod
    def _hand_written(cls, data: object) -> object:
        """Expand the hand-written shorthands of the class docstring into full objects."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        requirements = data.get("requirements")
        if isinstance(requirements, list):
            data["requirements"] = [_with_id(r, f"r{n}", key="text")
                                    for n, r in enumerate(requirements, start=1)]
        questions = data.get("questions")
        if isinstance(questions, dict) and all(isinstance(g, list) for g in questions.values()):
            if "dimensions" not in data:
                data["dimensions"] = list(questions)
            # (dimension, entry) pairs; an object written under a dimension key gets that dimension
            pairs = [(dim, {"dimension": dim, **q} if isinstance(q, dict) else q)
                     for dim, group in questions.items() for q in group]
        elif isinstance(questions, list):
            dims = data.get("dimensions")
            only = dims[0] if isinstance(dims, list) and len(dims) == 1 and isinstance(dims[0], str) else None
            pairs = [(only, q) for q in questions]
        else:
            return data
        expanded = []
        for n, (dim, q) in enumerate(pairs, start=1):
            if isinstance(q, str):
                if dim is None:
                    raise ValueError(
                        f"questions[{n - 1}] is a plain string ({q!r:.60}), which is only accepted when the set "
                        f"declares exactly one dimension (it declares {data.get('dimensions')!r:.80}); write it "
                        'as {"id": "...", "dimension": "...", "text": "..."}, or group the questions by '
                        'dimension: "questions": {"<dimension>": ["...", ...]}')
                q = {"id": f"q{n}", "dimension": dim, "text": q}
            expanded.append(q)
        data["questions"] = expanded
        return data

    @model_validator(mode="after")
    def _consistent(self) -> QuestionSet:
        dims = [d.strip() for d in self.dimensions]
        if any(not d for d in dims):
            raise ValueError("dimensions: a dimension name is blank")
        dup_dims = sorted({d for d in dims if dims.count(d) > 1})
        if dup_dims:
            raise ValueError(f"dimensions: declared more than once: {dup_dims}")
        self.dimensions = dims
        req_list = [r.id for r in self.requirements]
        dup_reqs = sorted({r for r in req_list if req_list.count(r) > 1})
        if dup_reqs:
            raise ValueError(f"requirements: id used more than once: {dup_reqs}")
        seen: set[str] = set()
        req_ids = set(req_list)
        for q in self.questions:
            if q.id in seen:
                raise ValueError(f"question '{q.id}': id used more than once")
            seen.add(q.id)
            if q.dimension not in dims:
                raise ValueError(
                    f"question '{q.id}': dimension '{q.dimension}' is not declared "
                    f"(declared: {dims}); add it to 'dimensions' or fix the question"
                )
            if q.requirement_id is not None and q.requirement_id not in req_ids:
                raise ValueError(
                    f"question '{q.id}': requirement_id '{q.requirement_id}' is not among "
                    f"the requirements {sorted(req_ids)}"
                )
            if q.fatal and (self.verdict_policy is None or self.verdict_policy.fatal_label is None):
                raise ValueError(
                    f"question '{q.id}': marked fatal, but the set declares no verdict_policy with a "
                    "fatal_label; declare one or remove 'fatal'"
                )
        return self

    # ------------------------------------------------------------------ views
    @property
    def code_checked(self) -> list[BinaryQuestion]:
        """Questions answered by a code check, in set order."""
        return [q for q in self.questions if q.check is not None]

    @property
    def content_hash(self) -> str:
        """16 hex characters of SHA-256 over the dimensions and questions.

        Changes whenever any question's id, dimension, text, violation example,
        requirement, check or fatal flag changes, or the verdict policy changes;
        ignores ``generated_by`` and the task prompt wording. Sets that use no check,
        fatal flag or verdict policy hash exactly as before those fields existed.
        """
        payload: dict[str, object] = {
            "dimensions": self.dimensions,
            "questions": [q.model_dump(mode="json") for q in self.questions],
        }
        if self.verdict_policy is not None:
            payload["verdict_policy"] = self.verdict_policy.model_dump(mode="json")
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    def by_dimension(self) -> dict[str, list[BinaryQuestion]]:
        """Questions grouped by declared dimension, in declaration order (Q = U_d Q_d)."""
        groups: dict[str, list[BinaryQuestion]] = {d: [] for d in self.dimensions}
        for q in self.questions:
            groups[q.dimension].append(q)
        return groups

    def question(self, question_id: str) -> BinaryQuestion:
        """The question with that id. Raises `UnknownNameError` (a KeyError) if there is none."""
        for q in self.questions:
            if q.id == question_id:
                return q
        raise UnknownNameError(f"no question with id {question_id!r} in this question set",
                               received=repr(question_id), fix="use an id of the set's questions.")

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path) -> Path:
        """Write the question set as indented UTF-8 JSON; returns the path."""
        return write_json_model(self, path)

    @classmethod
    def load(cls, path: str | Path) -> QuestionSet:
        """Read and validate a question-set JSON file.

        Raises:
            QuestionSetError: the file is missing, is not JSON, or fails validation;
                the message names the file, the line and the question or field.
        """
        path = Path(path)
        if not path.is_file():
            raise QuestionSetError(
                "question-set file not found",
                path=path,
                fix="pass the JSON written by `bineval questions` (or write one by hand).",
            )
        try:
            raw = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            line = path.read_bytes()[: exc.start].count(b"\n") + 1
            raise QuestionSetError(f"not UTF-8 text ({exc.reason})", path=path, line=line,
                                   fix="save the file as UTF-8.") from exc
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise QuestionSetError(
                f"not valid JSON ({exc.msg}, column {exc.colno})", path=path, line=exc.lineno,
                fix="correct the JSON there, or regenerate the set with `bineval questions`.",
            ) from exc
        except (ValueError, RecursionError) as exc:
            raise QuestionSetError(f"JSON that cannot be read ({exc})", path=path,
                                   fix="regenerate the set with `bineval questions`.") from exc
        return cls.from_data(data, path=path, raw_text=raw)

    @classmethod
    def from_data(
        cls, data: object, *, path: str | Path | None = None, raw_text: str | None = None
    ) -> QuestionSet:
        """Validate already-parsed JSON data; errors name `path` and the question.

        Raises:
            QuestionSetError: on any validation failure (first one reported, all listed).
        """
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise as_question_set_error(exc, data, path, raw_text) from exc


def _with_id(entry: object, default_id: str, *, key: str) -> object:
    """A hand-written list entry as an object with an id: a plain string becomes
    ``{"id": default_id, key: entry}``; anything else (an object, a model instance, a
    wrong type) is left for validation to judge."""
    if isinstance(entry, str):
        return {"id": default_id, key: entry}
    return entry
