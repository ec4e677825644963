"""Language codes metaxlm accepts: ISO 639-1 where one exists, else ISO 639-3 (e.g. `grc`).

A code outside this table is rejected with an error naming it, so a typo ("ge" for "de") never becomes
a silently separate language.
"""

from __future__ import annotations

LANGUAGES: dict[str, str] = {
    "af": "Afrikaans", "ar": "Arabic", "bg": "Bulgarian", "bn": "Bengali", "ca": "Catalan", "cs": "Czech",
    "da": "Danish", "de": "German", "el": "Greek", "en": "English", "es": "Spanish", "et": "Estonian",
    "eu": "Basque", "fa": "Persian", "fi": "Finnish", "fr": "French", "grc": "Ancient Greek", "he": "Hebrew",
    "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese", "jv": "Javanese",
    "ka": "Georgian", "kk": "Kazakh", "ko": "Korean", "ml": "Malayalam", "mr": "Marathi", "ms": "Malay",
    "my": "Burmese", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian",
    "sv": "Swedish", "sw": "Swahili", "ta": "Tamil", "te": "Telugu", "th": "Thai", "tl": "Tagalog",
    "tr": "Turkish", "uk": "Ukrainian", "ur": "Urdu", "vi": "Vietnamese", "yo": "Yoruba", "zh": "Chinese",
}


def check_language(code: str, where: str = "") -> str:
    """Return `code` if known, else raise ValueError naming it (and `where` it came from)."""
    if code not in LANGUAGES:
        prefix = f"{where}: " if where else ""
        raise ValueError(f"{prefix}unknown language code {code!r} (known: {', '.join(sorted(LANGUAGES))})")
    return code


# The codes benchmark files use: Tatoeba (LASER) names pairs by ISO 639-3 / macrolanguage members
# (cmn for Mandarin, pes for Persian, swh for Swahili, zsm for Malay), SIB-200 by FLORES code_script.
TATOEBA: dict[str, str] = {
    "af": "afr", "ar": "ara", "bg": "bul", "bn": "ben", "ca": "cat", "cs": "ces", "da": "dan", "de": "deu",
    "el": "ell", "es": "spa", "et": "est", "eu": "eus", "fa": "pes", "fi": "fin", "fr": "fra", "he": "heb",
    "hi": "hin", "hu": "hun", "id": "ind", "it": "ita", "ja": "jpn", "jv": "jav", "ka": "kat", "kk": "kaz",
    "ko": "kor", "ml": "mal", "mr": "mar", "ms": "zsm", "nl": "nld", "pl": "pol", "pt": "por", "ro": "ron",
    "ru": "rus", "sv": "swe", "sw": "swh", "ta": "tam", "te": "tel", "th": "tha", "tl": "tgl", "tr": "tur",
    "uk": "ukr", "ur": "urd", "vi": "vie", "zh": "cmn",
}
FLORES: dict[str, str] = {
    "af": "afr_Latn", "ar": "arb_Arab", "bg": "bul_Cyrl", "bn": "ben_Beng", "ca": "cat_Latn", "cs": "ces_Latn",
    "de": "deu_Latn", "el": "ell_Grek", "en": "eng_Latn", "es": "spa_Latn", "et": "est_Latn", "eu": "eus_Latn",
    "fa": "pes_Arab", "fi": "fin_Latn", "fr": "fra_Latn", "he": "heb_Hebr", "hi": "hin_Deva", "hu": "hun_Latn",
    "id": "ind_Latn", "it": "ita_Latn", "ja": "jpn_Jpan", "jv": "jav_Latn", "ka": "kat_Geor", "kk": "kaz_Cyrl",
    "ko": "kor_Hang", "ml": "mal_Mlym", "mr": "mar_Deva", "my": "mya_Mymr", "nl": "nld_Latn", "pl": "pol_Latn",
    "pt": "por_Latn", "ro": "ron_Latn", "ru": "rus_Cyrl", "sv": "swe_Latn", "sw": "swh_Latn", "ta": "tam_Taml",
    "te": "tel_Telu", "th": "tha_Thai", "tl": "tgl_Latn", "tr": "tur_Latn", "uk": "ukr_Cyrl", "ur": "urd_Arab",
    "vi": "vie_Latn", "yo": "yor_Latn", "zh": "zho_Hans",
}


def code_in(table: dict[str, str], code: str, what: str) -> str:
    """`code`'s name in a benchmark's naming scheme, or a clear error."""
    if code not in table:
        raise ValueError(f"no {what} name for language {code!r} (known: {', '.join(sorted(table))})")
    return table[code]


# --- How each language is written --------------------------------------------------------------------------
# Character ranges of the non-Latin scripts, to measure how much of a text is in a language's own script
# (an "untranslated" line in a translation is mostly Latin letters).
SCRIPT_CHARACTERS: dict[str, str] = {
    "cyrillic": "\u0400-\u04ff\u0500-\u052f",
    "greek": "\u0370-\u03ff\u1f00-\u1fff",
    "han": "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff",
    "kana": "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff",
    "hangul": "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af",
    "devanagari": "\u0900-\u097f",
    "bengali": "\u0980-\u09ff",
    "tamil": "\u0b80-\u0bff",
    "telugu": "\u0c00-\u0c7f",
    "malayalam": "\u0d00-\u0d7f",
    "thai": "\u0e00-\u0e7f",
    "myanmar": "\u1000-\u109f",
    "georgian": "\u10a0-\u10ff\u2d00-\u2d2f",
    "arabic": "\u0600-\u06ff\u0750-\u077f",
    "hebrew": "\u0590-\u05ff",
}
# The scripts of every language above not written in Latin letters (Japanese mixes kanji and kana,
# Korean hangul and some hanja); a language missing here is written in the Latin alphabet.
NON_LATIN_SCRIPTS: dict[str, tuple[str, ...]] = {
    "ar": ("arabic",), "bg": ("cyrillic",), "bn": ("bengali",), "el": ("greek",), "fa": ("arabic",),
    "grc": ("greek",), "he": ("hebrew",), "hi": ("devanagari",), "ja": ("han", "kana"), "ka": ("georgian",),
    "kk": ("cyrillic",), "ko": ("hangul", "han"), "ml": ("malayalam",), "mr": ("devanagari",),
    "my": ("myanmar",), "ru": ("cyrillic",), "ta": ("tamil",), "te": ("telugu",), "th": ("thai",),
    "uk": ("cyrillic",), "ur": ("arabic",), "zh": ("han",),
}
# Written without spaces between words: whitespace splits no words, so word counts and word lists
# need another unit (characters) or a segmenter.
UNSPACED: frozenset[str] = frozenset({"zh", "ja", "th", "my"})
# Pre-Unicode encodings a language's older text files come in, most likely first (tried when a file is
# not valid UTF-8).
LEGACY_ENCODINGS: dict[str, tuple[str, ...]] = {
    "ru": ("koi8-r", "cp1251"), "uk": ("koi8-u", "cp1251"), "bg": ("cp1251",), "el": ("iso8859-7",),
    "zh": ("gb18030", "big5"), "ja": ("euc-jp", "shift_jis"), "ko": ("euc-kr",), "tr": ("iso8859-9",),
    "pl": ("iso8859-2",), "cs": ("iso8859-2",),
}
