"""Typed examples shared by the benchmark loaders (data.benchmarks), fine-tuning tasks and evaluation.

Every loader returns lists of these; every task consumes them. Offsets and word indices are 0-based.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
