"""Headless Chromium for the page tests and the view benchmark, with no extra Python package.

Chromium's own command line does what the tests need: ``--dump-dom`` prints the DOM as
it is after the page's scripts ran (``--virtual-time-budget`` lets them run first), and
``--screenshot`` writes a PNG. The page's state (tab, filters, the item shown) is set
through the URL's ``#...`` part, which `bineval view`'s page reads at load.

`DomReader` parses the dumped DOM with the standard library's HTML parser, so a test
reads elements and their text as the browser built them, not the HTML source.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
          "--disable-dev-shm-usage", "--allow-file-access-from-files", "--hide-scrollbars"]


def find_chromium() -> str | None:
    """The path of a Chromium binary on PATH, or None."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    binary = find_chromium()
    if binary is None:
        raise RuntimeError("no chromium on PATH (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="bineval-chromium-") as profile:
        return subprocess.run([binary, *_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=timeout, check=False)


def dump_dom(url: str, *, budget_ms: int = 5000, timeout: float = 120.0, width: int = 1400,
             height: int = 1000) -> str:
    """The DOM of `url` after its scripts ran (Chromium's ``--dump-dom``)."""
    done = _run([f"--virtual-time-budget={budget_ms}", f"--window-size={width},{height}", "--dump-dom", url],
                timeout)
    if done.returncode != 0 or "<html" not in done.stdout:
        raise RuntimeError(f"chromium --dump-dom failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def screenshot(url: str, path: Path, *, budget_ms: int = 5000, timeout: float = 120.0, width: int = 1400,
               height: int = 1000) -> Path:
    """Write a PNG of `url` as rendered after its scripts ran; returns `path`."""
    done = _run([f"--virtual-time-budget={budget_ms}", f"--window-size={width},{height}",
                 f"--screenshot={path}", url], timeout)
    if not Path(path).is_file():
        raise RuntimeError(f"chromium --screenshot wrote nothing ({done.returncode}): {done.stderr[-2000:]}")
    return Path(path)


@dataclass
class Element:
    """One element of a parsed DOM: tag, attributes, text (its own and its descendants')."""

    tag: str
    attrs: dict[str, str]
    parent: Element | None = None
    children: list[Element] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """All text inside the element, as the browser holds it (entities decoded)."""
        return "".join(self.parts)

    def find_all(self, tag: str | None = None, **attrs: str) -> list[Element]:
        """Descendants with `tag` (any when None) whose attributes include `attrs`
        (``class_`` matches one class; ``data_item`` means ``data-item``)."""
        found = []
        for child in self.children:
            if (tag is None or child.tag == tag) and all(_matches(child, k, v) for k, v in attrs.items()):
                found.append(child)
            found.extend(child.find_all(tag, **attrs))
        return found

    def by_id(self, element_id: str) -> Element | None:
        """The descendant with this id, or None."""
        hits = self.find_all(id=element_id)
        return hits[0] if hits else None


def _matches(element: Element, key: str, value: str) -> bool:
    if key == "class_":
        return value in element.attrs.get("class", "").split()
    return element.attrs.get(key.replace("_", "-")) == value


_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class DomReader(HTMLParser):
    """Parses dumped HTML into `Element`s; `root` is the document."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self._open = self.root
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs}, parent=self._open)
        self._open.children.append(element)
        if tag not in _VOID:
            self._open = element

    def handle_endtag(self, tag: str) -> None:
        node = self._open
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self._open = node.parent

    def handle_data(self, data: str) -> None:
        node: Element | None = self._open
        while node is not None:
            node.parts.append(data)
            node = node.parent
