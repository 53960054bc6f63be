"""The rubric of the holistic and single-question baselines, per benchmark dimension.

A rubric file (``<tasks dir>/<benchmark>/rubric.json``, shipped in ``binaryeval_dspy/benchmark_data/tasks``) gives, for every dimension,
what the G-Eval-style judge needs (a criterion, evaluation steps and an integer rating
scale) and the one yes/no question the UniEval-style judge asks. It is data, like a
task prompt: the instructions around it live in the signatures.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from binaryeval_dspy.errors import InputError
from binaryeval_dspy.schemas.versioned import (
    SchemaVersion,
    schema_version_fix,
    schema_version_message,
    write_json_model,
)

RUBRIC_SCHEMA_VERSION = 1
#: what to do with a rubric from an older version
_OLDER_FIX = "rewrite it like binaryeval_dspy/benchmark_data/tasks/summeval/rubric.json"


class DimensionRubric(BaseModel):
    """How the baselines judge one dimension.

    Attributes:
        criterion: one or two sentences saying what the dimension measures.
        evaluation_steps: the steps the holistic judge follows before scoring (1-8).
        rating_scale: the holistic judge's integer scale [low, high] (2 to 10 values).
        question: the single yes/no question of the UniEval-style judge ("yes" = good).
    """

    model_config = ConfigDict(extra="forbid")

    criterion: str = Field(min_length=1)
    evaluation_steps: list[str] = Field(min_length=1, max_length=8)
    rating_scale: tuple[int, int]
    question: str = Field(min_length=1)

    @field_validator("rating_scale")
    @classmethod
    def _scale(cls, value: tuple[int, int]) -> tuple[int, int]:
        low, high = value
        if high <= low or high - low > 9:
            raise ValueError(f"rating_scale needs 2 to 10 integer values, got [{low}, {high}]")
        return value

    def steps_text(self) -> str:
        """The evaluation steps numbered one per line."""
        return "\n".join(f"{i}. {step.strip()}" for i, step in enumerate(self.evaluation_steps, start=1))


class Rubric(BaseModel):
    """The baselines' rubric for one benchmark.

    Attributes:
        schema_version: format version (1).
        benchmark: the benchmark name it was written for.
        dimensions: dimension -> `DimensionRubric`.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: SchemaVersion(RUBRIC_SCHEMA_VERSION, "rubric",
                                  older_fix=_OLDER_FIX) = RUBRIC_SCHEMA_VERSION
    benchmark: str = Field(min_length=1)
    dimensions: dict[str, DimensionRubric] = Field(min_length=1)

    @property
    def content_hash(self) -> str:
        """16 hex characters of SHA-256 over the rubric's canonical JSON."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]

    def dimension(self, name: str) -> DimensionRubric:
        """The rubric of one dimension.

        Raises:
            InputError: the rubric has no such dimension.
        """
        if name not in self.dimensions:
            raise InputError(f"the rubric has no dimension {name!r} (it has {', '.join(self.dimensions)})",
                             field="dimensions", fix="add the dimension to the rubric file.")
        return self.dimensions[name]

    @classmethod
    def load(cls, path: str | Path) -> Rubric:
        """Read and validate a rubric file.

        Raises:
            InputError: missing file, invalid JSON or a field that does not validate
                (the message names the field).
        """
        path = Path(path)
        if not path.is_file():
            raise InputError("rubric file not found", path=path, fix="check the path or pass `tasks_dir`.")
        try:
            return cls.model_validate_json(path.read_text(encoding="utf-8-sig"))
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", path=path, fix="save it as UTF-8.") from exc
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InputError(schema_version_message(first), path=path, field=where or None,
                             fix=schema_version_fix(first)
                             or "compare the file with binaryeval_dspy/benchmark_data/tasks/summeval/rubric.json.",
                             ) from exc

    def save(self, path: str | Path) -> Path:
        """Write the rubric as indented JSON; returns the path."""
        return write_json_model(self, path)
