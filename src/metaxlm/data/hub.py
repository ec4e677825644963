"""Benchmark data from the Hugging Face Hub: a task path (train / dev / test) or a Tatoeba retrieval path may be
`hub:NAME[:CONFIG][@REVISION]` instead of a file, read with `datasets.load_dataset` and converted into the same
examples the format's file loader yields (data.benchmarks), so a task runs the same on either.

The split comes from the field the path is in: train → train, dev → validation, test → test (XQuAD and Tatoeba on
the Hub have only a validation split: their test is it). One converter per benchmark format, each reading the
columns of the Hub datasets docs/benchmark-data.md names (ClassLabel integers become their names, as the files
write them); a dataset without those columns, or an unlabelled item, is a DataError naming the dataset, its split
and the row. `@REVISION` pins a commit or branch; datasets >= 4 runs no loading scripts, so a script-only dataset
(UD's universal_dependencies) is read from the Hub's parquet export, `@refs/convert/parquet`.

Needs network the first time (datasets caches what it downloaded); hub: corpora (data.corpus) parse the same
reference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from metaxlm.data.benchmark_rules import (
    BIO_TAG,
    HEADER_ALIASES,
    PAWSX_LABELS,
    UNLABELLED,
    XNLI_LABELS,
    checked_answer,
    finished_questions,
)
from metaxlm.data.examples import ClassificationExample, QAExample, TaggingExample
from metaxlm.errors import DataError
from metaxlm.registry import Registry

HUB = "hub:"
# the Hub's split for each task field (train, dev, test)
SPLITS = {"train": "train", "dev": "validation", "test": "test"}

Converter = Callable[..., object]
HUB_CONVERTERS: Registry[Converter] = Registry("hub converter")


class HubRef(NamedTuple):
    name: str
    config: str | None
    revision: str | None

    def __str__(self) -> str:
        return HUB + self.name + (f":{self.config}" if self.config else "") + (f"@{self.revision}" if self.revision
                                                                              else "")


def is_hub(path: object) -> bool:
    return str(path).startswith(HUB)


def parse_hub(ref: str) -> HubRef:
    """`hub:NAME[:CONFIG][@REVISION]` → its parts (a dataset name holds neither ':' nor '@')."""
    body, _, revision = str(ref).removeprefix(HUB).partition("@")
    name, _, config = body.partition(":")
    if not name:
        raise DataError(ref, None, "expected hub:NAME[:CONFIG][@REVISION], e.g. hub:facebook/xnli:de")
    return HubRef(name, config or None, revision or None)


def register_hub_converter(fmt: str, *, splits: dict[str, str] | None = None) -> Callable[[Converter], Converter]:
    """Register the converter `(dataset, where, *, lang, split, **options)` of benchmark format `fmt`; `splits`
    overrides SPLITS for the Hub datasets of that format."""
    def add(converter: Converter) -> Converter:
        converter.splits = {**SPLITS, **(splits or {})}
        return HUB_CONVERTERS.register(fmt)(converter)
    return add


def load_split(ref: HubRef, split: str):
    """One split of a Hub dataset (datasets.load_dataset, cached after the first download); what the library
    refuses (no such dataset, config or split, no network, a loading script) is one DataError line."""
    import datasets

    try:
        return datasets.load_dataset(ref.name, ref.config, split=split, revision=ref.revision)
    except (ValueError, FileNotFoundError, ConnectionError, RuntimeError) as err:
        message = " ".join(str(err).split()) or type(err).__name__
        if "scripts are no longer supported" in message:
            message += " (read the Hub's parquet export instead: add @refs/convert/parquet to the hub: path)"
        raise DataError(ref, None, f"cannot load split {split!r}: {message}") from None


def load_hub_examples(fmt: str, ref: str, *, lang: str | None = None, split: str = "test", **options):
    """The examples of `fmt` (a benchmark format with a hub converter) in the Hub dataset `ref`'s split for the
    task field `split` (train, dev or test)."""
    converter = HUB_CONVERTERS.get(fmt, where=f"{ref}: format")
    parsed = parse_hub(ref)
    hub_split = converter.splits.get(split, split)
    dataset = load_split(parsed, hub_split)
    return converter(dataset, f"{parsed} ({hub_split} split)", lang=lang, split=split, **options)


# --- columns -------------------------------------------------------------------------------------------------

def _column(dataset, where: str, *names: str) -> str:
    """The first of `names` the dataset has, else a DataError listing what it has."""
    found = next((name for name in names if name in dataset.column_names), None)
    if found is None:
        raise DataError(where, None, f"no column {' or '.join(repr(n) for n in names)} (has: "
                                     f"{', '.join(dataset.column_names)}): not the layout this format reads "
                                     f"(docs/benchmark-data.md)")
    return found


def _names(dataset, column: str) -> Callable[[Any], str | None]:
    """Value → label name: a ClassLabel's (or a list of ClassLabels') integer becomes its name, -1 (the Hub's
    "no label") None; any other value is its text."""
    import datasets

    feature = dataset.features[column]
    feature = getattr(feature, "feature", feature)  # List(ClassLabel) / Sequence(ClassLabel)
    if isinstance(feature, datasets.ClassLabel):
        return lambda value: None if value is None or value < 0 else feature.int2str(value)
    return lambda value: None if value is None else str(value).strip() or None


def _label_of(value: str | None, where: str, row: int, column: str, labels: set[str] | None) -> str:
    if value is None:
        raise DataError(where, None, f"row {row}: no {column!r} label ({UNLABELLED})")
    if labels is not None and value not in labels:
        raise DataError(where, None, f"row {row}: unknown label {value!r}, expected one of {sorted(labels)}")
    return value


# --- sentence(-pair) classification ----------------------------------------------------------------------------

def _classification(dataset, where: str, *, lang: str | None, pair: bool, labels: set[str] | None,
                    renamed: dict[str, str] | None = None) -> list[ClassificationExample]:
    """Rows with the columns the TSV headers use (data.benchmark_rules.HEADER_ALIASES: premise / sentence1 / text,
    hypothesis / sentence2, label / gold_label / category, id / pairid / index_id, a language column to select
    `lang`'s rows from a multilingual split)."""
    text = _column(dataset, where, *HEADER_ALIASES["text"])
    text_pair = _column(dataset, where, *HEADER_ALIASES["text_pair"]) if pair else None
    label = _column(dataset, where, *HEADER_ALIASES["label"])
    ids = next((c for c in HEADER_ALIASES["id"] if c in dataset.column_names), None)
    language = next((c for c in HEADER_ALIASES["language"] if c in dataset.column_names), None)
    name_of = _names(dataset, label)
    examples = []
    for row, item in enumerate(dataset):
        if lang is not None and language is not None and item[language] != lang:
            continue
        value = name_of(item[label])
        value = (renamed or {}).get(value, value)
        examples.append(ClassificationExample(str(item[ids]) if ids else str(row), item[text].strip(),
                                              _label_of(value, where, row, label, labels),
                                              item[text_pair].strip() if pair else None))
    if not examples:
        raise DataError(where, None, f"no examples for language {lang!r}" if language else "no examples")
    return examples


@register_hub_converter("sib200")
def _sib200(dataset, where: str, **_) -> list[ClassificationExample]:
    """Davlan/sib200 (config: the FLORES-200 code, e.g. eng_Latn): index_id, category, text."""
    return _classification(dataset, where, lang=None, pair=False, labels=None)


@register_hub_converter("xnli")
def _xnli(dataset, where: str, *, lang: str | None = None, **_) -> list[ClassificationExample]:
    """facebook/xnli (config: the language): premise, hypothesis, label (ClassLabel entailment / neutral /
    contradiction)."""
    return _classification(dataset, where, lang=lang, pair=True, labels=XNLI_LABELS,
                           renamed={"contradictory": "contradiction"})


@register_hub_converter("pawsx")
def _pawsx(dataset, where: str, *, lang: str | None = None, **_) -> list[ClassificationExample]:
    """google-research-datasets/paws-x (config: the language): id, sentence1, sentence2, label (ClassLabel "0" /
    "1"; the dataset's -1 marks a missing label, an error here)."""
    return _classification(dataset, where, lang=lang, pair=True, labels=PAWSX_LABELS)


# --- tagging ------------------------------------------------------------------------------------------------------

def _tagging(dataset, where: str, words_column: str, tags_column: str, keep: Callable[[dict, int], bool],
             check: Callable[[str], bool], expected: str) -> list[TaggingExample]:
    name_of = _names(dataset, tags_column)
    ids = next((c for c in ("idx", "id") if c in dataset.column_names), None)
    examples = []
    for row, item in enumerate(dataset):
        words, tags = [], []
        for k, (word, value) in enumerate(zip(item[words_column], item[tags_column], strict=True)):
            if not keep(item, k):
                continue
            tag = name_of(value)
            if tag is None or not check(tag):
                raise DataError(where, None, f"row {row}: word {k} {word!r} has tag {tag!r}, expected {expected}")
            words.append(word)
            tags.append(tag)
        if words:
            examples.append(TaggingExample(str(item[ids]) if ids else str(row), tuple(words), tuple(tags)))
    if not examples:
        raise DataError(where, None, "no sentences")
    return examples


_UPOS = {"ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
         "SCONJ", "SYM", "VERB", "X"}


@register_hub_converter("udpos")
def _udpos(dataset, where: str, **_) -> list[TaggingExample]:
    """universal-dependencies/universal_dependencies (config: the treebank, e.g. en_ewt; tokens, upos, head, ...)
    or google/xtreme's udpos.<Language> (tokens, pos_tags). universal_dependencies keeps the multiword-token
    lines (e.g. Spanish "del" beside "de" "el") and empty nodes, with UPOS "_" and no head: they are not words,
    as the CoNLL-U loader skips them."""
    tags = _column(dataset, where, "upos", "pos_tags")
    words = _column(dataset, where, "tokens")
    if "head" in dataset.column_names:  # a word has a head; a multiword range or an empty node has "None"
        def keep(item, k):
            return item["head"][k] not in ("None", "_", None)
    else:
        def keep(item, k):
            return True
    return _tagging(dataset, where, words, tags, keep, _UPOS.__contains__, "a UPOS tag")


@register_hub_converter("panx")
def _panx(dataset, where: str, **_) -> list[TaggingExample]:
    """unimelb-nlp/wikiann or google/xtreme's PAN-X.<lang> (config: the language): tokens (the "lang:" prefix
    already removed), ner_tags (ClassLabel O, B-PER, I-PER, B-ORG, I-ORG, B-LOC, I-LOC). xtreme's builder wrote "O"
    for a word without a tag (XTREME's own test files have none): a split without a single entity is taken as
    unlabelled, not scored."""
    examples = _tagging(dataset, where, _column(dataset, where, "tokens"), _column(dataset, where, "ner_tags"),
                        lambda item, k: True, lambda tag: bool(BIO_TAG.fullmatch(tag)), "O, B-TYPE or I-TYPE")
    if all(tag == "O" for example in examples for tag in example.tags):
        raise DataError(where, None, f"no word of any sentence has an entity tag ({UNLABELLED})")
    return examples


# --- extractive QA ----------------------------------------------------------------------------------------------

@register_hub_converter("squad", splits={"test": "validation"})
def _squad(dataset, where: str, *, split: str = "test", **_) -> list[QAExample]:
    """google/xquad (config xquad.<lang>, one validation split: the test), or SQuAD-layout datasets: id, context,
    question, answers {text: [...], answer_start: [...]}[, title]. Answer starts are checked against the context
    as in the SQuAD file loader."""
    for column in ("id", "context", "question", "answers"):
        _column(dataset, where, column)
    examples, relocated = [], []
    for row, item in enumerate(dataset):
        gold = item["answers"] or {}
        pairs = list(zip(gold.get("text") or [], gold.get("answer_start") or [], strict=False))
        if not pairs:
            raise DataError(where, None, f"row {row}: question {item['id']!r} has no answers ({UNLABELLED})")
        answers = [checked_answer({"text": text, "answer_start": start}, item["context"], split, relocated)
                   for text, start in pairs]
        if problem := next((a for a in answers if isinstance(a, str)), None):
            raise DataError(where, None, f"row {row}: question {item['id']!r}: {problem}")
        examples.append(QAExample(str(item["id"]), item["question"], item["context"], tuple(answers),
                                  item.get("title") or ""))
    return finished_questions(examples, relocated, where)


# --- Tatoeba sentence retrieval ---------------------------------------------------------------------------------

@register_hub_converter("tatoeba", splits={"test": "validation"})
def _tatoeba(dataset, where: str, *, lang: str | None = None, **_) -> tuple[list[str], list[str]]:
    """google/xtreme's tatoeba.<xxx> (xxx: the ISO 639-3 code; one validation split): source_sentence (the xxx
    side), target_sentence (English), source_lang, target_lang. The sentences keep the files' line ends there:
    stripped."""
    src, tgt = _column(dataset, where, "source_sentence"), _column(dataset, where, "target_sentence")
    pairs = []
    for row, item in enumerate(dataset):
        if lang and item.get("source_lang", lang) != lang:
            raise DataError(where, None, f"row {row}: source_lang {item['source_lang']!r}, expected {lang!r}")
        pair = item[src].strip(), item[tgt].strip()
        if not all(pair):
            raise DataError(where, None, f"row {row}: a sentence without its translation")
        pairs.append(pair)
    if not pairs:
        raise DataError(where, None, "no sentence pairs")
    return [s for s, _ in pairs], [t for _, t in pairs]
