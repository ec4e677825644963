"""HTML documentation (the Debian Administrator's Handbook, Sphinx docs): one line per block element."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from pathlib import Path

from tools.large_corpora.debian import path_desc, pick_locale, progress_bar
from tools.large_corpora.text import digest, normalize_line

_BLOCK_TAGS = frozenset(
    "address article aside blockquote body caption dd div dl dt figcaption figure h1 h2 h3 h4 h5 h6 header "
    "hr li main ol p section table tbody td tfoot th thead title tr ul".split())
# Code, navigation and page chrome: text there is not prose (or repeats on every page).
_SKIP_TAGS = frozenset("script style pre head nav footer form select textarea svg math button noscript".split())
_SKIP_CLASSES = frozenset(
    "toc docnav navheader navfooter sphinxsidebar related footer highlight headerlink sig wy-nav-side "
    "wy-nav-top wy-breadcrumbs rst-versions rst-footer-buttons".split())
_SKIP_IDS = frozenset({"banner", "searchbox"})
_VOID_TAGS = frozenset("area base br col embed hr img input link meta source track wbr".split())


class _ParagraphParser(HTMLParser):
    """Collects the text between block-level tags, skipping whole skip elements (tracked by nesting)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._buffer: list[str] = []
        self._skip_tag: str | None = None
        self._skip_depth = 0

    def _flush(self) -> None:
        text = normalize_line("".join(self._buffer))
        if text:
            self.paragraphs.append(text)
        self._buffer = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip_tag is not None:
            self._skip_depth += tag == self._skip_tag
            return
        attr = dict(attrs)
        classes = set((attr.get("class") or "").split())
        if tag in _SKIP_TAGS or classes & _SKIP_CLASSES or attr.get("id") in _SKIP_IDS:
            if tag not in _VOID_TAGS:
                self._flush()
                self._skip_tag, self._skip_depth = tag, 1
        elif tag in _BLOCK_TAGS:
            self._flush()
        elif tag == "br":
            self._buffer.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if self._skip_tag is not None:
            if tag == self._skip_tag:
                self._skip_depth -= 1
                if self._skip_depth == 0:
                    self._skip_tag = None
            return
        if tag in _BLOCK_TAGS:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._skip_tag is None:
            self._buffer.append(data)


def html_paragraphs(html: str) -> list[str]:
    """Normalised text of each block element (p, div, li, h1, td, ...) outside code and navigation."""
    parser = _ParagraphParser()
    parser.feed(html)
    parser.close()
    parser._flush()
    return parser.paragraphs


def _html_file_paragraphs(path: Path) -> list[str]:
    return html_paragraphs(path.read_bytes().decode("utf-8", errors="replace"))


def handbook_lines(root: Path, languages: tuple[str, ...], progress: bool) -> Iterator[tuple[str, str]]:
    """Handbook paragraphs per language; translations' paragraphs still in English are dropped."""
    html = root / "usr/share/doc/debian-handbook/html"
    locales = sorted(d.name for d in html.iterdir() if d.is_dir()) if html.is_dir() else []
    english = pick_locale(locales, "en")
    english_seen = {digest(p) for f in _html_files(html / english)
                    for p in _html_file_paragraphs(f)} if english else set()
    for lang in languages:
        locale = pick_locale(locales, lang)
        if locale is None:
            continue
        for path in progress_bar(_html_files(html / locale), f"debian-handbook {locale}", progress):
            for paragraph in _html_file_paragraphs(path):
                if lang == "en" or digest(paragraph) not in english_seen:
                    yield lang, paragraph


def _html_files(directory: Path, exclude: Iterable[str] = ()) -> list[Path]:
    """HTML pages under `directory`, without Sphinx/Publican support trees and generated indexes."""
    skip_dirs = {"_static", "_sources", "_images", "_downloads", "Common_Content", *exclude}
    return sorted(p for p in directory.rglob("*.html")
                  if not skip_dirs & set(p.relative_to(directory).parts[:-1])
                  and not p.name.startswith(("genindex", "search", "py-modindex")))


def sphinx_lines(root: Path, languages: tuple[str, ...], progress: bool, *, html_dir: str,
                 translations: str | None = None) -> Iterator[tuple[str, str]]:
    """English Sphinx HTML docs; `translations/<locale>/` subtrees (linux-doc) go to their language."""
    base = root / html_dir
    if "en" in languages:
        exclude = [translations] if translations else []
        for path in progress_bar(_html_files(base, exclude), path_desc(root), progress):
            for paragraph in _html_file_paragraphs(path):
                yield "en", paragraph
    if translations and (base / translations).is_dir():
        locales = sorted(d.name for d in (base / translations).iterdir() if d.is_dir())
        for lang in languages:
            locale = pick_locale(locales, lang) if lang != "en" else None
            if locale:
                for path in progress_bar(_html_files(base / translations / locale), f"{locale} docs", progress):
                    for paragraph in _html_file_paragraphs(path):
                        yield lang, paragraph

