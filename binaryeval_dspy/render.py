"""The report document and its two renderers: Markdown and one self-contained HTML page.

A `Document` is a title, intro blocks and sections of blocks. A block is a paragraph
(``str``), a `Table`, a `Figure`, a `BulletList` or `MarkdownText` (Markdown kept as
written, e.g. a saved history's summary). The benchmark report, the agreement report
(``bineval agreement``) and the optimizer comparison (``comparison.md``) are all built
as a `Document` and rendered here, so every report draws its tables the same way.

The document is data (pydantic), saved inside ``metrics.json`` by the benchmark and
agreement reports, so ``bineval report --from-metrics`` renders the same text again
without the run's files. Figures hold their data, not pixels: `to_html` asks for the
PNG bytes of each figure through `figure_png` (the reports draw them with
`binaryeval_dspy.reports.figures.draw_figure`, matplotlib imported only then).
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

STYLE = (
    "<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;"
    "color:#222}table{border-collapse:collapse;margin:.5em 0 1.2em}th,td{border:1px solid #ccc;"
    "padding:3px 8px;font-size:13px}td{text-align:right}td:first-child,th:first-child{text-align:left}"
    "th{background:#f3f3f3}caption{caption-side:top;text-align:left;font-weight:600;padding:4px 0}"
    "img{max-width:100%}.note{font-size:12px;color:#555}figure{margin:1em 0}</style>"
)


class Table(BaseModel):
    """A table: caption, header row, body rows (cells already formatted) and a note.

    Attributes:
        caption: shown bold above the table in Markdown (nothing when empty).
        header: column titles.
        rows: body rows, one string per cell.
        note: a paragraph under the table (nothing when empty).
        align: ``auto`` right-aligns every column after the first whose cells all start
            like a number (or are ``n/a`` / empty); ``left`` aligns every column left.
    """

    model_config = ConfigDict(extra="forbid")

    caption: str = ""
    header: list[str]
    rows: list[list[str]]
    note: str = ""
    align: Literal["auto", "left"] = "auto"


class Figure(BaseModel):
    """A figure described by its data; drawn to PNG only when rendered.

    Attributes:
        caption: caption (names the LM and n).
        filename: PNG file name under the report's ``figures/`` folder.
        drawing: which drawing of `binaryeval_dspy.reports.figures` (``violins``,
            ``systems``, ``scatter``, ``phi_heatmaps``).
        data: the drawing's arguments as JSON values (NaN as null).
    """

    model_config = ConfigDict(extra="forbid")

    caption: str
    filename: str
    drawing: str
    data: dict[str, Any] = Field(default_factory=dict)


class BulletList(BaseModel):
    """A list of Markdown bullets (``- item``), written without blank lines between them."""

    model_config = ConfigDict(extra="forbid")

    items: list[str]


class MarkdownText(BaseModel):
    """Markdown kept as written (Markdown: as is; HTML: preformatted text)."""

    model_config = ConfigDict(extra="forbid")

    markdown: str


Block = Table | Figure | BulletList | MarkdownText | str


class Section(BaseModel):
    """A ``##`` heading and its blocks."""

    model_config = ConfigDict(extra="forbid")

    heading: str
    blocks: list[Block] = Field(default_factory=list)


class Document(BaseModel):
    """A whole report: title, intro blocks and sections."""

    model_config = ConfigDict(extra="forbid")

    title: str
    intro: list[Block] = Field(default_factory=list)
    sections: list[Section] = Field(default_factory=list)

    def figures(self) -> list[Figure]:
        """Every figure, in order."""
        return [b for s in self.sections for b in s.blocks if isinstance(b, Figure)]


def numeric_column(rows: list[list[str]], index: int) -> bool:
    """True when every cell of a column starts like a number (or is n/a): right-align it."""
    cells = [row[index] for row in rows if index < len(row)]
    return bool(cells) and index > 0 and all(
        c[:1].isdigit() or c[:1] in "-+." or c.startswith("n/a") or c == "" for c in cells)


#: Characters that end or reshape a Markdown table cell, escaped with a backslash: the
#: backslash itself (so a user's ``\|`` stays text), the pipe (a cell boundary), the
#: backtick (a code span could swallow the rest of the row), ``<`` (an HTML tag) and the
#: square brackets (a link or an image: ``[x](http://...)``, ``![x](...)``).
_MARKDOWN_CELL_ESCAPES = str.maketrans({"\\": "\\\\", "|": "\\|", "`": "\\`", "<": "\\<", "[": "\\[",
                                        "]": "\\]"})
#: What makes a line's start a Markdown block (heading, quote, list item, rule, fence).
_BLOCK_START = re.compile(r"^(#|>|[-+*=_~]|\d+[.)])")
_LINE_BREAKS = re.compile(r"\r\n|\r|\n|\u2028|\u2029")


def markdown_cell(text: object) -> str:
    """One cell of a Markdown pipe table, escaped so that any text stays in its cell.

    The one escaping rule for every string placed in Markdown (item ids, question texts,
    dimension, method, LM and file names, notes; tables here, prose through
    `markdown_paragraph`): ``\\``, ``|``, backticks, ``<``, ``[`` and ``]`` get a
    backslash (CommonMark and GitHub render them as the character itself), and each line
    break becomes ``<br>``, so a row always has as many cells as its header and no user
    text becomes an HTML tag, a link or an image. HTML output is escaped separately, with
    `html.escape`.

    Args:
        text: the cell's text (anything else is passed through `str`).

    Returns:
        The escaped text, on one line.

    Example:
        >>> markdown_cell("a|b\\nc")
        'a\\\\|b<br>c'
    """
    return _LINE_BREAKS.sub("<br>", str(text).translate(_MARKDOWN_CELL_ESCAPES))


def markdown_paragraph(text: object) -> str:
    """A line of Markdown prose (a paragraph, title, heading, caption, note or list item) that
    reads as the text it is: `markdown_cell`'s escaping, leading spaces dropped (four would
    make a code block) and a backslash before a start that would make a block (``#``,
    ``>``, ``-``, ``1.``).

    Every string of a `Document` goes through it (`to_markdown`), and so does the prose of
    every Markdown file written by hand (``summary.md``, an optimizer history's summary).

    Example:
        >>> markdown_paragraph("# <img src=x onerror=alert(1)>")
        '\\\\# \\\\<img src=x onerror=alert(1)>'
    """
    escaped = markdown_cell(text).lstrip()
    return _BLOCK_START.sub(lambda m: "\\" + m.group(1) if not m.group(1)[0].isdigit()
                            else m.group(1)[:-1] + "\\" + m.group(1)[-1], escaped, count=1)


def markdown_table(header: list[str], rows: list[list[str]], aligns: list[str] | None = None) -> list[str]:
    """A Markdown pipe table as lines: header, alignment row, one line per row.

    Every cell, header included, goes through `markdown_cell`; every report that writes
    a Markdown table (the `Document` renderer, ``summary.md``, an optimizer history's
    summary) draws it here, so no text can split a row.

    Args:
        header: column titles.
        rows: body rows, one string per cell (a row is written as given; it should have
            as many cells as `header`).
        aligns: one alignment marker per column (``---``, ``---:``); None: all ``---``.
    """
    aligns = aligns if aligns is not None else ["---" for _ in header]
    return ["| " + " | ".join(markdown_cell(h) for h in header) + " |", "|" + "|".join(aligns) + "|",
            *["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in rows]]


def _markdown_block(block: Block, figures_dir: str) -> list[str]:
    """A block as Markdown lines: every text escaped (`markdown_paragraph`, `markdown_cell`),
    only `MarkdownText` kept as written."""
    text = markdown_paragraph
    if isinstance(block, Table):
        lines = [f"**{markdown_cell(block.caption)}**", ""] if block.caption else []
        if block.align == "auto":
            aligns = ["---:" if numeric_column(block.rows, i) else "---" for i in range(len(block.header))]
        else:
            aligns = ["---" for _ in block.header]
        lines += markdown_table(block.header, block.rows, aligns)
        lines.append("")
        if block.note:
            lines += [text(block.note), ""]
        return lines
    if isinstance(block, Figure):
        return [f"![{markdown_cell(block.caption)}]({figures_dir}/{block.filename})", "",
                f"*{markdown_cell(block.caption)}*", ""]
    if isinstance(block, BulletList):
        return [f"- {text(item)}" for item in block.items] + [""]
    if isinstance(block, MarkdownText):
        return [block.markdown, ""]
    return [text(block), ""]


def to_markdown(document: Document, figures_dir: str = "figures") -> str:
    """The document as Markdown: ``# title``, blocks, ``## heading`` per section.

    Tables are pipe tables under a bold caption; figures are linked as
    ``<figures_dir>/<filename>`` with their caption in italics. Every string of the
    document is text, escaped (`markdown_paragraph`; cells by `markdown_cell`), so a file
    name or LM name never becomes a tag, a link or a heading; only `MarkdownText` blocks
    are Markdown, kept as written. The text ends with one newline.
    """
    lines = [f"# {markdown_paragraph(document.title)}", ""]
    for block in document.intro:
        lines += _markdown_block(block, figures_dir)
    for section in document.sections:
        lines += [f"## {markdown_paragraph(section.heading)}", ""]
        for block in section.blocks:
            lines += _markdown_block(block, figures_dir)
    return "\n".join(lines).rstrip() + "\n"


def _html_block(block: Block, png: Callable[[Figure], bytes | None]) -> list[str]:
    esc = html.escape
    if isinstance(block, Table):
        parts = [f"<table><caption>{esc(block.caption)}</caption><tr>"
                 + "".join(f"<th>{esc(h)}</th>" for h in block.header) + "</tr>"]
        parts += ["<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in block.rows]
        parts.append("</table>")
        if block.note:
            parts.append(f"<p class='note'>{esc(block.note)}</p>")
        return parts
    if isinstance(block, Figure):
        data = png(block)
        if data is None:
            return [f"<p class='note'>[figure not drawn: {esc(block.caption)}]</p>"]
        encoded = base64.b64encode(data).decode("ascii")
        return [(f"<figure><img alt='{esc(block.caption)}' src='data:image/png;base64,{encoded}'>"
                 f"<figcaption class='note'>{esc(block.caption)}</figcaption></figure>")]
    if isinstance(block, BulletList):
        return ["<ul>" + "".join(f"<li>{esc(item)}</li>" for item in block.items) + "</ul>"]
    if isinstance(block, MarkdownText):
        return [f"<pre>{esc(block.markdown)}</pre>"]
    return [f"<p>{esc(str(block))}</p>"]


def to_html(document: Document, figure_png: Callable[[Figure], bytes | None] | Mapping[str, bytes]) -> str:
    """The document as one self-contained HTML page (inline CSS, figures as base64 PNG).

    Args:
        document: the report.
        figure_png: PNG bytes per figure: a callable (figure -> bytes, or None to leave
            it out with a note; `binaryeval_dspy.reports.figures.draw_figure` draws one from
            its data, with matplotlib, the ``bench`` extra), or a mapping filename -> bytes.
    """
    png: Callable[[Figure], bytes | None]
    if isinstance(figure_png, Mapping):
        pngs = figure_png
        png = lambda f: pngs.get(f.filename)
    else:
        png = figure_png
    esc = html.escape
    parts = [
        "<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
        f"<title>{esc(document.title)}</title>",
        STYLE,
        "</head><body>", f"<h1>{esc(document.title)}</h1>",
    ]
    for block in document.intro:
        parts += _html_block(block, png)
    for section in document.sections:
        parts.append(f"<h2>{esc(section.heading)}</h2>")
        for block in section.blocks:
            parts += _html_block(block, png)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
