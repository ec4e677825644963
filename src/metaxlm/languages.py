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
