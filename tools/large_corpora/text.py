"""Text of the large corpora: normalisation, the filters that keep prose in the right language, word counts
and decoding of legacy-encoded files. How each language is written comes from `metaxlm.languages`."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator
from functools import cache

from metaxlm.languages import LEGACY_ENCODINGS, SCRIPT_CHARACTERS, is_unspaced, own_scripts


@cache
def _script_re(lang: str) -> re.Pattern | None:
    """The letters of `lang`'s own script (None for the Latin alphabet): a line is untranslated when few of its
    letters are in it."""
    scripts = own_scripts(lang)
    return re.compile("[" + "".join(SCRIPT_CHARACTERS[s] for s in scripts) + "]") if scripts else None


def _dense(lang: str) -> bool:
    """Do `lang`'s scripts (hanzi, kana, hangul) carry a sentence in few characters (a shorter minimum line)?"""
    return bool({"han", "hangul"} & set(own_scripts(lang)))


MIN_SCRIPT_SHARE = 0.3
_MIN_LETTER_SHARE = 0.5
_MAX_LINE_CHARS = 10_000  # longer "paragraphs" are flattened tables or code dumps

# Terminal colour codes occur in some sources (fortunes-zh, rendered pages).
ANSI_ESCAPE_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b\ufeff]")
_SPACE_RE = re.compile(r"\s+")


def normalize_line(text: str) -> str:
    """NFC, controls to spaces, whitespace collapsed: the form that is written and deduplicated."""
    text = unicodedata.normalize("NFC", ANSI_ESCAPE_RE.sub("", text))
    return _SPACE_RE.sub(" ", _CONTROL_RE.sub(" ", text)).strip()


def script_share(text: str, lang: str) -> float | None:
    """Share of `text`'s letters in `lang`'s own script, or None for Latin-script languages."""
    pattern = _script_re(lang)
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
    if len(text) < (6 if _dense(lang) else 16) or len(text) > _MAX_LINE_CHARS:
        return False
    if not _dense(lang) and text.startswith("-") and len(text.split()) <= 3:
        # an option tag like "-S, --skel=FILE" (in zh/ja "-q 静默" is a tag and its description)
        return False
    non_space = len(text) - text.count(" ")
    if sum(ch.isalpha() for ch in text) < _MIN_LETTER_SHARE * non_space:
        return False
    share = script_share(text, lang)
    if share is None:
        return lang == "en" or not looks_english(text)
    return share >= MIN_SCRIPT_SHARE


def word_count(text: str, lang: str) -> int:
    """Whitespace tokens; for languages written without spaces (zh, ja...) non-space characters / 2, a rough
    word proxy."""
    if is_unspaced(lang):
        return (len(text) - text.count(" ")) // 2
    return len(text.split())


def digest(text: str) -> int:
    """A 64-bit hash of a line: what deduplication remembers instead of the line."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def decode_text(raw: bytes, lang: str) -> str:
    """Decode a text file: UTF-8 (BOM dropped) if valid, else the language's likely legacy encoding, then
    cp1252, then latin-1 (which decodes anything)."""
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    decoded = []
    for encoding in (*LEGACY_ENCODINGS.get(lang, ()), "cp1252"):
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


def join_blocks(lines: Iterable[str]) -> Iterator[str]:
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

