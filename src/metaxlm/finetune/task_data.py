"""A task's data for the scenarios (metaxlm.finetune.scenarios): each file loaded once per language, test and
training sets capped as the spec says (`cap`: the same items in every language), XQuAD's documents halved for
`train_from: test_half` (`split_by_document`), the source data a scenario needs checked before any model is read
(`check_source_data`), a transfer-matrix row's training data and translate-train's code-switched items."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from metaxlm.errors import MetaXLMError
from metaxlm.finetune.spec import TaskSpec
from metaxlm.finetune.tasks import Task
from metaxlm.roots import missing_data_hint


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cap(examples: list, n: int | None) -> list:
    """At most n examples: those with the smallest sha256 of their id (in file order), so parallel test sets
    keep the same items in every language."""
    if n is None or len(examples) <= n:
        return examples
    keep = set(sorted(range(len(examples)), key=lambda i: _sha(examples[i].id))[:n])
    return [ex for i, ex in enumerate(examples) if i in keep]


def subset_predictions(examples: list, predictions, subset: list):
    """The predictions of `subset` (a subset of `examples`, in their order) out of those of `examples`: a list
    aligned with the examples, or a mapping by example id (QA)."""
    if isinstance(predictions, dict):
        ids = {ex.id for ex in subset}
        return {k: v for k, v in predictions.items() if k in ids}
    position = {id(ex): i for i, ex in enumerate(examples)}
    return [predictions[position[id(ex)]] for ex in subset]


def document_of(example) -> str:
    """The document an item belongs to: a QA item's article title, else the id part before '#' (the demo's
    `<page>#<paragraph>` ids), else the id itself."""
    return getattr(example, "title", "") or example.id.split("#", 1)[0]


def split_by_document(source_examples: list) -> tuple[set[str], set[str]]:
    """(training ids, test ids): documents ordered by sha256 of their name, the first half (rounded up) train."""
    documents = sorted({document_of(ex) for ex in source_examples}, key=_sha)
    train_docs = set(documents[: (len(documents) + 1) // 2])
    train_ids = {ex.id for ex in source_examples if document_of(ex) in train_docs}
    return train_ids, {ex.id for ex in source_examples} - train_ids


class TaskData:
    """A task's files per language, each loaded once; test and training sets capped as the spec says."""

    def __init__(self, spec: TaskSpec):
        self.spec = spec
        self._cache: dict[tuple[str, str], list | None] = {}
        self.half: tuple[set[str], set[str]] | None = None

    def load(self, which: str, lang: str) -> list | None:
        """Examples of `which` (train/dev/test/translate_train) in `lang`, or None when there is no such file."""
        from metaxlm.data.benchmarks import load_examples

        if (which, lang) not in self._cache:
            spec = self.spec
            path = spec.path(which, lang)
            examples = None
            if path is not None and _exists(path, spec.source, lang):
                split = "test" if which == "test" else ("dev" if which == "dev" else "train")
                examples = list(load_examples(spec.format, path, lang=lang, split=split, allow_empty=True,
                                              source=spec.source, direction=spec.direction))
            self._cache[which, lang] = examples
        return self._cache[which, lang]

    def document_halves(self) -> tuple[set[str], set[str]]:
        if self.half is None:
            source = self.load("test", self.spec.source)
            if not source:
                raise MetaXLMError(f"task {self.spec.name}: test_half needs the source language's test file "
                                   f"({describe_file(self.spec.path('test', self.spec.source))})")
            self.half = split_by_document(source)
        return self.half

    def held_out(self, lang: str) -> list | None:
        """The dev items `dev_from_train` cuts from `lang`'s train file (those with the largest sha256 of the id)."""
        examples = self.load("train", lang)
        n = self.spec.dev_from_train
        if examples is None or not n:
            return None
        keep = set(sorted(range(len(examples)), key=lambda i: _sha(examples[i].id))[-n:])
        return [ex for i, ex in enumerate(examples) if i in keep]

    def dev(self, lang: str) -> list | None:
        """The dev file's items, else the items held out of the train file (`dev_from_train`)."""
        examples = self.load("dev", lang)
        return examples if examples is not None else self.held_out(lang)

    def test(self, lang: str, halves: bool) -> list | None:
        if self.spec.evaluate_on == "dev":
            examples = self.dev(lang)
            return None if examples is None else cap(examples, self.spec.max_test_items)
        examples = self.load("test", lang)
        if examples is not None and halves:
            examples = [ex for ex in examples if ex.id in self.document_halves()[1]]
        return None if examples is None else cap(examples, self.spec.max_test_items)

    def train_half(self, lang: str) -> list | None:
        examples = self.load("test", lang)
        if examples is None:
            return None
        # QA test items whose answer could not be located (start -1) cannot be trained on
        return [ex for ex in examples if ex.id in self.document_halves()[0] and _trainable(ex)]

    def train(self, lang: str, which: str = "train") -> list | None:
        examples = self.load(which, lang)
        if examples is None:
            return None
        if which == "train" and self.spec.dev_from_train:  # the held-out dev items are never trained on
            dev = {id(ex) for ex in self.held_out(lang) or ()}
            examples = [ex for ex in examples if id(ex) not in dev]
        return cap([ex for ex in examples if _trainable(ex)], self.spec.max_train_items)


def _exists(path: Path, source: str, lang: str) -> bool:
    """The file exists; for a `{side}` template (translation file pairs), both of its files do, and they are two
    (a pair of a language with itself, e.g. the source's own, has no data). A hub: dataset is there to load (the
    loading says if it is not)."""
    from metaxlm.data.benchmarks import SIDE, side_paths
    from metaxlm.data.hub import is_hub

    if is_hub(path):
        return True
    if SIDE not in str(path):
        return path.exists()
    src, tgt = side_paths(path, source, lang)
    return src != tgt and src.exists() and tgt.exists()


def _missing(path: Path | None) -> bool:
    """A task file that is not there (a hub: dataset or a `{side}` pair is checked when it is loaded)."""
    from metaxlm.data.benchmarks import SIDE
    from metaxlm.data.hub import is_hub

    return path is not None and not is_hub(path) and SIDE not in str(path) and not path.exists()


def describe_file(path: Path | None) -> str:
    """A task file as an error names it: a missing one says so, and, inside the benchmark-data root, which root
    and where to get the data (metaxlm.roots)."""
    return f"{path}: no such file{missing_data_hint(path)}" if _missing(path) else str(path)


def task_languages(spec: TaskSpec, languages: Sequence[str] | None) -> list[str]:
    """The languages a task runs in: `languages` (default: the spec's) that the task has, its source first."""
    langs = [lang for lang in (languages or spec.languages) if lang in spec.languages]
    if spec.source not in langs:
        langs.insert(0, spec.source)
    return langs


def check_source_data(spec: TaskSpec, scenario: str = "zero_shot", languages: Sequence[str] | None = None) -> None:
    """Raise when the data a scenario starts from is missing: before any model is read, since without the benchmark
    data nothing can run (the first wall outside this repository). Zero-shot and translate-train train on the
    source language: its training file (its test file, with train_from test_half); supervised and the transfer
    matrix on each language: no language's test file is there (a language missing alone is said when it runs)."""
    if scenario in ("zero_shot", "translate_train"):
        which = "test" if spec.train_from == "test_half" else "train"
        path = spec.path(which, spec.source)
        if _missing(path):
            raise MetaXLMError(f"task {spec.name}: no {which} file for the source language {spec.source} "
                               f"({describe_file(path)})")
        return
    paths = [spec.path("test", lang) for lang in task_languages(spec, languages)]
    if paths and all(_missing(path) for path in paths):
        raise MetaXLMError(f"task {spec.name}: no test file for any of its languages ({describe_file(paths[0])}, ...)")


def _trainable(example) -> bool:
    return all(start >= 0 for _, start in getattr(example, "answers", ()))


def matrix_training_data(data: TaskData, lang: str) -> tuple[list | None, str]:
    """A transfer-matrix row's training data and where it came from: with test_half, the language's half of
    the test documents; else its train file, else its translate_train file, else its dev file."""
    spec = data.spec
    if (spec.matrix_train_from or spec.train_from) == "test_half":
        examples = data.train_half(lang)
        if not examples:
            return None, "no test items to train on (row is null)"
        return cap(examples, spec.max_train_items), "test items of the training documents"
    for which in ("train", "translate_train", "dev"):
        examples = data.train(lang, which)
        if examples:
            return examples, f"{which} file {spec.path(which, lang)}"
    return None, "no training data (row is null)"


def code_switched_items(task: Task, english: list, translated: list, recipe: str = "paper") -> tuple[list, int]:
    """Training items for translate-train in one language, by the task's `code_switch` recipe. For each translated
    example of a pair task with a matching English id, its two code-switched examples (x_xx, y_en), (x_en, y_xx) as
    one tuple (the trainer keeps a tuple in one batch). Pan et al. (2021, Section 2.3) augment "when training on
    languages other than English" — the English training set stays — and their footnote 2 drops only the translated
    original (x_xx, y_xx): `paper` is the English items plus the tuples. `pairs_only` (the tuples alone, no English
    item) and `originals` (`paper` plus each translated original) depart from the paper; `none` is the plain
    translate-train set, English and translated items. Translated examples without a code-switched form (no English
    match) are kept as they are. A task with no code-switched form at all (single-text tasks) gets the plain set
    whatever the recipe. Returns (items, number of code-switched tuples)."""
    if recipe == "none":
        return [*english, *translated], 0
    by_id = {ex.id: ex for ex in english}
    items: list = []
    pairs = 0
    for ex in translated:
        switched = task.code_switch(by_id[ex.id], ex) if ex.id in by_id else None
        if switched is None:
            items.append(ex)
            continue
        if recipe == "originals":
            items.append(ex)
        items.append(tuple(switched))
        pairs += 1
    if recipe != "pairs_only" or not pairs:
        items = [*english, *items]
    return items, pairs


# what each recipe trains on besides the code-switched pairs: the results entry's note says it
RECIPE_NOTES = {"paper": "with the English items, instead of the translated originals",
                 "pairs_only": "without the English items, instead of the translated originals",
                 "originals": "with the English items and the translated originals"}
