"""metaxlm.languages: the codes it accepts (any ISO 639-1/639-3 code, BCP-47 tags with a script or region), the
errors for the others, the benchmark file names and scripts derived from langcodes, checked against the hand
tables they replaced and against Unicode's own character names."""

from __future__ import annotations

import codecs
import re
import unicodedata

import pytest

from metaxlm.errors import ConfigError
from metaxlm.languages import (
    LEGACY_ENCODINGS,
    SCRIPT_CHARACTERS,
    SCRIPT_RANGES,
    LanguageCodeError,
    check_language,
    flores_code,
    is_unspaced,
    iso639_1_languages,
    language_name,
    own_scripts,
    split_pair,
    tatoeba_code,
    three_letter_code_count,
)

# --- The hand tables metaxlm had before the codes came from langcodes: the reference the derived ones must equal

OLD_LANGUAGES = {
    "af": "Afrikaans", "ar": "Arabic", "bg": "Bulgarian", "bn": "Bengali", "ca": "Catalan", "cs": "Czech",
    "da": "Danish", "de": "German", "el": "Greek", "en": "English", "es": "Spanish", "et": "Estonian",
    "eu": "Basque", "fa": "Persian", "fi": "Finnish", "fr": "French", "grc": "Ancient Greek", "he": "Hebrew",
    "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese", "jv": "Javanese",
    "ka": "Georgian", "kk": "Kazakh", "ko": "Korean", "ml": "Malayalam", "mr": "Marathi", "ms": "Malay",
    "my": "Burmese", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian",
    "sv": "Swedish", "sw": "Swahili", "ta": "Tamil", "te": "Telugu", "th": "Thai", "tl": "Tagalog",
    "tr": "Turkish", "uk": "Ukrainian", "ur": "Urdu", "vi": "Vietnamese", "yo": "Yoruba", "zh": "Chinese",
}
OLD_TATOEBA = {
    "af": "afr", "ar": "ara", "bg": "bul", "bn": "ben", "ca": "cat", "cs": "ces", "da": "dan", "de": "deu",
    "el": "ell", "es": "spa", "et": "est", "eu": "eus", "fa": "pes", "fi": "fin", "fr": "fra", "he": "heb",
    "hi": "hin", "hu": "hun", "id": "ind", "it": "ita", "ja": "jpn", "jv": "jav", "ka": "kat", "kk": "kaz",
    "ko": "kor", "ml": "mal", "mr": "mar", "ms": "zsm", "nl": "nld", "pl": "pol", "pt": "por", "ro": "ron",
    "ru": "rus", "sv": "swe", "sw": "swh", "ta": "tam", "te": "tel", "th": "tha", "tl": "tgl", "tr": "tur",
    "uk": "ukr", "ur": "urd", "vi": "vie", "zh": "cmn",
}
OLD_FLORES = {
    "af": "afr_Latn", "ar": "arb_Arab", "bg": "bul_Cyrl", "bn": "ben_Beng", "ca": "cat_Latn", "cs": "ces_Latn",
    "de": "deu_Latn", "el": "ell_Grek", "en": "eng_Latn", "es": "spa_Latn", "et": "est_Latn", "eu": "eus_Latn",
    "fa": "pes_Arab", "fi": "fin_Latn", "fr": "fra_Latn", "he": "heb_Hebr", "hi": "hin_Deva", "hu": "hun_Latn",
    "id": "ind_Latn", "it": "ita_Latn", "ja": "jpn_Jpan", "jv": "jav_Latn", "ka": "kat_Geor", "kk": "kaz_Cyrl",
    "ko": "kor_Hang", "ml": "mal_Mlym", "mr": "mar_Deva", "my": "mya_Mymr", "nl": "nld_Latn", "pl": "pol_Latn",
    "pt": "por_Latn", "ro": "ron_Latn", "ru": "rus_Cyrl", "sv": "swe_Latn", "sw": "swh_Latn", "ta": "tam_Taml",
    "te": "tel_Telu", "th": "tha_Thai", "tl": "tgl_Latn", "tr": "tur_Latn", "uk": "ukr_Cyrl", "ur": "urd_Arab",
    "vi": "vie_Latn", "yo": "yor_Latn", "zh": "zho_Hans",
}
OLD_NON_LATIN_SCRIPTS = {
    "ar": ("arabic",), "bg": ("cyrillic",), "bn": ("bengali",), "el": ("greek",), "fa": ("arabic",),
    "grc": ("greek",), "he": ("hebrew",), "hi": ("devanagari",), "ja": ("han", "kana"), "ka": ("georgian",),
    "kk": ("cyrillic",), "ko": ("hangul", "han"), "ml": ("malayalam",), "mr": ("devanagari",),
    "my": ("myanmar",), "ru": ("cyrillic",), "ta": ("tamil",), "te": ("telugu",), "th": ("thai",),
    "uk": ("cyrillic",), "ur": ("arabic",), "zh": ("han",),
}
OLD_UNSPACED = {"zh", "ja", "th", "my"}


@pytest.mark.parametrize("code", sorted(OLD_LANGUAGES))
def test_the_derived_tables_equal_the_old_hand_tables_on_its_48_codes(code):
    assert check_language(code) == code
    # CLDR calls Bengali by its own name for itself, Bangla
    assert language_name(code) == {"bn": "Bangla"}.get(code, OLD_LANGUAGES[code])
    # the old tables had no Tatoeba name for the pivot and the languages LASER's Tatoeba lacks, and fell back to
    # the bare code for `{flores}`: now the ISO 639-3 code (and its script), as for any other language
    assert tatoeba_code(code) == OLD_TATOEBA.get(code, {"en": "eng", "grc": "grc", "my": "mya", "yo": "yor"}.get(code))
    assert flores_code(code) == OLD_FLORES.get(code, {"da": "dan_Latn", "grc": "grc_Grek", "ms": "zsm_Latn"}.get(code))
    assert own_scripts(code) == OLD_NON_LATIN_SCRIPTS.get(code, ())
    assert is_unspaced(code) == (code in OLD_UNSPACED)


# --- Codes beyond the old 48 ------------------------------------------------------------------------------

@pytest.mark.parametrize(("code", "name"), [("hr", "Croatian"), ("zh-Hant", "Chinese (Traditional)"),
                                             ("sr-Latn", "Serbian (Latin)"), ("grc", "Ancient Greek"),
                                             ("cmn", "Mandarin Chinese"), ("pt-BR", "Portuguese (Brazil)")])
def test_any_iso_639_code_and_tags_with_a_script_or_region_are_accepted_as_written(code, name):
    assert check_language(code, "data.languages") == code
    assert language_name(code) == name


def test_a_run_config_takes_a_language_outside_the_old_table(tmp_path):
    from metaxlm.config import load_config

    config = tmp_path / "c.yaml"
    config.write_text("output_dir: runs/x\ndata:\n  languages: [en, de]\n  mono: corpus/{lang}.txt\n"
                      "  parallel: corpus/en-{lang}.tsv\n")
    cfg = load_config(config, ["data.languages=[en,hr,zh-Hant]"])
    assert cfg.data.languages == ["en", "hr", "zh-Hant"]
    assert cfg.data.mono_corpora()["zh-Hant"].path == "corpus/zh-Hant.txt"  # {lang} is the code as written
    assert list(cfg.data.parallel_corpora()) == ["en-hr", "en-zh-Hant"]
    with pytest.raises(ConfigError, match=r"data.languages.*unknown language code 'ge' \(did you mean 'ka'"):
        load_config(config, ["data.languages=[en,ge]"])


def test_a_pair_key_splits_into_its_two_tags():
    assert split_pair("en-de") == ("en", "de")
    assert split_pair("en-zh-Hant") == ("en", "zh-Hant")
    assert split_pair("sr-Latn-hr") == ("sr-Latn", "hr")
    with pytest.raises(LanguageCodeError, match=r"^data.parallel.en-xx: unknown language code 'xx'"):
        split_pair("en-xx", "data.parallel")
    with pytest.raises(LanguageCodeError, match="'en-de-fr' is not of the form src-tgt"):
        split_pair("en-de-fr", "data.parallel")


@pytest.mark.parametrize(("code", "meant"), [
    ("ge", "'de' (German)"),  # a typo
    ("ge", "'ka' (Georgian; GE is Georgia)"),  # a country's code for its language
    ("jp", "'ja' (Japanese; JP is Japan)"),
    ("english", "'en' (English)"),  # a name for a code
    ("Croatian", "'hr' (Croatian)"),
    ("deu", "'de' (German)? a language with a two-letter ISO 639-1 code is written with it"),
    ("EN", "'en' (English)? codes are written in BCP-47's case"),
    ("zh-hant", "'zh-Hant' (Chinese (Traditional))?"),
    ("iw", "deprecated since 1989 (did you mean 'he' (Hebrew)?)"),  # a deprecated code's replacement
])
def test_a_code_that_is_no_language_is_a_one_line_error_naming_it_with_what_was_meant(code, meant):
    with pytest.raises(LanguageCodeError) as err:
        check_language(code, "data.languages")
    message = str(err.value)
    assert message.startswith("data.languages: ") and repr(code) in message and meant in message, message
    assert "\n" not in message and isinstance(err.value, ConfigError) and isinstance(err.value, ValueError)


def test_codes_that_name_no_language_are_errors():
    for code in ("und", "zxx", "en-Xyzw", "", "e"):
        with pytest.raises(LanguageCodeError, match=re.escape(repr(code))):
            check_language(code)


def test_finetune_languages_takes_a_language_outside_the_old_table(tmp_path, monkeypatch):
    """`--languages hr` passes the language check (the task's languages extended by an override to have it)."""
    import metaxlm.finetune.runner as runner
    from metaxlm.cli import main

    seen = {}

    class Called(Exception):
        pass

    def fake_run_task(spec, model_dir, out_dir, **kwargs):
        seen.update(languages=kwargs["languages"])
        raise Called

    monkeypatch.setattr(runner, "run_task", fake_run_task)
    with pytest.raises(Called):
        main(["finetune", "demo_module", "--model", str(tmp_path), "--out", str(tmp_path / "out"),
              "languages=[en,de,hr]", "--languages", "hr"])
    assert seen["languages"] == ["hr"]


# --- Benchmark file names ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("code", "flores", "tatoeba"), [
    ("hr", "hrv_Latn", "hrv"), ("sr", "srp_Cyrl", "srp"), ("sr-Latn", "srp_Latn", "srp"),
    ("zh-Hant", "zho_Hant", "cmn"), ("zh-TW", "zho_Hant", "cmn"), ("mn", "khk_Cyrl", "mon"),
    ("am", "amh_Ethi", "amh"), ("lv", "lvs_Latn", "lvs"), ("pa-PK", "pan_Arab", "pan"), ("yue", "yue_Hant", "yue"),
])
def test_benchmark_names_of_new_languages_come_from_their_iso_639_3_code_and_likely_script(code, flores, tatoeba):
    assert (flores_code(code), tatoeba_code(code)) == (flores, tatoeba)


def test_a_language_without_a_known_script_has_no_flores_name_until_its_code_says_it(tmp_path):
    from metaxlm.finetune.spec import load_task_spec

    assert check_language("dee") == "dee"  # Dewoin: a valid ISO 639-3 code, but no data says its script
    with pytest.raises(LanguageCodeError, match=r"^no FLORES-200 name for language 'dee' \(Dewoin\): its script is "
                                                r"not known; write it in the code, e.g. 'dee-Latn'$"):
        flores_code("dee")
    assert flores_code("dee-Latn") == "dee_Latn"
    spec = load_task_spec("demo_module", ["languages=[en,dee]", f"test={tmp_path}/{{flores}}.tsv"])
    with pytest.raises(ConfigError, match="no FLORES-200 name for language 'dee'"):
        spec.path("test", "dee")
    assert spec.path("test", "en") == tmp_path / "eng_Latn.tsv"
    plain = load_task_spec("demo_module", ["languages=[en,dee]", f"test={tmp_path}/{{lang}}.tsv"])
    assert plain.path("test", "dee") == tmp_path / "dee.tsv"  # a template without {flores} needs no script


# --- What metaxlm list languages shows ---------------------------------------------------------------------

def test_the_listing_has_every_two_letter_code_with_its_name_and_counts_the_three_letter_ones():
    listing = iso639_1_languages()
    assert listing["hr"] == "Croatian" and listing["de"] == "German"
    assert set(OLD_LANGUAGES) - {"grc"} <= set(listing) and 180 <= len(listing) <= 190
    assert "iw" not in listing and "in" not in listing  # deprecated
    assert three_letter_code_count() > 7000


# --- How each language is written --------------------------------------------------------------------------

# A word the Unicode name of each script's letters contains (the Greek block also holds Coptic).
NAME_WORDS = {
    "cyrillic": ("CYRILLIC",), "greek": ("GREEK", "COPTIC"), "han": ("CJK",), "kana": ("HIRAGANA", "KATAKANA"),
    "hangul": ("HANGUL",), "devanagari": ("DEVANAGARI",), "bengali": ("BENGALI",), "gurmukhi": ("GURMUKHI",),
    "gujarati": ("GUJARATI",), "oriya": ("ORIYA",), "tamil": ("TAMIL",), "telugu": ("TELUGU",),
    "kannada": ("KANNADA",), "malayalam": ("MALAYALAM",), "sinhala": ("SINHALA",), "thai": ("THAI",),
    "lao": ("LAO",), "tibetan": ("TIBETAN",), "myanmar": ("MYANMAR",), "khmer": ("KHMER",),
    "georgian": ("GEORGIAN",), "armenian": ("ARMENIAN",), "ethiopic": ("ETHIOPIC",), "arabic": ("ARABIC",),
    "hebrew": ("HEBREW",), "syriac": ("SYRIAC",), "thaana": ("THAANA",), "mongolian": ("MONGOLIAN",),
}
GREETINGS = {
    "ar": "مرحبا", "bg": "Здравей", "bn": "নমস্কার", "el": "Καλημέρα", "fa": "سلام", "grc": "ἀρχὴ λόγος",
    "he": "שלום", "hi": "नमस्ते", "ja": "こんにちは世界カタカナ", "ka": "გამარჯობა", "kk": "Сәлем", "ko": "안녕하세요",
    "ml": "നമസ്കാരം", "mr": "नमस्कार", "my": "မင်္ဂလာပါ", "ru": "Привет", "ta": "வணக்கம்", "te": "నమస్కారం",
    "th": "สวัสดี", "uk": "Привіт", "ur": "سلام", "zh": "你好世界",
    # languages the old table did not have: their script comes from CLDR's likely script
    "sr": "Здраво", "mn": "Сайн байна уу", "am": "ሰላም", "hy": "Բարև", "pa": "ਸਤ ਸ੍ਰੀ ਅਕਾਲ", "gu": "નમસ્તે",
    "km": "សួស្តី", "lo": "ສະບາຍດີ", "si": "ආයුබෝවන්", "kn": "ನಮಸ್ಕಾರ", "or": "ନମସ୍କାର", "bo": "བཀྲ་ཤིས",
    "dv": "ސަލާމް", "syr": "ܫܠܡܐ", "mn-Mong": "ᠰᠠᠶᠢᠨ", "zh-Hant": "你好世界",
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


@pytest.mark.parametrize("lang", sorted(GREETINGS))
def test_every_letter_of_a_word_is_in_its_languages_scripts(lang):
    assert own_scripts(lang), lang
    pattern = re.compile("[" + "".join(SCRIPT_CHARACTERS[s] for s in own_scripts(lang)) + "]")
    letters = [c for c in GREETINGS[lang] if c.isalpha()]
    assert letters and all(pattern.fullmatch(c) for c in letters), lang


def test_latin_alphabet_languages_have_no_script_of_their_own():
    for code in ("hr", "sr-Latn", "en", "tl", "dee", "vi"):
        assert own_scripts(code) == () and not is_unspaced(code), code
    assert is_unspaced("zh-Hant") and is_unspaced("km") and not is_unspaced("ko")


def test_every_script_has_its_ranges_and_legacy_encodings_exist():
    assert {s for scripts in SCRIPT_RANGES.values() for s in scripts} == set(SCRIPT_CHARACTERS)
    for code, encodings in LEGACY_ENCODINGS.items():
        check_language(code)
        for name in encodings:
            codecs.lookup(name)
