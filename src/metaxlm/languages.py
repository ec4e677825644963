"""Language codes metaxlm accepts, their names, the names benchmark files give them, and how each is written.

A language is a BCP-47 tag: its ISO 639-1 code where one exists (`de`), else its ISO 639-3 code (`grc`, `cmn`),
with a script and region subtag where the data needs one (`zh-Hant`, `sr-Latn`, `pt-BR`). The code is kept as
written (it names the user's files through `{lang}`), so it must be written canonically; anything else is an
error naming the code, where it came from and what was probably meant, so a typo ("ge" for "de") never becomes a
silently separate language.

The codes, names and scripts come from `langcodes` with `language_data` (one project: the IANA language subtag
registry, which holds every ISO 639-1, 639-3 and 639-5 code with its deprecations, and CLDR's likely scripts,
names and speaker populations). Chosen over the alternatives on what each covers and costs (measured on CPython
3.11; import: `python -X importtime`):

- `langcodes` 3.5 + `language_data` 1.4: BCP-47 tags (script, region), validity, deprecated codes and their
  replacements (`iw` -> `he`), a language's likely script (CLDR: `sr` -> Cyrl, `zh-TW` -> Hant), names and
  name -> code (`english` -> `en`). Wheels 0.2 + 5.6 MB + marisa-trie 1.5 MB (compiled, the names' trie);
  import 0.25 s, the first name 0.5 s more (both done here only when needed).
- `pycountry` 26.2: ISO 639-3 with names and the ISO 15924 script list, but no BCP-47 tags, no language ->
  script and no deprecated ISO 639-1 codes; 8.0 MB wheel, import 0.22 s.
- `iso639-lang` 2.6: ISO 639-1/2/3/5 with names and retired codes; no scripts, no BCP-47 tags; 0.3 MB, import
  0.27 s.

Only langcodes says how a language is written, which FLORES-200's file names (`code_Script`) and the script
filters below need, so it is the one library for all of it.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from metaxlm.errors import ConfigError


class LanguageCodeError(ConfigError, ValueError):
    """A language code metaxlm cannot use. A ValueError too, so that config validators report it at their key."""


def _tag(code: str):
    import langcodes

    return langcodes.Language.get(code, normalize=False)


@cache
def _registry() -> dict[str, dict[str, str]]:
    """The IANA registry's language subtags (the copy langcodes ships) -> their fields (the first Description)."""
    text = (resources.files("langcodes") / "data" / "language-subtag-registry.txt").read_text(encoding="utf-8")
    entries = {}
    for match in re.finditer(r"^Type: language\nSubtag: (\S+)\n(.*?)(?=^%%)", text, flags=re.M | re.S):
        fields: dict[str, str] = {}
        for line in match[2].replace("\n  ", " ").splitlines():
            key, _, value = line.partition(": ")
            fields.setdefault(key, value)
        entries[match[1]] = fields
    return entries


def _private_use(language: str) -> bool:
    return re.fullmatch(r"q[a-t][a-z]", language) is not None  # qaa..qtz: a label of the user's own


# --- Checking a code -----------------------------------------------------------------------------------------

def check_language(code: str, where: str = "") -> str:
    """`code` if metaxlm can use it, else a LanguageCodeError naming it, `where` it came from and what was meant."""
    problem = _problem(code)
    if problem:
        raise LanguageCodeError(f"{where}: {problem}" if where else problem)
    return code


def _problem(code: str) -> str | None:
    import langcodes

    entry = _registry().get(code)
    if entry is not None and entry.get("Scope") == "special":  # und, mul, mis, zxx
        return f"language code {code!r} ({entry['Description']}) names no language"
    try:
        tag = _tag(code)
    except langcodes.LanguageTagError:
        return _unknown(code)
    if not tag.is_valid() or tag.language is None or tag.extlangs:
        return _unknown(code)
    if tag.to_tag() != code:  # case, `_`: one spelling per language, the one that names its files
        return _unknown(code, tag.to_tag())
    entry = _registry().get(tag.language)
    if entry is None:
        return None if _private_use(tag.language) else _unknown(code)
    if "Deprecated" in entry:
        replacement = entry.get("Preferred-Value")
        return (f"language code {code!r} ({entry['Description']}) is deprecated since {entry['Deprecated'][:4]}"
                + (f" (did you mean {_with_name(replacement)}?)" if replacement else ""))
    return None


def _unknown(code: str, canonical: str | None = None) -> str:
    """The error for a code that is no valid tag, with what was probably meant."""
    import langcodes

    message = f"unknown language code {code!r}"
    if canonical is None:
        try:  # deu -> de, zh-yue -> yue, i-klingon -> tlh
            normalized = langcodes.Language.get(code).to_tag()
            canonical = normalized if normalized != code and _problem(normalized) is None else None
        except langcodes.LanguageTagError:
            pass
    if canonical is not None:
        if canonical.lower() == code.lower().replace("_", "-"):
            why = "codes are written in BCP-47's case: en, zh-Hant, pt-BR"
        elif len(_tag(canonical).language) == 2 < len(code.split("-")[0]):
            why = "a language with a two-letter ISO 639-1 code is written with it"
        else:
            why = "the registry's preferred code"
        return f"{message} (did you mean {_with_name(canonical)}? {why})"
    first = code.split("-")[0]
    if first != code and _problem(first) is None:
        return f"{message} ({first!r} is a language, but {code[len(first) + 1:]!r} is no BCP-47 script or region)"
    found: dict[str, str] = {}  # code -> how it is shown
    if len(code) > 3 and re.fullmatch(r"[^\W\d_]+(?:[ '-][^\W\d_]+)*", code):  # a name: english, Serbian
        try:
            meant = langcodes.find(code).to_tag()
            found[meant] = _with_name(meant)
        except LookupError:
            pass
    lowered = code.lower()
    if re.fullmatch(r"[a-z]{2}", lowered):
        found.update(_country_language(lowered))
    if re.fullmatch(r"[a-z]{2,3}", lowered):
        found.update({c: _with_name(c) for c in _neighbours(lowered) if c not in found})
    shown = list(found.values())[:4]
    if not shown:
        return f"{message} (not an ISO 639-1/639-3 code or BCP-47 tag; `metaxlm list languages` lists them)"
    return f"{message} (did you mean {', '.join(shown[:-1]) + ' or ' if len(shown) > 1 else ''}{shown[-1]}?)"


def _country_language(code: str) -> dict[str, str]:
    """A country's code written for its language: ge (Georgia) -> ka, jp -> ja, gr -> el."""
    from langcodes.data_dicts import LIKELY_SUBTAGS

    if f"und-{code.upper()}" not in LIKELY_SUBTAGS:
        return {}
    region = _tag(f"und-{code.upper()}")
    language = region.maximize().language
    return {language: f"{language!r} ({language_name(language)}; {code.upper()} is {region.territory_name()})"}


def _neighbours(code: str) -> list[str]:
    """Codes one edit (a letter changed, added, dropped or two swapped) from `code`, most spoken first."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    edits = {code[:i] + code[i + 1:] for i in range(len(code))}
    edits |= {code[:i] + c + code[i + 1:] for i in range(len(code)) for c in letters}
    edits |= {code[:i] + c + code[i:] for i in range(len(code) + 1) for c in letters}
    edits |= {code[:i] + code[i + 1] + code[i] + code[i + 2:] for i in range(len(code) - 1)}
    usable = [c for c in edits - {code} if c in _registry() and _problem(c) is None]
    return sorted(usable, key=lambda c: (-_tag(c).speaking_population(), len(c), c))[:3]


def _with_name(code: str) -> str:
    name = language_name(code)
    return f"{code!r} ({name})" if name else repr(code)


# --- Names and listings ----------------------------------------------------------------------------------

def language_name(code: str) -> str:
    """The English name of a language, e.g. "Croatian", "Chinese (Traditional)"; "" for a code it is not."""
    if _problem(code) is not None:
        return ""
    tag = _tag(code)
    name = tag.display_name()
    if name.startswith("Unknown language"):  # no CLDR name: the registry's, else a private-use code's
        return _registry().get(tag.language, {}).get("Description", "private use")
    return name


def iso639_1_languages() -> dict[str, str]:
    """Every two-letter (ISO 639-1) code metaxlm accepts -> its English name. The three-letter ISO 639-3 codes
    (three_letter_code_count() of them) are accepted too, but are too many to list."""
    return {code: language_name(code) for code in sorted(_registry()) if len(code) == 2 and _problem(code) is None}


def three_letter_code_count() -> int:
    """How many three-letter (ISO 639-3, and ISO 639-5 collections) codes metaxlm accepts."""
    return sum(len(code) == 3 and _problem(code) is None for code in _registry())


def split_pair(pair: str, where: str = "") -> tuple[str, str]:
    """A language pair key `src-tgt` (`en-de`, `en-zh-Hant`) -> its two codes, or a LanguageCodeError."""
    dashes = [i for i, c in enumerate(pair) if c == "-"]
    splits = [(pair[:i], pair[i + 1:]) for i in dashes
              if _problem(pair[:i]) is None and _problem(pair[i + 1:]) is None]
    if len(splits) == 1:
        return splits[0]
    if len(dashes) == 1:  # en-xx: the error about the code that is wrong
        for code in pair.split("-"):
            check_language(code, f"{where}.{pair}" if where else pair)
    prefix = f"{where}: " if where else ""
    raise LanguageCodeError(f"{prefix}key {pair!r} is not of the form src-tgt with two language codes")


# --- Benchmark file names ----------------------------------------------------------------------------------
# A language's ISO 639-3 code, except where a benchmark names a macrolanguage's files by the member language its
# sentences are in (what each benchmark's own language list says).

# LASER's Tatoeba (tatoeba.<iso>-eng.<iso>): Mandarin, Iranian Persian, Standard Latvian, Standard Malay, Swahili.
TATOEBA_MEMBERS: dict[str, str] = {"zh": "cmn", "fa": "pes", "lv": "lvs", "ms": "zsm", "sw": "swh"}
# FLORES-200 (and SIB-200, which names its folders the same: `code_Script`).
FLORES_MEMBERS: dict[str, str] = {
    "ar": "arb", "az": "azj", "din": "dik", "fa": "pes", "ff": "fuv", "ku": "kmr", "lv": "lvs", "mg": "plt",
    "mn": "khk", "ms": "zsm", "ne": "npi", "om": "gaz", "or": "ory", "ps": "pbt", "qu": "quy", "sq": "als",
    "sw": "swh", "uz": "uzn", "yi": "ydd",
}
FLORES_SCRIPTS: dict[str, str] = {"Kore": "Hang"}  # FLORES-200 labels Korean by its alphabet (kor_Hang)


def iso639_3(code: str) -> str:
    """The language's three-letter code: `de` -> deu, `zh-Hant` -> zho."""
    return _tag(check_language(code)).to_alpha3()


def tatoeba_code(code: str) -> str:
    """The code of LASER's Tatoeba files for `code`: `de` -> deu, `zh` -> cmn."""
    language = _tag(check_language(code)).language
    return TATOEBA_MEMBERS.get(language) or iso639_3(language)


def flores_code(code: str) -> str:
    """The FLORES-200 code of `code`: ISO 639-3 and script, `de` -> deu_Latn, `zh-Hant` -> zho_Hant, `sr` ->
    srp_Cyrl; a LanguageCodeError for a language whose script is not known (name it: `dee-Latn`)."""
    language = _tag(check_language(code)).language
    script = likely_script(code)
    if script is None:
        raise LanguageCodeError(f"no FLORES-200 name for language {_with_name(code)}: its script is not known; "
                                f"write it in the code, e.g. '{language}-Latn'")
    return f"{FLORES_MEMBERS.get(language) or iso639_3(language)}_{FLORES_SCRIPTS.get(script, script)}"


# --- How each language is written --------------------------------------------------------------------------

# CLDR's likely script for Ancient Greek is the Cypriot syllabary (of its oldest inscriptions); its texts are
# in Greek letters.
SCRIPT_OVERRIDES: dict[str, str] = {"grc": "Grek"}


@cache
def likely_script(code: str) -> str | None:
    """The ISO 15924 script `code` is written in: its own script subtag, else CLDR's likely script for it
    (`sr` -> Cyrl, `zh-TW` -> Hant, `ja` -> Jpan), else the registry's; None when no data says."""
    from langcodes.data_dicts import LIKELY_SUBTAGS

    tag = _tag(check_language(code))
    if tag.script:
        return tag.script
    if tag.language in SCRIPT_OVERRIDES:
        return SCRIPT_OVERRIDES[tag.language]
    known = next(t for t in tag.broader_tags() if t in LIKELY_SUBTAGS)
    if not known.startswith("und"):  # "und" is CLDR's world default (English), not data about this language
        return tag.maximize().script
    return _registry().get(tag.language, {}).get("Suppress-Script")


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
    "gurmukhi": "\u0a00-\u0a7f",
    "gujarati": "\u0a80-\u0aff",
    "oriya": "\u0b00-\u0b7f",
    "tamil": "\u0b80-\u0bff",
    "telugu": "\u0c00-\u0c7f",
    "kannada": "\u0c80-\u0cff",
    "malayalam": "\u0d00-\u0d7f",
    "sinhala": "\u0d80-\u0dff",
    "thai": "\u0e00-\u0e7f",
    "lao": "\u0e80-\u0eff",
    "tibetan": "\u0f00-\u0fff",
    "myanmar": "\u1000-\u109f",
    "khmer": "\u1780-\u17ff",
    "georgian": "\u10a0-\u10ff\u2d00-\u2d2f",
    "armenian": "\u0530-\u058f",
    "ethiopic": "\u1200-\u137f\u1380-\u139f\u2d80-\u2ddf",
    "arabic": "\u0600-\u06ff\u0750-\u077f",
    "hebrew": "\u0590-\u05ff",
    "syriac": "\u0700-\u074f",
    "thaana": "\u0780-\u07bf",
    "mongolian": "\u1800-\u18af",
}
# ISO 15924 script -> the character ranges above its texts use (Japanese mixes kanji and kana, Korean hangul and
# some hanja). A script missing here (Latn, or one without ranges yet) counts as the Latin alphabet.
SCRIPT_RANGES: dict[str, tuple[str, ...]] = {
    "Cyrl": ("cyrillic",), "Grek": ("greek",), "Hani": ("han",), "Hans": ("han",), "Hant": ("han",),
    "Jpan": ("han", "kana"), "Hira": ("kana",), "Kana": ("kana",), "Hrkt": ("kana",),
    "Kore": ("hangul", "han"), "Hang": ("hangul",), "Deva": ("devanagari",), "Beng": ("bengali",),
    "Guru": ("gurmukhi",), "Gujr": ("gujarati",), "Orya": ("oriya",), "Taml": ("tamil",), "Telu": ("telugu",),
    "Knda": ("kannada",), "Mlym": ("malayalam",), "Sinh": ("sinhala",), "Thai": ("thai",), "Laoo": ("lao",),
    "Tibt": ("tibetan",), "Mymr": ("myanmar",), "Khmr": ("khmer",), "Geor": ("georgian",),
    "Armn": ("armenian",), "Ethi": ("ethiopic",), "Arab": ("arabic",), "Hebr": ("hebrew",),
    "Syrc": ("syriac",), "Thaa": ("thaana",), "Mong": ("mongolian",),
}
# Written without spaces between words: whitespace splits no words, so word counts and word lists need another
# unit (characters) or a segmenter.
UNSPACED_SCRIPTS: frozenset[str] = frozenset({"Hani", "Hans", "Hant", "Jpan", "Thai", "Laoo", "Mymr", "Khmr"})


def own_scripts(code: str) -> tuple[str, ...]:
    """The SCRIPT_CHARACTERS scripts `code` is written in (`sr` -> cyrillic, `ja` -> han, kana); () for a
    language written in the Latin alphabet, or whose script is not known."""
    return SCRIPT_RANGES.get(likely_script(code) or "Latn", ())


def is_unspaced(code: str) -> bool:
    """Is `code` written without spaces between words (zh, ja, th, my, km, lo)?"""
    return likely_script(code) in UNSPACED_SCRIPTS


# Pre-Unicode encodings a language's older text files come in, most likely first (tried when a file is
# not valid UTF-8).
LEGACY_ENCODINGS: dict[str, tuple[str, ...]] = {
    "ru": ("koi8-r", "cp1251"), "uk": ("koi8-u", "cp1251"), "bg": ("cp1251",), "el": ("iso8859-7",),
    "zh": ("gb18030", "big5"), "ja": ("euc-jp", "shift_jis"), "ko": ("euc-kr",), "tr": ("iso8859-9",),
    "pl": ("iso8859-2",), "cs": ("iso8859-2",),
}
