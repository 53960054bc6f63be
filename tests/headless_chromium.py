"""Headless Chromium for the page tests and the view benchmark, with no extra Python package.

Chromium's own command line does what the tests need: ``--dump-dom`` prints the DOM as
it is after the page's scripts ran (``--virtual-time-budget`` lets them run first), and
``--screenshot`` writes a PNG. The page's state (tab, filters, the item shown) is set
through the URL's ``#...`` part, which `bineval view`'s page reads at load.

A test that clicks, types or downloads uses `Browser` instead: Chromium's DevTools protocol
over ``--remote-debugging-pipe`` (two file descriptors, JSON messages), so the page is
driven as a person would drive it and a Blob download is saved as a file.

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


class Browser:
    """One headless Chromium driven over the DevTools protocol on a pipe (no extra package).

    Chromium's ``--remote-debugging-pipe`` reads protocol messages (JSON, each ended by
    a NUL byte) on file descriptor 3 and writes its replies and events on 4, so a test
    can click, type and download as a person would, with the standard library only.
    Downloads are saved in `downloads` (Browser.setDownloadBehavior).

    Example:
        >>> with Browser(tmp_path / "downloads") as browser:                # doctest: +SKIP
        ...     page = browser.open(url)
        ...     page.evaluate("document.querySelector('#go').click()")
        ...     browser.wait_for_download("labels-human.jsonl")
    """

    def __init__(self, downloads: Path, *, width: int = 1400, height: int = 1000, timeout: float = 60.0) -> None:
        import os

        binary = find_chromium()
        if binary is None:
            raise RuntimeError("no chromium on PATH (apt-get install chromium)")
        self.downloads = Path(downloads)
        self.downloads.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="bineval-chromium-")
        to_browser, self._to_browser = os.pipe()
        self._from_browser, from_browser = os.pipe()

        def on_fds_3_and_4() -> None:  # in the child, before exec: the protocol's two descriptors
            read_end, write_end = os.dup(to_browser), os.dup(from_browser)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self._process = subprocess.Popen(
            [binary, *_FLAGS, "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}",
             f"--window-size={width},{height}", "about:blank"],
            preexec_fn=on_fds_3_and_4, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        self.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(self.downloads),
                                                  "eventsEnabled": True})

    def _read_message(self) -> dict:
        import json
        import os
        import select
        import time

        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError(f"chromium sent nothing for {self.timeout} s")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the protocol pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send one protocol command and return its ``result``.

        Raises:
            RuntimeError: the command failed (its error message).
        """
        import json
        import os

        self._next_id += 1
        message: dict = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode("utf-8") + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method} failed: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def open(self, url: str) -> Page:
        """A new tab showing `url`, once its document has loaded."""
        import json

        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.navigate", {"url": url}, session)
        page = Page(self, session)
        page.wait_for(f"location.href === {json.dumps(url)} && document.readyState === 'complete'")
        return page

    def wait_for_download(self, name: str) -> Path:
        """The path of downloaded file `name` once Chromium reports it complete.

        Raises:
            TimeoutError: no completed download within the browser's timeout.
        """
        import time

        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            done = any(e.get("method") == "Browser.downloadProgress" and e["params"].get("state") == "completed"
                       for e in self.events)
            path = self.downloads / name
            if done and path.is_file():
                return path
            self.send("Browser.getVersion")  # a round trip collects the events sent meanwhile
            time.sleep(0.1)
        raise TimeoutError(f"no completed download {name} in {self.downloads}: {sorted(self.downloads.iterdir())}")

    def close(self) -> None:
        """Close Chromium (and its profile folder)."""
        import os

        try:
            self.send("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Page:
    """One tab of a `Browser`: run JavaScript in it, wait for a condition, take a screenshot."""

    browser: Browser
    session: str

    def evaluate(self, expression: str) -> object:
        """The value of a JavaScript expression in the page (JSON-like values).

        Raises:
            RuntimeError: the expression threw (its message).
        """
        result = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                        "awaitPromise": True}, self.session)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise RuntimeError(f"the page threw: {details.get('exception', {}).get('description') or details}")
        return result["result"].get("value")

    def wait_for(self, condition: str) -> None:
        """Return once the JavaScript `condition` is true.

        Raises:
            TimeoutError: it stayed false for the browser's timeout.
        """
        import time

        deadline = time.monotonic() + self.browser.timeout
        while time.monotonic() < deadline:
            try:
                if self.evaluate(f"Boolean({condition})"):
                    return
            except RuntimeError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"the page never made {condition} true")

    def dom(self) -> DomReader:
        """The page's DOM as it is now, parsed (`DomReader`)."""
        return DomReader(str(self.evaluate("document.documentElement.outerHTML")))

    def screenshot(self, path: Path) -> Path:
        """Write a PNG of the visible page to `path`; returns `path`."""
        import base64

        data = self.browser.send("Page.captureScreenshot", {"format": "png"}, self.session)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)
