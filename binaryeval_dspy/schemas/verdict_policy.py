"""Named verdict labels and the rules that move between them (the article's pattern, seed 004).

A question set may declare a `VerdictPolicy`: a closed set of labels, each with its
meaning and the action downstream code takes, listed from best to worst; the label a
fatal "no" forces; and where a successful refutation moves each label.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from binaryeval_dspy.errors import UnknownNameError


class VerdictLabel(BaseModel):
    """One named verdict.

    Attributes:
        name: the label downstream code branches on, e.g. ``"Keep"`` (non-blank).
        meaning: when this label applies, in one sentence (shown to the LM).
        action: what happens next when an item gets it (shown to the LM and output).
        is_pass: True when the item passes (e.g. Keep), False otherwise.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    meaning: str = Field(min_length=1)
    action: str = Field(min_length=1)
    is_pass: bool

    @field_validator("name", "meaning", "action")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()


class VerdictPolicy(BaseModel):
    """The verdict labels of a question set and the rules applied in code.

    Attributes:
        labels: two or more labels, names unique (ignoring case), ordered from best
            to worst: every pass label before every non-pass label. The order
            defines severity (the fatal rule never makes a verdict milder) and the
            default refutation moves.
        fatal_label: the non-pass label forced when a question marked ``fatal`` is
            answered "no" (a pick already at least that severe is kept). Required
            when any question is fatal.
        on_refutation: label -> label a successful pressure test moves it to.
            Undeclared: a non-pass label moves one step toward the best label; a
            pass label is not moved (declare e.g. ``{"Keep": "Improve"}`` to let
            ``--pressure-test always`` demote a pass).
        refutation_needs: "all" (default): every refutation question must be
            answered "yes" for the refutation to succeed; "any": one is enough.
            An unparsed answer never counts as "yes".

    Example:
        >>> policy = VerdictPolicy(labels=[
        ...     VerdictLabel(name="Keep", meaning="fine", action="none", is_pass=True),
        ...     VerdictLabel(name="Retire", meaning="broken", action="delete", is_pass=False)],
        ...     fatal_label="Retire")
        >>> policy.refutation_target("Retire")
        'Keep'
    """

    model_config = ConfigDict(extra="forbid")

    labels: list[VerdictLabel] = Field(min_length=2)
    fatal_label: str | None = None
    on_refutation: dict[str, str] = Field(default_factory=dict)
    refutation_needs: Literal["all", "any"] = "all"

    @model_validator(mode="after")
    def _consistent(self) -> VerdictPolicy:
        names = [label.name for label in self.labels]
        folded = [n.casefold() for n in names]
        dups = sorted({n for n in names if folded.count(n.casefold()) > 1})
        if dups:
            raise ValueError(f"verdict labels declared more than once (case ignored): {dups}")
        flags = [label.is_pass for label in self.labels]
        if all(flags) or not any(flags):
            raise ValueError("declare at least one pass label (is_pass: true) and one non-pass label")
        if flags != sorted(flags, reverse=True):
            raise ValueError(
                f"list the labels from best to worst, every pass label first (got {names} with is_pass {flags})"
            )
        if self.fatal_label is not None:
            if self.fatal_label not in names:
                raise ValueError(f"fatal_label '{self.fatal_label}' is not a declared label {names}")
            if self.is_pass(self.fatal_label):
                raise ValueError(f"fatal_label '{self.fatal_label}' is a pass label; it must be a non-pass label")
        for source, target in self.on_refutation.items():
            for name in (source, target):
                if name not in names:
                    raise ValueError(f"on_refutation: '{name}' is not a declared label {names}")
            if source == target:
                raise ValueError(f"on_refutation: '{source}' moves to itself")
        return self

    @property
    def names(self) -> list[str]:
        """Label names, best first."""
        return [label.name for label in self.labels]

    def label(self, name: str) -> VerdictLabel:
        """The label called `name`. Raises `UnknownNameError` (a KeyError) if undeclared."""
        for label in self.labels:
            if label.name == name:
                return label
        raise UnknownNameError(f"no verdict label {name!r}", expected=f"one of {', '.join(self.names)}",
                               received=repr(name), fix="use a label the verdict policy declares.")

    def is_pass(self, name: str) -> bool:
        """True when `name` is a pass label."""
        return self.label(name).is_pass

    def severity(self, name: str) -> int:
        """0 for the best label, len(labels) - 1 for the worst."""
        return self.names.index(name)

    def match(self, raw: str) -> str | None:
        """The declared label equal to `raw` ignoring case and surrounding space/quotes, else None."""
        key = str(raw).strip().strip("\"'").strip().casefold()
        for name in self.names:
            if name.casefold() == key:
                return name
        return None

    def refutation_target(self, name: str) -> str | None:
        """Where a successful refutation moves `name` (None: it stays)."""
        if name in self.on_refutation:
            return self.on_refutation[name]
        if self.is_pass(name):
            return None
        return self.names[self.severity(name) - 1]
