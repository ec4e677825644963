"""Typed examples shared by the benchmark loaders (data.benchmarks), fine-tuning tasks and evaluation.

Every loader returns lists of these; every task consumes them. Offsets and word indices are 0-based.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from metaxlm.config.alignment_defaults import (
    DEV_FRACTION,  # the share of a gold alignment set held out as dev
)


@dataclass(frozen=True)
class ClassificationExample:
    """Single sentence (text_pair None) or sentence pair (XNLI premise/hypothesis, PAWS-X, QA-style pairs)."""

    id: str
    text: str
    label: str
    text_pair: str | None = None


@dataclass(frozen=True)
class TaggingExample:
    """Word-level tags (POS, BIO entities): one tag per whitespace/treebank word."""

    id: str
    words: tuple[str, ...]
    tags: tuple[str, ...]


@dataclass(frozen=True)
class SpanExample:
    """Character-offset spans [start, end) with a label, for scripts without spaces as well."""

    id: str
    text: str
    spans: tuple[tuple[int, int, str], ...]


@dataclass(frozen=True)
class QAExample:
    """SQuAD-style extractive QA; `answers` are (text, answer_start) pairs (several gold answers allowed)."""

    id: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...]
    title: str = ""


@dataclass(frozen=True)
class TranslationExample:
    """A sentence and its reference translation (`source` is what the model reads, whatever the file order)."""

    id: str
    source: str
    target: str


@dataclass
class AlignmentSet:
    """Sentence pairs with gold word alignments: `sure[k]` ⊆ `possible[k]`, 0-based (src_word, tgt_word) links."""

    src: list[list[str]] = field(default_factory=list)
    tgt: list[list[str]] = field(default_factory=list)
    sure: list[set[tuple[int, int]]] = field(default_factory=list)
    possible: list[set[tuple[int, int]]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.src)

    def subset(self, part: range) -> AlignmentSet:
        """The pairs at the positions of `part` (e.g. one half of `dev_test_split`)."""
        return AlignmentSet([self.src[k] for k in part], [self.tgt[k] for k in part], [self.sure[k] for k in part],
                            [self.possible[k] for k in part])

    def dev_test(self, dev_fraction: float = DEV_FRACTION) -> tuple[AlignmentSet, AlignmentSet]:
        """(dev, test) parts of the set by `dev_test_split`."""
        dev, test = dev_test_split(len(self), dev_fraction)
        return self.subset(dev), self.subset(test)


def dev_test_split(n_pairs: int, dev_fraction: float = DEV_FRACTION) -> tuple[range, range]:
    """(dev, test) positions of a gold alignment set of `n_pairs` sentence pairs, fixed by the file order alone:
    dev = the first ceil(dev_fraction · n) pairs, test = the rest, but at least one pair always stays for test (so
    a set of one pair has no dev part). Settings (layer, aligner options) are chosen on dev, AER is reported on
    test. With the default 0.3: de-en (508 pairs) 153 dev / 355 test; en-fr (447) 135 dev / 312 test. 0 = no dev
    part (everything is test; the layer is then a fixed default, not chosen)."""
    if not 0 <= dev_fraction < 1:
        raise ValueError(f"dev_fraction must be in [0, 1), got {dev_fraction}")
    if n_pairs < 0:
        raise ValueError(f"n_pairs must be >= 0, got {n_pairs}")
    # the fraction as written, in exact arithmetic: 0.55 · 100 is 55 (in floats 55.00000000000001, ceil 56)
    n_dev = min(math.ceil(Fraction(str(dev_fraction)) * n_pairs), max(n_pairs - 1, 0))
    return range(n_dev), range(n_dev, n_pairs)
