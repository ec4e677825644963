"""Loaders for the evaluation benchmarks, each returning the typed examples of `metaxlm.data.examples`.

`load_examples(fmt, path)` dispatches on the format name (the `FORMATS` registry: a plugin registers its own with
`@register_format("name", examples=<example class>)`, and a task type takes the formats that yield its example class;
`tatoeba` gives sentence lists for retrieval); gold word alignments have their own
`load_alignment`, since they come as three files. File access goes through `metaxlm.data.readers`, so every
error names the file and line.

A known trap: public test files often ship without labels (XTREME strips them from several test sets). Every
labelled format here requires its labels in every split and raises `DataError` at the first unlabelled item,
rather than scoring predictions against empty or placeholder gold.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Iterator
from itertools import chain
from pathlib import Path

from metaxlm.data.benchmark_rules import BIO_TAG as _BIO_TAG
from metaxlm.data.benchmark_rules import HEADER_ALIASES as _HEADER_ALIASES
from metaxlm.data.benchmark_rules import PAWSX_LABELS as _PAWSX_LABELS
from metaxlm.data.benchmark_rules import UNLABELLED as _UNLABELLED
from metaxlm.data.benchmark_rules import XNLI_LABELS as _XNLI_LABELS
from metaxlm.data.benchmark_rules import checked_answer as _answer
from metaxlm.data.benchmark_rules import finished_questions
from metaxlm.data.examples import (
    AlignmentSet,
    ClassificationExample,
    QAExample,
    SpanExample,
    TaggingExample,
    TranslationExample,
)
from metaxlm.data.readers import count_lines, iter_lines, parse_json, read_conllu, read_parallel
from metaxlm.errors import ConfigError, DataError, SkipReport
from metaxlm.registry import Registry

__all__ = ["FORMATS", "load_alignment", "load_examples", "register_format"]

PathLike = str | Path
Loader = Callable[..., object]
FORMATS: Registry[Loader] = Registry("benchmark format")



def register_format(name: str, *, examples: type | None) -> Callable[[Loader], Loader]:
    """Register a loader `(path, *, lang, split, **options) -> list[examples]` under `name`; `examples`: the class of
    the examples it returns (None: not task examples, e.g. retrieval's sentence lists)."""
    def add(loader: Loader) -> Loader:
        loader.examples = examples
        return FORMATS.register(name)(loader)
    return add


def load_examples(fmt: str, path: PathLike, *, lang: str | None = None, split: str = "test",
                  allow_empty: bool = False, **kw) -> list | tuple[list[str], list[str]]:
    """Examples of benchmark file `path` in format `fmt` (a name in FORMATS); `tatoeba` gives (src, tgt) lists.

    `lang` selects rows of multilingual files (XNLI's language column) and the "lang:" word prefix of PAN-X.
    `allow_empty` returns [] for a file with no content (e.g. a demo language without test items) instead of
    raising. Other keywords go to the format's loader. A `hub:NAME[:CONFIG][@REVISION]` path is read from the
    Hugging Face Hub instead, by the format's converter (data.hub), as the same examples.
    """
    loader = FORMATS.get(fmt)
    if str(path).startswith("hub:"):
        from metaxlm.data.hub import load_hub_examples

        return load_hub_examples(fmt, str(path), lang=lang, split=split, **kw)
    path = Path(path)
    if allow_empty and path.is_file() and count_lines(path, nonblank=True) == 0:
        return []
    return loader(path, lang=lang, split=split, **kw)


def _jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """(line_no, object) of a JSON-lines file; line numbers are what makes label errors findable."""
    for line_no, line in iter_lines(path):
        if not line.strip():
            continue
        obj = parse_json(line, path, line_no)
        if not isinstance(obj, dict):
            raise DataError(path, line_no, f"expected a JSON object, got {type(obj).__name__}")
        yield line_no, obj


def _label(value: object, path: Path, line_no: int, field: str) -> str:
    """A label as a non-empty string; a missing/empty one is the unlabelled-test-file trap."""
    if isinstance(value, bool) or value is None or not isinstance(value, str | int):
        raise DataError(path, line_no, f"no {field!r} label ({_UNLABELLED})")
    label = str(value).strip()
    if not label:
        raise DataError(path, line_no, f"empty {field!r} label ({_UNLABELLED})")
    return label


def _text(obj: dict, field: str, path: Path, line_no: int) -> str:
    if not isinstance(obj.get(field), str):
        raise DataError(path, line_no, f"missing string field {field!r}")
    return obj[field]


# --- the demo tasks (data/demo/tasks) ---------------------------------------------------------------------

@register_format("demo_module", examples=ClassificationExample)
def _demo_module(path: Path, **_) -> list[ClassificationExample]:
    """{"id", "text", "label"} JSON lines."""
    return [ClassificationExample(str(obj.get("id", line_no)), _text(obj, "text", path, line_no),
                                  _label(obj.get("label"), path, line_no, "label"))
            for line_no, obj in _jsonl(path)]


def _spans(value: object, text: str, path: Path, line_no: int) -> tuple[tuple[int, int, str], ...]:
    if not isinstance(value, list):
        raise DataError(path, line_no, f"no 'spans' list ({_UNLABELLED})")
    spans = []
    for span in value:
        ok = (isinstance(span, list) and len(span) == 3 and all(type(x) is int for x in span[:2])
              and isinstance(span[2], str) and span[2] and 0 <= span[0] < span[1] <= len(text))
        if not ok:
            raise DataError(path, line_no, f"bad span {span!r}: expected [start, end, label] with "
                                           f"0 <= start < end <= {len(text)} (the text length)")
        spans.append((span[0], span[1], span[2]))
    return tuple(spans)


@register_format("demo_spans", examples=SpanExample)
def _demo_spans(path: Path, **_) -> list[SpanExample]:
    """{"id", "text", "spans": [[start, end, label], ...]} JSON lines, character offsets, end exclusive."""
    examples, first_line = [], None
    for line_no, obj in _jsonl(path):
        text = _text(obj, "text", path, line_no)
        examples.append(SpanExample(str(obj.get("id", line_no)), text, _spans(obj.get("spans"), text, path, line_no)))
        first_line = first_line or line_no
    if examples and not any(ex.spans for ex in examples):  # each [] is valid alone, all of them are not
        raise DataError(path, first_line, f"no item has any span ({_UNLABELLED})")
    return examples


# --- sentence(-pair) classification TSV -------------------------------------------------------------------



def _header_columns(cells: list[str]) -> dict[str, int]:
    names = [c.strip().lower() for c in cells]
    return {key: names.index(alias) for key, aliases in _HEADER_ALIASES.items()
            for alias in reversed(aliases) if alias in names}


def _classification_tsv(path: Path, *, lang: str | None, pair: bool, labels: set[str] | None,
                        header_required: bool, renamed: dict[str, str] | None = None) -> list[ClassificationExample]:
    """Rows of a TSV file with a header naming its columns, or (when allowed) headerless
    text[, text_pair], label columns as XTREME writes them. `renamed` maps label spellings to `labels`."""
    examples: list[ClassificationExample] = []
    columns: dict[str, int] | None = None
    n_columns = 3 if pair else 2
    has_header = False
    for line_no, line in iter_lines(path):
        if not line.strip():
            continue
        cells = line.split("\t")
        if columns is None:
            columns = _header_columns(cells)
            if "text" in columns and (not pair or "text_pair" in columns):
                if "label" not in columns:
                    raise DataError(path, line_no, f"the header has no label column ({_UNLABELLED}): {line!r}")
                n_columns, has_header = len(cells), True
                continue
            if header_required:
                raise DataError(path, line_no, "expected a header line with the columns index_id, category, text")
            columns = {"text": 0, "text_pair": 1, "label": 2} if pair else {"text": 0, "label": 1}
        if len(cells) != n_columns:
            problem = f"expected {n_columns} tab-separated columns, got {len(cells)}"
            if len(cells) == n_columns - 1 and not has_header:
                problem += f": no label column ({_UNLABELLED})"
            raise DataError(path, line_no, problem)
        if lang is not None and "language" in columns and cells[columns["language"]].strip() != lang:
            continue
        label = _label(cells[columns["label"]], path, line_no, "label")
        label = (renamed or {}).get(label, label)
        if labels is not None and label not in labels:
            raise DataError(path, line_no, f"unknown label {label!r}, expected one of {sorted(labels)}")
        example_id = cells[columns["id"]].strip() if "id" in columns else str(len(examples))
        examples.append(ClassificationExample(example_id, cells[columns["text"]].strip(), label,
                                              cells[columns["text_pair"]].strip() if pair else None))
    if not examples:
        raise DataError(path, None, f"no examples for language {lang!r}" if lang and has_header else "no examples")
    return examples


@register_format("xnli", examples=ClassificationExample)
def _xnli(path: Path, *, lang: str | None = None, **_) -> list[ClassificationExample]:
    """XNLI: XTREME's headerless premise/hypothesis/label, or XNLI 1.0 with a header (and language column)."""
    # "contradictory" is how the MultiNLI-derived XNLI training files spell it
    return _classification_tsv(path, lang=lang, pair=True, labels=_XNLI_LABELS, header_required=False,
                               renamed={"contradictory": "contradiction"})


@register_format("pawsx", examples=ClassificationExample)
def _pawsx(path: Path, *, lang: str | None = None, **_) -> list[ClassificationExample]:
    """PAWS-X: x-final's id/sentence1/sentence2/label with a header, or XTREME's headerless 3 columns."""
    return _classification_tsv(path, lang=lang, pair=True, labels=_PAWSX_LABELS, header_required=False)


@register_format("sib200", examples=ClassificationExample)
def _sib200(path: Path, **_) -> list[ClassificationExample]:
    """SIB-200 data/annotated/<lang>/{train,dev,test}.tsv: header index_id, category, text."""
    return _classification_tsv(path, lang=None, pair=False, labels=None, header_required=True)


@register_format("reviews", examples=ClassificationExample)
def _reviews(path: Path, **_) -> list[ClassificationExample]:
    """Multilingual review classification JSON lines: MARC's {"review_body", "stars"} or {"text", "label"}."""
    examples = []
    for line_no, obj in _jsonl(path):
        text_field, label_field = ("review_body", "stars") if "review_body" in obj else ("text", "label")
        example_id = str(obj.get("review_id", obj.get("id", line_no)))
        examples.append(ClassificationExample(example_id, _text(obj, text_field, path, line_no),
                                              _label(obj.get(label_field), path, line_no, label_field)))
    return examples


# --- tagging ---------------------------------------------------------------------------------------------

@register_format("udpos", examples=TaggingExample)
def _udpos(path: Path, **_) -> list[TaggingExample]:
    """UD CoNLL-U, words and UPOS tags (multiword ranges and empty nodes are not words). An unlabelled file
    ("_" as UPOS) fails in read_conllu as an unknown UPOS at its line."""
    return [TaggingExample(sent.sent_id or f"{path.name}:{sent.line}", tuple(t.form for t in sent.tokens),
                           tuple(t.upos for t in sent.tokens))
            for sent in read_conllu(path)]


_LANG_PREFIX = re.compile(r"[a-z]{2,3}:")


@register_format("panx", examples=TaggingExample)
def _panx(path: Path, *, lang: str | None = None, **_) -> list[TaggingExample]:
    """WikiANN / PAN-X: one "lang:word<TAB>TAG" line per word (CoNLL-style: the tag is the last column),
    a blank line between sentences. The "lang:" prefix is `lang`'s, or when None the first word's."""
    prefix = f"{lang}:" if lang else None
    examples: list[TaggingExample] = []
    words: list[str] = []
    tags: list[str] = []
    for line_no, line in chain(iter_lines(path), [(None, "")]):  # the sentinel ends the last sentence
        fields = line.split()
        if not fields:
            if words:
                examples.append(TaggingExample(str(len(examples)), tuple(words), tuple(tags)))
                words, tags = [], []
            continue
        if len(fields) < 2:
            raise DataError(path, line_no, f"no tag after the word {fields[0]!r} ({_UNLABELLED})")
        if not _BIO_TAG.fullmatch(fields[-1]):
            raise DataError(path, line_no, f"bad tag {fields[-1]!r}, expected O, B-TYPE or I-TYPE")
        if prefix is None:
            match = _LANG_PREFIX.match(fields[0])
            prefix = match.group() if match else ""
        word = fields[0].removeprefix(prefix) if prefix else fields[0]
        words.append(word or fields[0])  # a word that is only the prefix ("en:") keeps it
        tags.append(fields[-1])
    return examples


# --- extractive QA ---------------------------------------------------------------------------------------

def _line_of(lines: list[str], qid: str) -> int | None:
    """Line of a question id in the JSON text (json.loads has no positions), None if not found."""
    needles = {json.dumps(qid), json.dumps(qid, ensure_ascii=False)}
    return next((n for n, line in enumerate(lines, 1) if any(needle in line for needle in needles)), None)




@register_format("squad", examples=QAExample)
def _squad(path: Path, *, split: str = "test", **_) -> list[QAExample]:
    """SQuAD v1.1 layout (SQuAD, XQuAD, MLQA, TyDiQA-GoldP): data[].paragraphs[].qas[] with answers. In a
    test split an answer text missing from its context gets start -1 (it is still scored); elsewhere it is an
    error, since training needs the span."""
    lines = [line for _, line in iter_lines(path)]
    data = parse_json("\n".join(lines), path)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DataError(path, 1, 'expected the SQuAD layout {"data": [{"paragraphs": [...]}]}')
    examples, relocated = [], []
    for article in data["data"]:
        for paragraph in article.get("paragraphs", []):
            context = paragraph.get("context")
            for qa in paragraph.get("qas", []):
                qid = str(qa.get("id"))
                if not isinstance(context, str) or not isinstance(qa.get("question"), str):
                    raise DataError(path, _line_of(lines, qid), f"question {qid!r}: missing context or question")
                if not qa.get("answers"):
                    raise DataError(path, _line_of(lines, qid), f"question {qid!r} has no answers ({_UNLABELLED};"
                                                                " SQuAD 2.0 unanswerable questions are not supported)")
                answers = [_answer(a, context, split, relocated) for a in qa["answers"]]
                if problem := next((a for a in answers if isinstance(a, str)), None):
                    raise DataError(path, _line_of(lines, qid), f"question {qid!r}: {problem}")
                examples.append(QAExample(qid, qa["question"], context, tuple(answers), article.get("title", "")))
    return finished_questions(examples, relocated, path)


# --- Tatoeba sentence retrieval ----------------------------------------------------------------------------

@register_format("tatoeba", examples=None)
def _tatoeba(path: Path, *, lang: str | None = None, **_) -> tuple[list[str], list[str]]:
    """(xxx sentences, English sentences), line i of one the translation of line i of the other. `path` is
    tatoeba.xxx-eng.xxx (the .eng file beside it is the other side) or the folder, with lang="xxx"."""
    if path.is_dir():
        if not lang:
            raise ConfigError(f"tatoeba: {path} is a folder, so lang (e.g. 'deu') must say which pair to load")
        path = path / f"tatoeba.{lang}-eng.{lang}"
    match = re.fullmatch(r"tatoeba\.(\w+)-eng\.(\w+)", path.name)
    if not match or match.group(1) != match.group(2) or match.group(1) == "eng":
        raise DataError(path, None, "expected a file named tatoeba.xxx-eng.xxx (the non-English side)")
    pairs = list(read_parallel(path, path.with_suffix(".eng")))
    return [src for src, _ in pairs], [tgt for _, tgt in pairs]


# --- translation pairs ---------------------------------------------------------------------------------------

SIDE = "{side}"  # in a file-pair path template, where each side's language code goes


def side_paths(path: PathLike, source: str, lang: str) -> tuple[Path, Path]:
    """The two line-aligned files of a `{side}` path template: `{side}` filled with the source language's code,
    then with `lang`'s (`test.en-de.{side}` -> test.en-de.en, test.en-de.de)."""
    text = str(path)
    if SIDE not in text:
        raise ConfigError(f"{path}: a parallel_files path must contain {SIDE} (filled with each side's language code)")
    return Path(text.replace(SIDE, source)), Path(text.replace(SIDE, lang))


def _translation_pairs(pairs, path: PathLike, direction: str) -> list[TranslationExample]:
    if direction not in ("forward", "reverse"):
        raise ConfigError(f"direction must be 'forward' or 'reverse', got {direction!r}")
    try:
        examples = [TranslationExample(str(i), *((a, b) if direction == "forward" else (b, a)))
                    for i, (a, b) in enumerate(pairs)]
    except DataError as err:  # a sentence without its translation (or the reverse) is the unlabelled-file trap
        if err.line is not None and ("columns" in err.message or "empty line" in err.message):
            raise DataError(err.path, err.line, f"{err.message} (a sentence without its translation: "
                                                f"{_UNLABELLED})") from None
        raise
    if not examples:
        raise DataError(path, None, "no sentence pairs")
    return examples


@register_format("parallel_tsv", examples=TranslationExample)
def _parallel_tsv(path: Path, *, direction: str = "forward", **_) -> list[TranslationExample]:
    """`sentence<TAB>translation` lines (the demo's `parallel/en-xx.tsv.xz`); `forward` translates column 1 into
    column 2, `reverse` column 2 into column 1. A line without both sides is an error at that line."""
    return _translation_pairs(read_parallel(path), path, direction)


@register_format("parallel_files", examples=TranslationExample)
def _parallel_files(path: Path, *, lang: str | None = None, source: str = "en", direction: str = "forward",
                    **_) -> list[TranslationExample]:
    """Two line-aligned files, one sentence per line, named by a `{side}` template (see `side_paths`); `forward`
    translates the source language's file into `lang`'s. Files of different lengths, or a line empty on one side
    only, are errors naming the file and line."""
    if lang is None:
        raise ConfigError("parallel_files needs the target language (lang) to name its second file")
    src, tgt = side_paths(path, source, lang)
    return _translation_pairs(read_parallel(src, tgt), src, direction)


# --- gold word alignments ----------------------------------------------------------------------------------

_PHARAOH_LINK = re.compile(r"(\d+)([-p?])(\d+)")


def _sentences(src_path: Path, tgt_path: Path | None) -> list[tuple[list[str], list[str]]]:
    """Word lists of every pair, keeping line positions (gold links refer to them): two line-aligned files,
    or one "source ||| target" file. Words are split on runs of whitespace."""
    if tgt_path is None:
        pairs = []
        for line_no, line in iter_lines(src_path):
            sides = line.split("|||")
            if len(sides) != 2:
                raise DataError(src_path, line_no, f"expected 'source ||| target', found {len(sides) - 1} '|||'")
            pairs.append((sides[0].split(), sides[1].split()))
        return pairs
    src, tgt = list(iter_lines(src_path)), list(iter_lines(tgt_path))
    if len(src) != len(tgt):
        short, n = (src_path, len(src)) if len(src) < len(tgt) else (tgt_path, len(tgt))
        raise DataError(short, n, f"file ends here: {src_path} has {len(src)} lines, {tgt_path} {len(tgt)}")
    return [(s.split(), t.split()) for (_, s), (_, t) in zip(src, tgt, strict=True)]


def _parse_links(gold_path: Path, fmt: str, n_pairs: int, sid_base: int) -> Iterator[tuple[int, int, int, int, bool]]:
    """(line_no, pair, i, j, sure) per gold link, indices as written in the file."""
    if fmt == "pharaoh":
        n_lines = 0
        for n_lines, line in iter_lines(gold_path):
            if n_lines > n_pairs:
                raise DataError(gold_path, n_lines, f"more gold lines than the {n_pairs} sentence pairs")
            for token in line.split():
                if not (m := _PHARAOH_LINK.fullmatch(token)):
                    raise DataError(gold_path, n_lines,
                                    f"bad link {token!r}: expected 'i-j' (sure) or 'ipj' (possible)")
                yield n_lines, n_lines - 1, int(m.group(1)), int(m.group(3)), m.group(2) == "-"
        if n_lines < n_pairs:
            raise DataError(gold_path, n_lines, f"file ends here, but there are {n_pairs} sentence pairs")
        return
    for line_no, line in iter_lines(gold_path):
        fields = line.split()
        if not fields:
            continue
        if len(fields) not in (3, 4) or (len(fields) == 4 and fields[3].upper() not in "SP"):
            raise DataError(gold_path, line_no, f"expected 'sid i j [S|P]', got {line.strip()!r}")
        try:
            sid, i, j = (int(f) for f in fields[:3])
        except ValueError:
            raise DataError(gold_path, line_no, f"expected integers in 'sid i j [S|P]', got {line.strip()!r}") from None
        pair = sid - sid_base
        if not 0 <= pair < n_pairs:  # a wrong sid base would silently shift every link: never skip this
            raise DataError(gold_path, line_no, f"sentence id {fields[0]} is outside "
                                                f"{sid_base}..{n_pairs - 1 + sid_base}"
                                                f" (sid_base={sid_base}, {n_pairs} sentence pairs)")
        yield line_no, pair, i, j, len(fields) == 3 or fields[3].upper() == "S"


def _inside(pair: tuple[list[str], list[str]], i: int, j: int) -> bool:
    return 0 <= i < len(pair[0]) and 0 <= j < len(pair[1])


def _check_bases(links: list[tuple], pairs: list[tuple[list[str], list[str]]], gold_path: Path,
                 src_base: int, tgt_base: int) -> None:
    """Raise when other index bases would put fewer links outside their sentences than the declared ones:
    a wrong base shifts every link by one word, and only the few that fall off a sentence end would show."""
    def n_outside(bases: tuple[int, int]) -> int:
        return sum(not _inside(pairs[k], i - bases[0], j - bases[1]) for _, k, i, j, _ in links)

    declared = (src_base, tgt_base)
    counts = {bases: n_outside(bases) for bases in [(0, 0), (0, 1), (1, 0), (1, 1)]}
    best = min(counts, key=counts.get)
    if counts[best] < counts[declared]:
        raise DataError(gold_path, None, f"{counts[declared]} of {len(links)} links are outside their sentences with"
                                         f" src_base={src_base}, tgt_base={tgt_base}, but only {counts[best]} with"
                                         f" src_base={best[0]}, tgt_base={best[1]}: declare the file's index bases")


def load_alignment(src_path: PathLike, tgt_path: PathLike | None, gold_path: PathLike, *, fmt: str = "pharaoh",
                   src_base: int = 0, tgt_base: int | None = None, sid_base: int = 0, strict: bool = False,
                   report: SkipReport | None = None) -> AlignmentSet:
    """Gold word alignments as 0-based links, with possible ⊇ sure.

    fmt "pharaoh": line k of `gold_path` holds pair k's links, "i-j" sure and "ipj" (or "i?j") possible;
    fmt "sid": one link per line, "sid i j [S|P]" (no flag = sure), sid = line index + `sid_base`.
    `src_base`/`tgt_base` (default: src_base) are the files' word-index bases: declare them, never guess.
    `tgt_path` None: `src_path` holds "source ||| target" lines (awesome-align). A link outside its sentence
    (e.g. de-en's "178 22 -99") is skipped with a warning and counted in `report`, or raises when `strict`.
    """
    if fmt not in ("pharaoh", "sid"):
        raise ConfigError(f"alignment fmt must be 'pharaoh' or 'sid', got {fmt!r}")
    tgt_base = src_base if tgt_base is None else tgt_base
    if {src_base, tgt_base, sid_base} - {0, 1}:
        raise ConfigError(f"index bases must be 0 or 1, got src_base={src_base} tgt_base={tgt_base} "
                          f"sid_base={sid_base}")
    gold_path = Path(gold_path)
    pairs = _sentences(Path(src_path), None if tgt_path is None else Path(tgt_path))
    links = list(_parse_links(gold_path, fmt, len(pairs), sid_base))
    _check_bases(links, pairs, gold_path, src_base, tgt_base)
    sure: list[set[tuple[int, int]]] = [set() for _ in pairs]
    possible: list[set[tuple[int, int]]] = [set() for _ in pairs]
    invalid: list[DataError] = []
    for line_no, k, i, j, is_sure in links:
        src_words, tgt_words = pairs[k]
        if not _inside(pairs[k], i - src_base, j - tgt_base):
            error = DataError(gold_path, line_no, f"link {i} {j} of pair {k} is outside its {len(src_words)} source"
                                                  f" x {len(tgt_words)} target words (bases {src_base}/{tgt_base})")
            if strict:
                raise error
            invalid.append(error)
            continue
        (sure if is_sure else possible)[k].add((i - src_base, j - tgt_base))
    if invalid:
        for error in invalid:
            if report is not None:
                report.add(error)
        warnings.warn(f"{gold_path}: skipped {len(invalid)} invalid link(s), e.g. {invalid[0]}", stacklevel=2)
    aset = AlignmentSet()
    for (src_words, tgt_words), s, p in zip(pairs, sure, possible, strict=True):
        aset.src.append(src_words)
        aset.tgt.append(tgt_words)
        aset.sure.append(s)
        aset.possible.append(p | s)
    return aset
