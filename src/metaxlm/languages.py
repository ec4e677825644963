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
