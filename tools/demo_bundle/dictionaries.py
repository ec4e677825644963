"""Bilingual en-xx word dictionaries (MUSE-style pairs) from Debian's FreeDict packages."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from metaxlm.data.readers import read_freedict
from metaxlm.languages import is_unspaced, own_scripts

# bundle language -> FreeDict ISO 639-3 code (package dict-freedict-eng-<code>)
FREEDICT_LANGS = {"de": "deu", "fr": "fra", "es": "spa", "tr": "tur", "el": "ell", "hi": "hin", "ja": "jpn"}

_WORD = re.compile(r"[^\W\d_]+(?:['-][^\W\d_]+)*")  # a word: letters, inner hyphen/apostrophe
_EDGE_PUNCT = " '\"‘’“”.,;:…!?"  # stray quotes/dots left around a translation ("' चिह्न")
MAX_TRANSLATION_WORDS = 3
MAX_TRANSLATION_CHARS = 40


def vocabulary(lines: Iterable[str]) -> set[str]:
    """Case-folded words of a text (the filter that keeps only dictionary entries the demo text uses)."""
    vocab: set[str] = set()
    for line in lines:
        vocab.update(_WORD.findall(line.casefold()))
    return vocab


def keep_pair(english: str, foreign: str, lang: str) -> bool:
    """A MUSE-style pair: a single English word and a short translation in the target script."""
    if len(english) < 2 or not _WORD.fullmatch(english):  # one letter: note names, symbols
        return False
    if len(foreign) > MAX_TRANSLATION_CHARS or len(foreign.split()) > MAX_TRANSLATION_WORDS:
        return False
    if "\t" in foreign or not any(c.isalpha() for c in foreign):
        return False
    return not (own_scripts(lang) and foreign.isascii())  # ASCII only: a stray English gloss


def dictionary_pairs(entries: Iterable[tuple[str, list[str]]], lang: str, en_vocab: set[str],
                     xx_vocab: set[str]) -> list[tuple[str, str]]:
    """Sorted unique (english, foreign) pairs whose English word occurs in `en_vocab` or whose translation
    (every word of it) occurs in `xx_vocab`; keeps the files small and relevant to the demo text."""
    pairs: set[tuple[str, str]] = set()
    for headword, translations in entries:
        english = headword.strip()
        for foreign in translations:
            foreign = " ".join(foreign.split()).strip(_EDGE_PUNCT)
            if not keep_pair(english, foreign, lang):
                continue
            in_en = english.casefold() in en_vocab
            # (text without spaces has no word list to look a translation up in)
            in_xx = (not is_unspaced(lang) and bool(words := _WORD.findall(foreign.casefold()))
                     and all(w in xx_vocab for w in words))
            if in_en or in_xx:
                pairs.add((english, foreign))
    return sorted(pairs)


def freedict_files(package_root: Path) -> tuple[Path, Path]:
    """The (.index, .dict.dz) pair of an unpacked dict-freedict-* package."""
    indexes = sorted((package_root / "usr/share/dictd").glob("*.index"))
    if len(indexes) != 1:
        raise ValueError(f"{package_root}: expected one dictd .index file, found {len(indexes)}")
    index = indexes[0]
    data = index.with_name(index.name[: -len(".index")] + ".dict.dz")
    if not data.is_file():
        data = index.with_suffix(".dict")
    return index, data


def build_dictionary(package_root: Path, lang: str, en_vocab: set[str], xx_vocab: set[str]) -> list[tuple[str, str]]:
    index, data = freedict_files(package_root)
    return dictionary_pairs(read_freedict(index, data), lang, en_vocab, xx_vocab)
