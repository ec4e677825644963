"""Bilingual dictionaries for vocabulary matching: find the en-<lang> files of a directory and read them
into one foreign word -> English translations table."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from metaxlm.errors import DataError

__all__ = ["TranslationTable", "dictionaries_in", "load_dictionaries"]


def dictionaries_in(directory: str | Path, langs: Iterable[str] | None = None) -> dict[str, Path]:
    """{lang: path} for the `en-<lang>.txt[.xz|.gz]` dictionaries in a directory (e.g. data/demo/dict)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DataError(directory, None, "no such dictionary directory")
    found: dict[str, Path] = {}
    for p in sorted(directory.glob("en-*.txt*")):
        lang = p.name.split(".", 1)[0].removeprefix("en-")
        found.setdefault(lang, p)
    if langs is not None:
        missing = [lang for lang in langs if lang not in found]
        if missing:
            raise DataError(directory, None, f"no en-<lang> dictionary for {missing}")
        found = {lang: found[lang] for lang in langs}
    return found


def load_dictionaries(dictionaries: Mapping[str, str | Path | Mapping[str, list[str]]],
                      normalize: Callable[[str], str] = lambda s: s) -> dict[str, list[str]]:
    """Foreign word (normalized) -> its English translations, over all languages.

    A value is either the path of an en-xx dictionary (lines "english<TAB>foreign", as read by
    `read_muse_dict`; inverted here) or an in-memory {foreign: [english, ...]} mapping. Multi-word
    foreign entries are dropped (a piece is never a phrase); translation order is kept, duplicates dropped.
    """
    from metaxlm.data.readers import read_muse_dict

    out: dict[str, list[str]] = {}

    def add(foreign: str, english: str) -> None:
        key = normalize(unicodedata.normalize("NFKC", foreign)).strip()
        english = english.strip()
        if not key or not english or any(c.isspace() for c in key):
            return
        lst = out.setdefault(key, [])
        if english not in lst:
            lst.append(english)

    for _lang, value in dictionaries.items():
        if isinstance(value, Mapping):
            for foreign, translations in value.items():
                for english in ([translations] if isinstance(translations, str) else translations):
                    add(foreign, english)
        else:
            for english, foreign in read_muse_dict(value):
                add(foreign, english)
    return out


class TranslationTable:
    """Foreign word -> English translations, looked up as is, then (with `ignore_case`) case-insensitively.

    MUSE dictionaries are lower-case, while a cased source keeps "Fenster" as is: without the second look-up
    every capitalised piece (every German noun, every sentence-initial word) would miss its entry. An entry
    spelled like the piece wins ("Laden" shop, not "laden" load); otherwise the translations of every entry
    with the same lower case are taken, in dictionary order. For an uncased source, whose normalizer has
    already lower-cased both sides, the second look-up could add nothing and is not made.
    """

    def __init__(self, translations: Mapping[str, list[str]], *, ignore_case: bool):
        self.translations = dict(translations)
        self.by_lower: dict[str, list[str]] = {}
        if ignore_case:
            for key, english in self.translations.items():
                merged = self.by_lower.setdefault(key.lower(), [])
                merged.extend(e for e in english if e not in merged)

    def __bool__(self) -> bool:
        return bool(self.translations)

    def get(self, word: str) -> list[str]:
        """The English translations of a (normalized) foreign word; [] when it has none."""
        found = self.translations.get(word)
        if found is not None:
            return found
        return self.by_lower.get(word.lower(), [])
