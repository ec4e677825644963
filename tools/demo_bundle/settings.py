"""The demo bundle's settings and contents, shared by the builder (`build`) and the data card (`card`): languages,
the page split, size caps, and the `Bundle` that the builder fills and the card describes."""

from __future__ import annotations

import lzma
from dataclasses import dataclass, field

from tools.demo_bundle import alignments as al

# Bundle code -> Debian help package suffix. en is the pivot; every other language is paired with it.
HELP_LANGS = {"en": "en-us", "de": "de", "fr": "fr", "es": "es", "ru": "ru", "el": "el", "zh": "zh-cn",
              "ja": "ja", "tr": "tr", "vi": "vi", "ko": "ko", "hi": "hi"}
LANGS = list(HELP_LANGS)
FOREIGN = LANGS[1:]
BIBLE_ALIGNMENTS = ("bible-alignments", "0.4.2")

# Page split, stratified by module directory (10% of each module's pages to test, 10% to dev).
DEV_FRACTION = 0.10
TEST_FRACTION = 0.10
# Size caps that keep the bundle under 15 MB (xz); samples are the first N by sha256 of the line.
# Monolingual text keeps its natural, unequal sizes (what alpha-sampling is for); parallel is capped.
MAX_MONO_LINES = None
MAX_PARALLEL_PAIRS = 13_000
MAX_MODULE_TRAIN = 10_000
MAX_SPANS_TRAIN = 10_000
RETRIEVAL_SIZE = 1_000
RETRIEVAL_MIN_WORDS = 3  # retrieval queries need some content; 2-word headings are near-duplicates
ALIGNMENT_VERSES = 500
MAX_FILE_BYTES = 8_000_000
MAX_TOTAL_BYTES = 15_000_000
XZ_PRESET = 9 | lzma.PRESET_EXTREME


@dataclass
class Bundle:
    """Everything that goes into the bundle, as plain lists (files are written from these)."""

    split: dict[str, str] = field(default_factory=dict)  # page -> train/dev/test
    mono: dict[str, list[str]] = field(default_factory=dict)
    parallel: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    retrieval: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    module: dict[str, list[dict]] = field(default_factory=dict)  # "train", "dev", "test.<lang>"
    spans: dict[str, list[dict]] = field(default_factory=dict)
    spans_dropped: dict[str, dict[str, int]] = field(default_factory=dict)
    dicts: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    verses: list[al.Verse] = field(default_factory=list)
    available: dict[str, dict[str, int]] = field(default_factory=dict)  # before caps, for the card
