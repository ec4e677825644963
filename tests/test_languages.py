"""The writing-system facts of metaxlm.languages, checked against Unicode's own character names."""

from __future__ import annotations

import codecs
import re
import unicodedata

import pytest

from metaxlm.languages import LANGUAGES, LEGACY_ENCODINGS, NON_LATIN_SCRIPTS, SCRIPT_CHARACTERS, UNSPACED

# A word the Unicode name of each script's letters contains (the Greek block also holds Coptic).
NAME_WORDS = {
    "cyrillic": ("CYRILLIC",), "greek": ("GREEK", "COPTIC"), "han": ("CJK",), "kana": ("HIRAGANA", "KATAKANA"),
    "hangul": ("HANGUL",), "devanagari": ("DEVANAGARI",), "bengali": ("BENGALI",), "tamil": ("TAMIL",),
    "telugu": ("TELUGU",), "malayalam": ("MALAYALAM",), "thai": ("THAI",), "myanmar": ("MYANMAR",),
    "georgian": ("GEORGIAN",), "arabic": ("ARABIC",), "hebrew": ("HEBREW",),
}
GREETINGS = {
    "ar": "مرحبا", "bg": "Здравей", "bn": "নমস্কার", "el": "Καλημέρα", "fa": "سلام", "grc": "ἀρχὴ λόγος",
    "he": "שלום", "hi": "नमस्ते", "ja": "こんにちは世界カタカナ", "ka": "გამარჯობა", "kk": "Сәлем", "ko": "안녕하세요",
    "ml": "നമസ്കാരം", "mr": "नमस्कार", "my": "မင်္ဂလာပါ", "ru": "Привет", "ta": "வணக்கம்", "te": "నమస్కారం",
    "th": "สวัสดี", "uk": "Привіт", "ur": "سلام", "zh": "你好世界",
}


def _letters(ranges: str) -> list[str]:
    chars = []
    for start, end in re.findall(r"(.)-(.)", ranges, flags=re.S):
        chars += [chr(c) for c in range(ord(start), ord(end) + 1) if unicodedata.category(chr(c)).startswith("L")]
    return chars


@pytest.mark.parametrize("script", sorted(SCRIPT_CHARACTERS))
def test_script_ranges_hold_only_that_scripts_letters(script):
    letters = _letters(SCRIPT_CHARACTERS[script])
    assert letters
    wrong = [c for c in letters if not any(word in unicodedata.name(c, "") for word in NAME_WORDS[script])]
    assert not wrong, f"{script}: {[unicodedata.name(c, hex(ord(c))) for c in wrong[:5]]}"


@pytest.mark.parametrize("lang", sorted(NON_LATIN_SCRIPTS))
def test_every_letter_of_a_word_is_in_its_languages_scripts(lang):
    pattern = re.compile("[" + "".join(SCRIPT_CHARACTERS[s] for s in NON_LATIN_SCRIPTS[lang]) + "]")
    letters = [c for c in GREETINGS[lang] if c.isalpha()]
    assert letters and all(pattern.fullmatch(c) for c in letters), lang


def test_codes_are_known_languages_and_encodings_exist():
    assert set(GREETINGS) == set(NON_LATIN_SCRIPTS)
    assert set(NON_LATIN_SCRIPTS) | UNSPACED | set(LEGACY_ENCODINGS) <= set(LANGUAGES)
    assert UNSPACED <= set(NON_LATIN_SCRIPTS)  # every unspaced language here has a script of its own
    for encodings in LEGACY_ENCODINGS.values():
        for name in encodings:
            codecs.lookup(name)
