"""Build the `bench` profile's larger real corpora from Debian packages into a local cache (never committed).

`build_bench_corpora(out_dir, cache_dir)` downloads Debian packages into `cache_dir` (reused when present),
extracts their text and writes, atomically (a temp dir beside `out_dir`, renamed at the end):

* `mono/{lang}.txt.gz` -- one paragraph per line, NFC-normalised, exact-deduplicated per language, from
  man pages (`manpages`, `manpages-XX`, `manpages-ja`, `manpages-zh`), fortunes (`fortunes`, `fortunes-min`,
  `fortunes-XX`), the Debian Administrator's Handbook (`debian-handbook`, HTML) and, for English (the
  meta-pretraining language, so the largest), `dict-gcide`, `linux-doc-6.1` HTML and `python3.11-doc` HTML.
  `linux-doc-6.1`'s own translations (zh_CN, ja_JP, ko_KR, it_IT) go to those languages.
* `parallel/en-{xx}.tsv.gz` -- "english<TAB>foreign" UI/diagnostic strings from gettext catalogues
  (`cinnamon-l10n`, `gcc-12-locales`).
* `manifest.json` -- per source package (with version) and language: lines, words, bytes; per pair: pairs.
* `ATTRIBUTION.md` and `LICENSES/<package>.copyright` (each package's Debian copyright file).

Choices worth knowing:

* Leakage: the demo bundle's test splits are LibreOffice help pages, so no `libreoffice-help-*` text is used.
  `libreoffice-l10n-*` is left out too: measured on de, 3,099 of its 3,746 extended tooltips (and 3,235 of
  7,089 UI strings of six words or more) occur verbatim in the English help pages.
* Chinese is Simplified only (`zh_CN`/`zh-CN` trees), matching the demo's zh-cn; the zh_TW copies of the same
  man pages/handbook would be near-duplicates in another script.
* Untranslated text: handbook paragraphs identical to an English handbook paragraph are dropped; for languages
  with their own script (ru, el, zh, ja, ko, hi, ...) a line needs >= 30% of its letters in that script; in
  the other languages a line of 6+ words with >= 15% English function words ("the", "of", "is"...) is dropped.
* Lines need >= 16 characters (6 for zh/ja/ko) and >= 50% letters among non-space characters; option tags
  ("-S, --skel=FILE") are dropped.
  Fortunes under `off/` (offensive collections) and symlinked duplicates are skipped.
* Words are whitespace tokens; zh and ja have no spaces, so their `words` is non-space characters / 2
  (the manifest also carries `chars`).
* Gettext pairs: the header, plural entries and `translator-credits` are dropped, the msgctxt is stripped,
  GTK `_` mnemonics (cinnamon) are removed, printf/brace placeholders are kept verbatim (they are the same
  tokens on both sides), and pairs whose sides are equal ignoring case are dropped.
* Everything is iterated in sorted order and gzip headers carry no time stamp, so the same packages give
  byte-identical files. Lines are written as they are produced; memory is the per-language hash sets.

Set-up requirements (Debian): `apt-get update` done once, `apt-get`/`dpkg-deb` (to fetch packages), and
`groff` (package `groff-base`: groff, preconv, tbl, grotty) to render man pages -- installed here with
`apt-get install groff-base` if missing, which needs root. About 130 MB of .deb files are downloaded.
No language in the default set lacks a source except `hi`: Debian has no Hindi man pages, fortunes or
handbook, so `mono/hi.txt.gz` is empty (the manifest lists it under `warnings`).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from html.parser import HTMLParser
from pathlib import Path

from tqdm import tqdm

from metaxlm.data.demo.fetch import FetchError, Package, fetch_deb
from metaxlm.errors import DataError
from metaxlm.languages import check_language

__all__ = ["DEFAULT_LANGUAGES", "build_bench_corpora"]

DEFAULT_LANGUAGES = ("en", "de", "fr", "es", "ru", "el", "zh", "ja", "tr", "vi", "ko", "hi")

# --------------------------------------------------------------------------------------------------------------
# Text normalisation and line filters
# --------------------------------------------------------------------------------------------------------------

# Characters of each non-Latin language's own script, to catch untranslated (English) paragraphs.
_SCRIPT_RANGES = {
    "cyrillic": "\u0400-\u04ff\u0500-\u052f",
    "greek": "\u0370-\u03ff\u1f00-\u1fff",
    "han": "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff",
    "kana": "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff",
    "hangul": "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af",
    "devanagari": "\u0900-\u097f",
    "arabic": "\u0600-\u06ff\u0750-\u077f",
    "hebrew": "\u0590-\u05ff",
    "thai": "\u0e00-\u0e7f",
}
_LANG_SCRIPTS = {
    "ru": ("cyrillic",), "uk": ("cyrillic",), "bg": ("cyrillic",), "kk": ("cyrillic",), "el": ("greek",),
    "zh": ("han",), "ja": ("han", "kana"), "ko": ("hangul", "han"), "hi": ("devanagari",),
    "mr": ("devanagari",), "ar": ("arabic",), "fa": ("arabic",), "ur": ("arabic",), "he": ("hebrew",),
    "th": ("thai",),
}
_SCRIPT_RE = {lang: re.compile("[" + "".join(_SCRIPT_RANGES[s] for s in scripts) + "]")
              for lang, scripts in _LANG_SCRIPTS.items()}
_NO_SPACE_LANGS = frozenset({"zh", "ja"})  # word counts use characters / 2 for these
_DENSE_LANGS = frozenset({"zh", "ja", "ko"})  # few characters carry a sentence
_MIN_SCRIPT_SHARE = 0.3
_MIN_LETTER_SHARE = 0.5
_MAX_LINE_CHARS = 10_000  # longer "paragraphs" are flattened tables or code dumps

# Terminal colour codes occur in some sources (fortunes-zh, rendered pages).
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b\ufeff]")
_SPACE_RE = re.compile(r"\s+")


def normalize_line(text: str) -> str:
    """NFC, controls to spaces, whitespace collapsed: the form that is written and deduplicated."""
    text = unicodedata.normalize("NFC", _ANSI_RE.sub("", text))
    return _SPACE_RE.sub(" ", _CONTROL_RE.sub(" ", text)).strip()


def script_share(text: str, lang: str) -> float | None:
    """Share of `text`'s letters in `lang`'s own script, or None for Latin-script languages."""
    pattern = _SCRIPT_RE.get(lang)
    if pattern is None:
        return None
    letters = sum(ch.isalpha() for ch in text)
    return len(pattern.findall(text)) / letters if letters else 0.0


# Frequent English function words that are rare as words in the other Latin-script languages here
# ("in", "a", "an", "was", "will", "on", "die" are left out: German/French/Spanish words too).
_ENGLISH_WORDS = frozenset(
    "the of and to is that for with are this be by which it from or you when can if not have has been should"
    .split())
_WORD_RE = re.compile(r"[^\W\d_]+")


def looks_english(text: str) -> bool:
    """At least 6 words of which >= 15% are English function words (English prose has 25-35%)."""
    words = [w.lower() for w in _WORD_RE.findall(text)]
    return len(words) >= 6 and sum(w in _ENGLISH_WORDS for w in words) >= 0.15 * len(words)


def keep_line(text: str, lang: str) -> bool:
    """Is a normalised line prose in `lang` (long enough, mostly letters, in the language's script)?

    Untranslated English left in a translation is dropped: by script share for languages with their
    own script, by English function words for the other (Latin-script) languages.
    """
    if len(text) < (6 if lang in _DENSE_LANGS else 16) or len(text) > _MAX_LINE_CHARS:
        return False
    if lang not in _DENSE_LANGS and text.startswith("-") and len(text.split()) <= 3:
        # an option tag like "-S, --skel=FILE" (in zh/ja "-q 静默" is a tag and its description)
        return False
    non_space = len(text) - text.count(" ")
    if sum(ch.isalpha() for ch in text) < _MIN_LETTER_SHARE * non_space:
        return False
    share = script_share(text, lang)
    if share is None:
        return lang == "en" or not looks_english(text)
    return share >= _MIN_SCRIPT_SHARE


def word_count(text: str, lang: str) -> int:
    """Whitespace tokens; for zh/ja (no spaces) non-space characters / 2, a rough word proxy."""
    if lang in _NO_SPACE_LANGS:
        return (len(text) - text.count(" ")) // 2
    return len(text.split())


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


# Legacy encodings tried (in order) when a file is not UTF-8; cp1252 then latin-1 close every list.
_LEGACY_ENCODINGS = {
    "ru": ("koi8-r", "cp1251"), "uk": ("koi8-u", "cp1251"), "bg": ("cp1251",), "el": ("iso8859-7",),
    "zh": ("gb18030", "big5"), "ja": ("euc-jp", "shift_jis"), "ko": ("euc-kr",), "tr": ("iso8859-9",),
    "pl": ("iso8859-2",), "cs": ("iso8859-2",),
}


def decode_text(raw: bytes, lang: str) -> str:
    """Decode a text file: UTF-8 (BOM dropped) if valid, else the language's likely legacy encoding."""
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    decoded = []
    for encoding in (*_LEGACY_ENCODINGS.get(lang, ()), "cp1252"):
        try:
            decoded.append(raw.decode(encoding))
        except UnicodeDecodeError:
            continue
    if not decoded:
        return raw.decode("latin-1")  # never fails: every byte is a character
    if lang in ("ru", "uk"):
        # KOI8 and cp1251 both decode any byte string but swap the case of Cyrillic letters:
        # real text is mostly lower case, so the right one has more lower-case letters.
        return max(decoded, key=lambda t: sum(ch.islower() for ch in t))
    return decoded[0]


def _join_blocks(lines: Iterable[str]) -> Iterator[str]:
    """Runs of non-blank lines, each joined with spaces (a blank line ends a paragraph)."""
    block: list[str] = []
    for line in lines:
        if line.strip():
            block.append(line.strip())
        elif block:
            yield " ".join(block)
            block = []
    if block:
        yield " ".join(block)


# --------------------------------------------------------------------------------------------------------------
# Fortunes
# --------------------------------------------------------------------------------------------------------------


def split_fortunes(text: str) -> list[str]:
    """Fortune entries are separated by lines holding only `%`; each entry's paragraphs become lines."""
    paragraphs: list[str] = []
    entry: list[str] = []
    for line in text.splitlines():
        if line.strip() == "%":
            paragraphs.extend(_join_blocks(entry))
            entry = []
        else:
            entry.append(line)
    paragraphs.extend(_join_blocks(entry))
    return paragraphs


def _fortune_files(root: Path) -> list[Path]:
    """Regular fortune files (no `.dat` index, no `.u8` symlinks, nothing under an `off/` directory)."""
    base = root / "usr/share/games/fortunes"
    if not base.is_dir():
        return []
    return sorted(p for p in base.rglob("*")
                  if p.is_file() and not p.is_symlink() and p.suffix != ".dat"
                  and "off" not in p.relative_to(base).parts[:-1])


def fortune_lines(root: Path, lang: str, progress: bool) -> Iterator[tuple[str, str]]:
    for path in _bar(_fortune_files(root), path_desc(root), progress):
        for paragraph in split_fortunes(decode_text(path.read_bytes(), lang)):
            yield lang, paragraph


# --------------------------------------------------------------------------------------------------------------
# Man pages (roff rendered by groff)
# --------------------------------------------------------------------------------------------------------------

_OVERSTRIKE_RE = re.compile(r".\x08")
# -k/-K: preconv reads UTF-8; -t: tables; huge line length and no hyphenation so a paragraph is one line;
# grotty -c -b -o -u: no SGR escapes, no overstriking (clean_terminal_text still removes any that appear).
_GROFF_CMD = ("groff", "-k", "-K", "utf-8", "-t", "-Tutf8", "-mandoc", "-rLL=2000n", "-rHY=0", "-P-cbou")


def clean_terminal_text(text: str) -> str:
    """Remove ANSI escapes and backspace overstrikes (`X\\bX` bold, `_\\bX` underline) from terminal output."""
    text = _ANSI_RE.sub("", text)
    text = _OVERSTRIKE_RE.sub("", text)
    return text.replace("\x08", "")


def is_so_stub(source: str) -> bool:
    """A page whose first non-comment request is `.so other.1` only points at another page."""
    for line in source.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(('.\\"', "'\\\"", '\\"')):
            continue
        return stripped.startswith(".so ")
    return False


def roff_paragraphs(rendered: str) -> list[str]:
    """Paragraphs of a groff-rendered page, without its header and footer lines.

    A blank line or a change of indentation starts a new paragraph, so section headings (column 0)
    and option tags (indented less than their description) do not run into the text below them.
    """
    lines = clean_terminal_text(rendered).splitlines()
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if len(filled) >= 2:  # first and last non-blank lines are "LS(1) ... LS(1)" header and footer
        lines = lines[filled[0] + 1:filled[-1]]
    paragraphs: list[str] = []
    block: list[str] = []
    indent = -1
    for line in lines:
        this_indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or (block and this_indent != indent):
            if block:
                paragraphs.append(" ".join(block))
            block = []
        if line.strip():
            block.append(line.strip())
            indent = this_indent
    if block:
        paragraphs.append(" ".join(block))
    return paragraphs


def render_man_page(path: Path, lang: str) -> list[str]:
    """Paragraphs of one (possibly gzipped) man page; [] for `.so` stubs and pages groff cannot render."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    source = decode_text(raw, lang)
    if is_so_stub(source):
        return []
    try:
        proc = subprocess.run(_GROFF_CMD, input=source.encode("utf-8"), capture_output=True, timeout=120,
                              check=False, env={**os.environ, "LC_ALL": "C.UTF-8"})
    except subprocess.TimeoutExpired:
        return []
    if proc.returncode != 0 and not proc.stdout:
        return []
    return roff_paragraphs(proc.stdout.decode("utf-8", errors="replace"))


def _man_files(root: Path, lang: str) -> list[Path]:
    """Man page files of `lang` in an unpacked package (English pages sit directly in man/manN)."""
    man = root / "usr/share/man"
    if not man.is_dir():
        return []
    if lang == "en":
        sections = [d for d in man.iterdir() if re.fullmatch(r"man\w+", d.name)]
    else:
        locale = pick_locale([d.name for d in man.iterdir() if d.is_dir()], lang)
        sections = list((man / locale).iterdir()) if locale else []
    return sorted(p for d in sections if d.is_dir() for p in d.iterdir() if p.is_file() and not p.is_symlink())


def man_lines(root: Path, lang: str, progress: bool) -> Iterator[tuple[str, str]]:
    files = _man_files(root, lang)
    # groff runs in subprocesses, so threads render pages in parallel; map keeps the sorted order, and
    # chunks bound how many rendered pages wait in memory.
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        bar = tqdm(total=len(files), desc=path_desc(root), unit="page", leave=False, disable=not progress)
        for start in range(0, len(files), 64):
            chunk = files[start:start + 64]
            for paragraphs in pool.map(partial(render_man_page, lang=lang), chunk):
                for paragraph in paragraphs:
                    yield lang, paragraph
            bar.update(len(chunk))
        bar.close()


def ensure_groff() -> None:
    """Man pages need groff; install Debian's `groff-base` when it is missing (root only)."""
    if shutil.which("groff") and shutil.which("preconv"):
        return
    subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "groff-base"],
                   capture_output=True, check=False)
    if not shutil.which("groff"):
        raise FetchError("man pages need groff: run `apt-get install groff-base` (as root) and retry")


# --------------------------------------------------------------------------------------------------------------
# HTML (debian-handbook, Sphinx docs)
# --------------------------------------------------------------------------------------------------------------

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
    english_seen = {_digest(p) for f in _html_files(html / english)
                    for p in _html_file_paragraphs(f)} if english else set()
    for lang in languages:
        locale = pick_locale(locales, lang)
        if locale is None:
            continue
        for path in _bar(_html_files(html / locale), f"debian-handbook {locale}", progress):
            for paragraph in _html_file_paragraphs(path):
                if lang == "en" or _digest(paragraph) not in english_seen:
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
        for path in _bar(_html_files(base, exclude), path_desc(root), progress):
            for paragraph in _html_file_paragraphs(path):
                yield "en", paragraph
    if translations and (base / translations).is_dir():
        locales = sorted(d.name for d in (base / translations).iterdir() if d.is_dir())
        for lang in languages:
            locale = pick_locale(locales, lang) if lang != "en" else None
            if locale:
                for path in _bar(_html_files(base / translations / locale), f"{locale} docs", progress):
                    for paragraph in _html_file_paragraphs(path):
                        yield lang, paragraph


# --------------------------------------------------------------------------------------------------------------
# GCIDE (dictd)
# --------------------------------------------------------------------------------------------------------------

_GCIDE_TAG_RE = re.compile(r"\[(?:[^\]]*(?:Webster|PJC|WordNet|Dict\.|Suppl\.|Chambers|Century)[^\]]*)\]")
_GCIDE_PRON_RE = re.compile(r"\\[^\\\n]{1,80}\\,?")


def gcide_paragraphs(lines: Iterable[str]) -> Iterator[str]:
    """Definition paragraphs of the GCIDE dictd text: source tags, pronunciations and `{}` dropped."""
    for paragraph in _join_blocks(lines):
        if paragraph.startswith("00-database"):
            continue
        paragraph = _GCIDE_PRON_RE.sub("", _GCIDE_TAG_RE.sub("", paragraph))
        yield paragraph.replace("{", "").replace("}", "")


def gcide_lines(root: Path, languages: tuple[str, ...], progress: bool) -> Iterator[tuple[str, str]]:
    dz = root / "usr/share/dictd/gcide.dict.dz"
    if "en" not in languages or not dz.is_file():
        return
    # A dictzip file is a valid gzip stream, so it is read line by line without an index.
    with gzip.open(dz, "rt", encoding="utf-8", errors="replace") as lines:
        for paragraph in gcide_paragraphs(_bar(lines, "dict-gcide", progress, unit="line")):
            yield "en", paragraph


# --------------------------------------------------------------------------------------------------------------
# Gettext catalogues
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MoEntry:
    context: str | None
    msgid: str
    msgid_plural: str | None
    msgstrs: tuple[str, ...]


def read_mo(path: Path) -> list[MoEntry]:
    """Parse a GNU .mo file (either byte order); strings are decoded with the header's charset."""
    data = path.read_bytes()
    if len(data) < 20:
        raise DataError(path, None, "not a gettext .mo file (too short)")
    magic = struct.unpack_from("<I", data)[0]
    order = {0x950412DE: "<", 0xDE120495: ">"}.get(magic)
    if order is None:
        raise DataError(path, None, f"not a gettext .mo file (magic {magic:#x})")
    _revision, count, ids_at, strs_at = struct.unpack_from(order + "4I", data, 4)
    raw = []
    for i in range(count):
        id_len, id_at = struct.unpack_from(order + "2I", data, ids_at + 8 * i)
        str_len, str_at = struct.unpack_from(order + "2I", data, strs_at + 8 * i)
        raw.append((data[id_at:id_at + id_len], data[str_at:str_at + str_len]))
    charset = "utf-8"
    for msgid, msgstr in raw:
        if msgid == b"":
            found = re.search(rb"charset=([\w.-]+)", msgstr)
            if found and found.group(1).lower() != b"charset":
                charset = found.group(1).decode("ascii")
    entries = []
    for msgid, msgstr in raw:
        context, _, msgid = msgid.rpartition(b"\x04")
        singular, _, plural = msgid.partition(b"\x00")
        entries.append(MoEntry(
            context.decode(charset, errors="replace") if context else None,
            singular.decode(charset, errors="replace"),
            plural.decode(charset, errors="replace") if b"\x00" in msgid else None,
            tuple(s.decode(charset, errors="replace") for s in msgstr.split(b"\x00"))))
    return entries


_ENTITY_RE = re.compile(r"&[A-Za-z]+;|&#\d+;")
_PLACEHOLDER_RE = re.compile(r"%(?:\d+\$)?[-+ #0']*\d*(?:\.\d+)?[hlLqjzt]*[A-Za-z%]|%[<>]|\{[^{}\s]*\}")


def strip_accelerators(text: str, markers: str) -> str:
    """Remove keyboard-accelerator markers: `(_F)` suffixes and one lone marker before a letter or digit.

    Only a marker that occurs exactly once is removed, so `file_name`-like strings with several
    underscores, `&&`, and HTML entities are left alone.
    """
    for marker in markers:
        text = re.sub(r"\s*\(" + re.escape(marker) + r"[A-Za-z0-9]\)", "", text)
        # `&amp;`-style entities are not accelerators: neither counted nor removed.
        lone = re.escape(marker) + (r"(?![A-Za-z]+;|#\d+;)" if marker == "&" else "") + r"(?=\w)"
        probe = _ENTITY_RE.sub("", text) if marker == "&" else text
        if probe.count(marker) == 1 and re.search(lone, text):
            text = re.sub(lone, "", text, count=1)
    return text


def clean_pair(english: str, foreign: str, lang: str, markers: str = "") -> tuple[str, str] | None:
    """A usable (english, foreign) pair, or None when empty, untranslated, or not text at all."""
    english = normalize_line(strip_accelerators(english, markers))
    foreign = normalize_line(strip_accelerators(foreign, markers))
    if not english or not foreign or english.casefold() == foreign.casefold():
        return None
    if english in ("translator-credits", "translator_credits", "translators"):
        return None
    if not any(ch.isalpha() for ch in _PLACEHOLDER_RE.sub("", english)):
        return None
    share = script_share(foreign, lang)
    if share is not None and share < _MIN_SCRIPT_SHARE:
        return None
    return english, foreign


def mo_pairs(path: Path, lang: str, markers: str = "") -> Iterator[tuple[str, str]]:
    """(english, foreign) pairs of one catalogue; header, plural and untranslated entries dropped."""
    for entry in sorted(read_mo(path), key=lambda e: (e.msgid, e.context or "")):
        if not entry.msgid or entry.msgid_plural is not None or len(entry.msgstrs) != 1:
            continue
        pair = clean_pair(entry.msgid, entry.msgstrs[0], lang, markers)
        if pair:
            yield pair


def gettext_pairs(root: Path, languages: tuple[str, ...], progress: bool,
                  markers: str = "") -> Iterator[tuple[str, tuple[str, str]]]:
    locale_dir = root / "usr/share/locale"
    locales = sorted(d.name for d in locale_dir.iterdir() if d.is_dir()) if locale_dir.is_dir() else []
    for lang in languages:
        locale = pick_locale(locales, lang) if lang != "en" else None
        if locale is None:
            continue
        for mo in sorted((locale_dir / locale / "LC_MESSAGES").glob("*.mo")):
            for pair in mo_pairs(mo, lang, markers):
                yield lang, pair


# --------------------------------------------------------------------------------------------------------------
# Output writers
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Counts:
    lines: int = 0
    words: int = 0
    chars: int = 0
    bytes: int = 0

    def add(self, text: str, lang: str) -> None:
        self.lines += 1
        self.words += word_count(text, lang)
        self.chars += len(text)
        self.bytes += len(text.encode("utf-8")) + 1


def _open_gzip_text(path: Path) -> tuple[io.TextIOWrapper, io.BufferedWriter]:
    """A text stream into a gzip file with no name or time stamp in its header (reproducible bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = open(path, "wb")  # closed by DedupWriter.close()
    gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6)
    return io.TextIOWrapper(gz, encoding="utf-8", newline="\n"), raw


@dataclass
class DedupWriter:
    """Writes filtered lines once each (by 64-bit hash) into a .gz file, counting them per source."""

    path: Path
    lang: str
    keep: Callable[[str, str], bool] = keep_line
    normalize: Callable[[str], str] = normalize_line
    total: Counts = field(default_factory=Counts)
    by_source: dict[str, Counts] = field(default_factory=dict)
    _seen: set[int] = field(default_factory=set)
    _out: io.TextIOWrapper | None = None
    _raw: io.BufferedWriter | None = None

    def add(self, text: str, source: str) -> bool:
        text = self.normalize(text)
        if not self.keep(text, self.lang):
            return False
        key = _digest(text)
        if key in self._seen:
            return False
        self._seen.add(key)
        if self._out is None:
            self._out, self._raw = _open_gzip_text(self.path)
        self._out.write(text + "\n")
        self.total.add(text, self.lang)
        self.by_source.setdefault(source, Counts()).add(text, self.lang)
        return True

    def close(self) -> None:
        if self._out is None:  # nothing was written: still leave a valid (empty) file
            self._out, self._raw = _open_gzip_text(self.path)
        self._out.close()
        self._raw.close()


def _keep_pair_line(text: str, lang: str) -> bool:
    return bool(text)  # pairs are already filtered by clean_pair


def _pair_as_is(text: str) -> str:
    return text  # both sides are normalised by clean_pair; normalize_line would turn the tab into a space


# --------------------------------------------------------------------------------------------------------------
# Package plan and build
# --------------------------------------------------------------------------------------------------------------

# Locale directory to prefer when a language has several (Simplified Chinese, like the demo bundle).
_PREFERRED_LOCALES = {"zh": ("zh_CN", "zh-CN"), "pt": ("pt", "pt_BR", "pt-BR"), "en": ("en", "en_US", "en-US")}

_LICENCES = {
    "manpages": "various free licences, per page (see copyright)",
    "manpages-ja": "the licences of the original pages, per page (see copyright)",
    "manpages-tr": "GNU GPL and the original pages' licences (see copyright)",
    "manpages-zh": "GFDL-1.2+",
    "fortunes": "BSD-style (fortune-mod); cookies of various origins (see copyright)",
    "fortunes-min": "BSD-style (fortune-mod); cookies of various origins (see copyright)",
    "fortunes-de": "GPL-2+", "fortunes-es": "GPL-2+", "fortunes-ru": "GPL-2 / GPL-2+", "fortunes-zh": "GPL-3+",
    "debian-handbook": "GPL-2+ or CC-BY-SA-3.0",
    "dict-gcide": "GPL-2+ (GCIDE)",
    "linux-doc-6.1": "GPL-2",
    "python3.11-doc": "PSF-2.0",
    "cinnamon-l10n": "GPL-2+",
    "gcc-12-locales": "GPL-3+ (copyright file of gcc-12-base)",
}


def pick_locale(names: Iterable[str], lang: str) -> str | None:
    """The locale directory for `lang` among `names` (`de`, `de-DE`, `zh_CN`...), preferring the plain code."""
    names = sorted(names)
    for preferred in _PREFERRED_LOCALES.get(lang, (lang,)):
        if preferred in names:
            return preferred
    if lang in _PREFERRED_LOCALES:
        return None  # e.g. zh: no Simplified tree, and zh_TW is not a stand-in
    matching = [n for n in names if re.split(r"[-_@.]", n)[0] == lang and "@" not in n]
    return matching[0] if matching else None


def path_desc(root: Path) -> str:
    return root.name.split("_")[0]


def _bar(items: Iterable, desc: str, progress: bool, unit: str = "file") -> Iterable:
    return tqdm(items, desc=desc, unit=unit, leave=False, disable=not progress)


MonoExtractor = Callable[[Path, tuple[str, ...], bool], Iterator[tuple[str, str]]]


def _per_lang(extract: Callable[[Path, str, bool], Iterator[tuple[str, str]]], lang: str) -> MonoExtractor:
    return lambda root, languages, progress: extract(root, lang, progress)


def mono_plan(languages: tuple[str, ...]) -> list[tuple[str, MonoExtractor]]:
    """(Debian package, extractor) pairs for the monolingual corpora, sorted by package name."""
    plan: dict[str, MonoExtractor] = {"debian-handbook": handbook_lines}
    for lang in languages:
        if lang == "en":
            plan["manpages"] = _per_lang(man_lines, "en")
            plan["fortunes"] = _per_lang(fortune_lines, "en")
            plan["fortunes-min"] = _per_lang(fortune_lines, "en")
            plan["dict-gcide"] = gcide_lines
            plan["python3.11-doc"] = partial(sphinx_lines, html_dir="usr/share/doc/python3.11/html")
        else:
            plan[f"manpages-{lang}"] = _per_lang(man_lines, lang)
            plan[f"fortunes-{lang}"] = _per_lang(fortune_lines, lang)
    # The kernel docs are English, plus translations into zh/ja/ko/it that are used for those languages.
    plan["linux-doc-6.1"] = partial(sphinx_lines, html_dir="usr/share/doc/linux-doc-6.1/html",
                                    translations="translations")
    return sorted(plan.items())


PARALLEL_PLAN: tuple[tuple[str, str], ...] = (  # (package, accelerator markers of its toolkit)
    ("cinnamon-l10n", "_"),
    ("gcc-12-locales", ""),
)


class _Fetcher:
    """Fetches each package once; a missing package is noted (printed and kept) instead of failing."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir
        self.packages: dict[str, Package] = {}
        self.skipped: dict[str, str] = {}

    def get(self, name: str) -> Package | None:
        if name not in self.packages and name not in self.skipped:
            try:
                self.packages[name] = fetch_deb(name, self.cache_dir)
            except FetchError as error:
                self.skipped[name] = str(error)
                tqdm.write(f"note: skipping Debian package {name}: {error}", file=sys.stderr)
        return self.packages.get(name)


def _build_mono(tmp: Path, fetcher: _Fetcher, languages: tuple[str, ...], progress: bool
                ) -> dict[str, DedupWriter]:
    writers = {lang: DedupWriter(tmp / "mono" / f"{lang}.txt.gz", lang) for lang in languages}
    try:
        plan = tqdm(mono_plan(languages), desc="mono corpora", unit="pkg", disable=not progress)
        for name, extract in plan:
            plan.set_postfix_str(name)
            package = fetcher.get(name)
            if package is not None:
                for lang, text in extract(package.root, languages, progress):
                    writers[lang].add(text, name)
    finally:
        for writer in writers.values():
            writer.close()
    return writers


def _build_parallel(tmp: Path, fetcher: _Fetcher, languages: tuple[str, ...], progress: bool
                    ) -> dict[str, DedupWriter]:
    writers = {lang: DedupWriter(tmp / "parallel" / f"en-{lang}.tsv.gz", lang, keep=_keep_pair_line,
                                 normalize=_pair_as_is)
               for lang in languages if lang != "en"}
    try:
        plan = tqdm(PARALLEL_PLAN, desc="parallel corpora", unit="pkg", disable=not progress)
        for name, markers in plan:
            plan.set_postfix_str(name)
            package = fetcher.get(name)
            if package is not None:
                for lang, (english, foreign) in gettext_pairs(package.root, languages, progress, markers):
                    writers[lang].add(f"{english}\t{foreign}", name)
    finally:
        for writer in writers.values():
            writer.close()
    return writers


def _copyright_file(package: Package, fetcher: _Fetcher) -> Path | None:
    """The package's Debian copyright file; a doc dir symlinked to another package uses that one's."""
    doc = package.root / "usr/share/doc" / package.name
    if (doc / "copyright").is_file():
        return doc / "copyright"
    if doc.is_symlink():
        other = fetcher.get(Path(os.readlink(doc)).name)
        if other is not None and (other.root / "usr/share/doc" / other.name / "copyright").is_file():
            return other.root / "usr/share/doc" / other.name / "copyright"
    return None


def _counts_dict(counts: Counts, lang: str) -> dict:
    out = {"lines": counts.lines, "words": counts.words, "bytes": counts.bytes}
    if lang in _NO_SPACE_LANGS:
        out["chars"] = counts.chars
    return out


def _manifest(languages: tuple[str, ...], mono: dict[str, DedupWriter], parallel: dict[str, DedupWriter],
              fetcher: _Fetcher, tmp: Path) -> dict:
    used = sorted({s for w in [*mono.values(), *parallel.values()] for s in w.by_source})
    sources = {}
    for name in used:
        package = fetcher.packages[name]
        sources[name] = {
            "version": package.version,
            "licence": _LICENCES.get(name, "see copyright file"),
            "licence_file": f"LICENSES/{name}.copyright",
            "mono": {lang: _counts_dict(w.by_source[name], lang) for lang, w in mono.items() if name in w.by_source},
            "parallel": {f"en-{lang}": w.by_source[name].lines
                         for lang, w in parallel.items() if name in w.by_source},
        }
    warnings = [f"{lang}: no monolingual text found" for lang, w in mono.items() if w.total.lines == 0]
    warnings += [f"en-{lang}: no parallel pairs found" for lang, w in parallel.items() if w.total.lines == 0]
    return {
        "format": 1,
        "languages": list(languages),
        "word_count": "whitespace tokens; zh and ja: non-space characters / 2",
        "mono": {lang: {"file": f"mono/{lang}.txt.gz", **_counts_dict(w.total, lang),
                        "gz_bytes": (tmp / "mono" / f"{lang}.txt.gz").stat().st_size}
                 for lang, w in mono.items()},
        "parallel": {f"en-{lang}": {"file": f"parallel/en-{lang}.tsv.gz", "pairs": w.total.lines}
                     for lang, w in parallel.items()},
        "sources": sources,
        "skipped_packages": dict(sorted(fetcher.skipped.items())),
        "excluded": {
            "libreoffice-help-*": "the demo bundle's test splits are LibreOffice help pages",
            "libreoffice-l10n-*": "its tooltips and long UI strings occur verbatim in the help pages",
        },
        "warnings": warnings,
    }


def _write_licences(tmp: Path, manifest: dict, fetcher: _Fetcher) -> None:
    (tmp / "LICENSES").mkdir()
    rows = []
    for name, info in manifest["sources"].items():
        copyright_file = _copyright_file(fetcher.packages[name], fetcher)
        if copyright_file is not None:
            shutil.copyfile(copyright_file, tmp / info["licence_file"])
        else:
            info["licence_file"] = None
        used = sorted(info["mono"]) + sorted(info["parallel"])
        rows.append(f"| `{name}` | {info['version']} | {info['licence']} | {', '.join(used)} | "
                    f"{info['licence_file'] or 'not found'} |")
    text = [
        "# Bench corpora: sources and licences",
        "",
        "Built by `metaxlm.data.bench_corpora.build_bench_corpora` from Debian (bookworm) packages. Each line",
        "of `mono/` and each pair of `parallel/` is text taken from these packages (re-flowed, deduplicated).",
        "The authoritative licence terms are the packages' Debian copyright files, copied into `LICENSES/`.",
        "",
        "| package | version | licence | used for | copyright file |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]
    (tmp / "ATTRIBUTION.md").write_text("\n".join(text), encoding="utf-8")


def _replace_dir(new: Path, target: Path) -> None:
    """Move `new` to `target`, replacing an older build only once the new one is complete."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        target.rename(old)
    new.rename(target)
    if old is not None:
        shutil.rmtree(old)


def build_bench_corpora(out_dir: Path, cache_dir: Path, *, languages: Iterable[str] = DEFAULT_LANGUAGES,
                        progress: bool = True) -> dict:
    """Fetch the Debian packages into `cache_dir`, build the corpora into `out_dir`, return the manifest.

    `out_dir` is replaced only when the build succeeded (it is built in a temp dir beside it).
    Packages that do not exist are skipped with a printed note and listed in the manifest.
    """
    languages = tuple(dict.fromkeys(check_language(lang, "bench corpora") for lang in languages))
    out_dir, cache_dir = Path(out_dir).resolve(), Path(cache_dir).resolve()
    ensure_groff()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    tmp.chmod(0o755)  # mkdtemp's 0700 would make the finished corpora private to this user
    try:
        fetcher = _Fetcher(cache_dir)
        mono = _build_mono(tmp, fetcher, languages, progress)
        parallel = _build_parallel(tmp, fetcher, languages, progress)
        manifest = _manifest(languages, mono, parallel, fetcher, tmp)
        _write_licences(tmp, manifest, fetcher)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                           encoding="utf-8")
        _replace_dir(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest
