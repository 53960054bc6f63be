"""Build ``examples/audit/items.jsonl`` from this repository's own documentation.

Each ``## `` section of README.md becomes one item, and each other Markdown file
listed in SOURCES one item. Run from the repository root:

    python examples/audit/build_items.py

Rebuild after editing the docs, then ``bineval rejudge`` re-judges only the items
whose text changed. ``tests/test_example_builders.py`` fails while the committed file
differs from what `render` gives.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent / "items.jsonl"
SOURCES = ["README.md", "examples/summeval/PROVENANCE.md", "examples/audit/README.md"]
CONTEXT = ("{where} of the documentation of binaryeval-dspy, a Python library and command-line tool (bineval) "
           "that judges LLM outputs by asking many yes/no questions. Readers are ML engineers who use DSPy "
           "and want to install the tool, run it and read its results.")


def slug(text: str) -> str:
    """Lowercase words joined by '-' (an id fragment)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def readme_sections(text: str) -> list[tuple[str, str]]:
    """(heading, section text) for each ``## `` section, heading line included."""
    parts = re.split(r"(?m)^(?=## )", text)
    return [(part.splitlines()[0][3:].strip(), part.strip()) for part in parts if part.startswith("## ")]


def build() -> list[dict[str, str]]:
    """The items, in document order."""
    rows = []
    for source in SOURCES:
        text = (ROOT / source).read_text(encoding="utf-8")
        if source == "README.md":
            for heading, body in readme_sections(text):
                rows.append({"id": f"README.md#{slug(heading)}", "path": source, "section": heading,
                             "input": CONTEXT.format(where=f"Section '{heading}' of README.md"), "output": body})
        else:
            rows.append({"id": source, "path": source, "section": "",
                         "input": CONTEXT.format(where=f"The file {source}"), "output": text.strip()})
    return rows


def render() -> str:
    """The text of `OUT`: one JSON object per line."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in build())


def main() -> None:
    text = render()
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {text.count(chr(10))} items to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
