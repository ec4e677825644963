"""LibreOffice help pages: HTML -> segments (text + inline spans), module labels and the filters that
keep natural-language, translated segments.

Every `<p>`/`<h1..h6>` whose id starts with `par_id`/`hd_id` is a segment; the id is the same in every
translation of a page, so (page path, id) pairs an English segment with its translation exactly.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from metaxlm.languages import own_scripts

# Inline span classes kept as labels for the span task (translators keep these in every language).
SPAN_LABELS = ("menuitem", "keycode", "input", "literal", "emph")
# Module directory under text/ -> task label. sdatabase is Base's help, so it becomes "sbase".
MODULE_LABELS = {"swriter": "swriter", "scalc": "scalc", "simpress": "simpress", "sdraw": "sdraw",
                 "smath": "smath", "schart": "schart", "sdatabase": "sbase", "sbase": "sbase",
                 "sbasic": "sbasic", "shared": "shared"}

_VOID = {"br", "img", "meta", "link", "input", "hr", "col", "area", "base", "wbr", "source", "embed", "param"}
_SEGMENT_TAGS = {"p", "h1", "h2", "h3", "h4", "h5", "h6"}
_SKIP_TAGS = {"script", "style"}
_WS = re.compile(r"\s+")
_CODE_TOKEN = re.compile(r"[_(){}<>=]|\w\.\w")


@dataclass
class Segment:
    """One paragraph or heading: plain text plus labelled character spans (end exclusive)."""

    sid: str  # the element id, e.g. "par_id3152830"
    cls: str  # the element's class, e.g. "paragraph", "code"; "h2" etc. for headings without one
    text: str
    spans: list[tuple[int, int, str]] = field(default_factory=list)


class _PageParser(HTMLParser):
    """Collects segments of one page.

    Inside a segment: whitespace is collapsed as text is appended (so span offsets need no remapping);
    a hidden span is skipped unless its id starts with "default" (switchinline: the help viewer's
    JavaScript shows the default variant unless the platform/module matches, e.g. "Ctrl" not "Command");
    only the outermost of the SPAN_LABELS spans is kept when they nest (e.g. emph around a menuitem).
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.segments: list[Segment] = []
        self._stack: list[tuple[str, str]] = []  # (tag, role); role: "seg", "skip", "span:<label>", ""
        self._seg: Segment | None = None
        self._buf: list[str] = []
        self._len = 0  # length of "".join(self._buf)
        self._ends_space = True  # so leading whitespace is never written
        self._skip = 0  # depth of skipped (hidden/script) elements we are inside
        self._span_start: int | None = None
        self._span_raw: list[str] = []

    # -- text accumulation -------------------------------------------------------------------------
    def _append(self, data: str) -> None:
        data = _WS.sub(" ", data)
        if self._ends_space and data.startswith(" "):
            data = data[1:]
        if data:
            self._buf.append(data)
            self._len += len(data)
            self._ends_space = data.endswith(" ")

    def handle_data(self, data: str) -> None:
        if self._seg is None or self._skip:
            return
        if self._span_start is not None:
            self._span_raw.append(data)
        self._append(data)

    # -- tags ----------------------------------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            if tag == "br" and self._seg is not None and not self._skip:
                self._append(" ")
            return
        a = {k: (v or "") for k, v in attrs}
        role = ""
        if self._seg is None:
            sid = a.get("id", "")
            if tag in _SEGMENT_TAGS and (sid.startswith("par_id") or sid.startswith("hd_id")):
                self._seg = Segment(sid, a.get("class", "") or tag, "")
                self._buf, self._len, self._ends_space = [], 0, True
                role = "seg"
        elif self._skip or tag in _SKIP_TAGS or ("hidden" in a and not a.get("id", "").startswith("default")):
            self._skip += 1
            role = "skip"
        elif tag == "span" and a.get("class") in SPAN_LABELS and self._span_start is None:
            self._span_start = self._len
            self._span_raw = []
            role = "span:" + a["class"]
        self._stack.append((tag, role))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "br" and self._seg is not None and not self._skip:
            self._append(" ")

    def handle_endtag(self, tag: str) -> None:
        # Close up to the matching open tag; a stray end tag with no opener is ignored.
        if not any(t == tag for t, _ in self._stack):
            return
        while self._stack:
            t, role = self._stack.pop()
            self._close(role)
            if t == tag:
                break

    def _close(self, role: str) -> None:
        if role == "skip":
            self._skip -= 1
        elif role.startswith("span:") and self._seg is not None:
            self._end_span(role[5:])
        elif role == "seg" and self._seg is not None:
            self._end_segment()

    def _end_span(self, label: str) -> None:
        start, end = self._span_start, self._len
        self._span_start = None
        assert start is not None and self._seg is not None
        text = "".join(self._buf)
        while start < end and text[start] == " ":  # spans never start or end on whitespace
            start += 1
        while end > start and text[end - 1] == " ":
            end -= 1
        own = " ".join("".join(self._span_raw).split())
        if end > start:
            assert text[start:end] == own, (text[start:end], own)
            self._seg.spans.append((start, end, label))
        else:
            # Keep empty spans visible as such: a translation that emptied a span is dropped later.
            self._seg.spans.append((start, start, label))

    def _end_segment(self) -> None:
        assert self._seg is not None
        seg, text = self._seg, "".join(self._buf)
        stripped = text.rstrip(" ")
        seg.text = stripped  # no leading space by construction (_ends_space starts True)
        seg.spans = [(min(s, len(stripped)), min(e, len(stripped)), lab) for s, e, lab in seg.spans]
        self.segments.append(seg)
        self._seg = None


def parse_page(html: str) -> list[Segment]:
    """Segments of one help page in document order; a repeated id keeps its first occurrence."""
    parser = _PageParser()
    parser.feed(html)
    parser.close()
    seen: set[str] = set()
    out = []
    for seg in parser.segments:
        if seg.sid not in seen:
            seen.add(seg.sid)
            out.append(seg)
    return out


def help_root(package_root: Path) -> Path:
    """The single language directory under usr/share/libreoffice/help/ (e.g. `en-US`, `zh-CN`)."""
    base = package_root / "usr/share/libreoffice/help"
    langs = sorted(p for p in base.iterdir() if p.is_dir() and (p / "text").is_dir())
    if len(langs) != 1:
        raise ValueError(f"{base}: expected one language directory with text/, found {[p.name for p in langs]}")
    return langs[0]


def iter_pages(lang_dir: Path) -> Iterator[tuple[str, Path]]:
    """(page, file) for every page; page is the path relative to the language dir, e.g. text/swriter/x.html."""
    for path in sorted((lang_dir / "text").rglob("*.html")):
        yield path.relative_to(lang_dir).as_posix(), path


def module_of(page: str) -> str | None:
    """Task label of a page (`text/<module>/...`), or None for a directory outside MODULE_LABELS."""
    parts = page.split("/")
    return MODULE_LABELS.get(parts[1]) if len(parts) > 2 else None


# -- deterministic order -------------------------------------------------------------------------------
def stable_key(s: str) -> bytes:
    """Order of every split and sample: sha256 of a page path, id or line (never Python's hash(), which
    is salted per process)."""
    return hashlib.sha256(s.encode("utf-8")).digest()


# -- filters -------------------------------------------------------------------------------------------
def _letters(s: str) -> list[str]:
    return [c for c in s if unicodedata.category(c).startswith("L")]


def is_text(seg_text: str, cls: str = "") -> bool:
    """A usable natural-language segment: not code, not tiny, mostly letters (not markup or numbers)."""
    if "code" in cls or len(seg_text) < 4:
        return False
    visible = [c for c in seg_text if not c.isspace()]
    letters = _letters(seg_text)
    if len(letters) < 3 or len(letters) < 0.5 * len(visible):
        return False
    # One ASCII token with code punctuation is an identifier or a call (e.g. "ThisComponent.getText()");
    # CJK sentences have no spaces either, hence the ASCII condition.
    return not (seg_text.isascii() and " " not in seg_text and _CODE_TOKEN.search(seg_text))


def is_translated(en: str, xx: str, lang: str) -> bool:
    """False when the target is (nearly) the English text left untranslated."""
    if en == xx:
        return False
    if own_scripts(lang):  # a "translation" with few non-ASCII letters was left in English
        letters = _letters(xx)
        non_ascii = sum(1 for c in letters if ord(c) > 127)
        return bool(letters) and non_ascii >= max(2, 0.3 * len(letters))
    a, b = en.casefold(), xx.casefold()
    m = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return m.real_quick_ratio() < 0.9 or m.quick_ratio() < 0.9 or m.ratio() < 0.9


def en_long_enough(en: str) -> bool:
    """Parallel/task items need at least two English words (single words are dictionary material)."""
    return len(en.split()) >= 2


# -- loading -------------------------------------------------------------------------------------------
def load_language(lang_dir: Path) -> dict[str, dict[str, Segment]]:
    """page -> {segment id: Segment} for every page of one language, in sorted page order."""
    return {page: {s.sid: s for s in parse_page(path.read_text(encoding="utf-8"))}
            for page, path in iter_pages(lang_dir)}
