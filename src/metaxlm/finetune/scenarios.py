"""Fine-tuning scenarios: which runs (training items, test sets, label, seed) each asks for, and how their scores
make a task entry's. A scenario asks a `TaskRunner`: the training runner fine-tunes and tests each run
(metaxlm.finetune.runner, whose run_task runs a scenario), the record reader replays it from its finished-run record
(metaxlm.finetune.run_store), so a task has the same runs either way.

- zero_shot: fine-tune on the source language, test every language.
- supervised: per language with a train file, fine-tune and test in that language.
- translate_train: per language, fine-tune on the source train data plus that language's (machine-
  translated) train data; for pair tasks, as Pan et al. (2021), the source (English) items plus the code-switched
  pairs (x_xx, y_en) and (x_en, y_xx) of each translated item, in the same batch — not the translated item
  (x_xx, y_xx) itself (their footnote 2); the task's `code_switch` names the recipe (`code_switched_items`); test
  in that language.
- transfer_matrix: every language as source (its training data, see `matrix_training_data`), every
  language as target; a source without training data gets a row of NaN (null in JSON) and says so.

With `train_from: test_half` (XQuAD), training items are the source-language test items of half of
the documents and every language is tested on the other half only (`split_by_document`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from metaxlm.errors import MetaXLMError
from metaxlm.finetune.summaries import summarize
from metaxlm.finetune.task_data import (
    RECIPE_NOTES,
    TaskData,
    cap,
    code_switched_items,
    describe_file,
    document_of,
    matrix_training_data,
)
from metaxlm.finetune.tasks import Task, get_task

SCENARIOS = ("zero_shot", "supervised", "translate_train", "transfer_matrix")


class TaskRunner(Protocol):
    """What a scenario asks of a runner: train and test one run, and (translate-train's code-switched items) a task
    fitted to the training items."""

    def train_and_test(self, train_items: list, tests: dict[str, list], seed: int, label: str) -> dict[str, float]:
        """The main metric per test language of the run of (label, seed) on `train_items`."""
        ...

    def new_task(self, train_items: list) -> Task:
        """A task of the spec's type, its labels fitted to `train_items`."""
        ...


def _tests(data: TaskData, langs: Sequence[str], notes: list[str]) -> dict[str, list]:
    halves = data.spec.train_from == "test_half"
    tests, missing = {}, []
    for lang in langs:
        examples = data.test(lang, halves)
        if examples:
            tests[lang] = examples
        else:
            missing.append(lang)
    if missing:
        notes.append(f"no test items for {', '.join(missing)} (not scored)")
    return tests


def _source_train(data: TaskData, notes: list[str]) -> list:
    spec = data.spec
    if spec.train_from == "test_half":
        examples = cap(data.train_half(spec.source) or [], spec.max_train_items)
        source = data.load("test", spec.source)
        kind = get_task(spec.type).split_unit
        train_docs = {document_of(ex) for ex in source if ex.id in data.document_halves()[0]}
        n_docs = len({document_of(ex) for ex in source})
        notes.append(f"split: the {n_docs} {kind} of the test set are halved by sha256 of their name; trained on "
                     f"{len(examples)} {spec.source} items of the first {len(train_docs)}, tested on the items of the "
                     f"other {n_docs - len(train_docs)} in every language")
    else:
        examples = data.train(spec.source) or []
    if not examples:
        raise MetaXLMError(f"task {spec.name}: no training items for the source language {spec.source} "
                           f"({describe_file(spec.path('train', spec.source))})")
    return examples


def _zero_shot(runner: TaskRunner, data: TaskData, langs, seeds, notes) -> dict[str, list[float]]:
    train = _source_train(data, notes)
    tests = _tests(data, langs, notes)
    runs: dict[str, list[float]] = {lang: [] for lang in tests}
    for seed in seeds:
        for lang, score in runner.train_and_test(train, tests, seed, f"{data.spec.source}").items():
            runs[lang].append(score)
    return runs


def _supervised(runner: TaskRunner, data: TaskData, langs, seeds, notes) -> dict[str, list[float]]:
    tests = _tests(data, langs, notes)
    runs, untrained = {}, []
    for lang, examples in tests.items():
        train = data.train(lang)
        if not train:
            untrained.append(lang)
            continue
        runs[lang] = [runner.train_and_test(train, {lang: examples}, seed, lang)[lang] for seed in seeds]
    if untrained:
        notes.append(f"supervised: no train file for {', '.join(untrained)} (not scored)")
    return runs


def _translate_train(runner: TaskRunner, data: TaskData, langs, seeds, notes) -> dict[str, list[float]]:
    spec = data.spec
    source = _source_train(data, notes)
    tests = _tests(data, langs, notes)
    runs, untrained, switched = {}, [], []
    for lang, examples in tests.items():
        if lang == spec.source:
            items = source
        else:
            # with test_half (XQuAD), the language's own items of the training documents: human translations of
            # the English training items, with the same ids
            translated = cap(data.train_half(lang) or [], spec.max_train_items) \
                if spec.train_from == "test_half" else data.train(lang, "translate_train")
            if not translated:
                untrained.append(lang)
                continue
            items = [*source, *translated]
            if spec.code_switch != "none":
                items, pairs = code_switched_items(runner.new_task(source), source, translated, spec.code_switch)
                if pairs:
                    switched.append(f"{lang} {pairs}")
        label = spec.source if lang == spec.source else f"{spec.source}+{lang}"
        runs[lang] = [runner.train_and_test(items, {lang: examples}, seed, label)[lang] for seed in seeds]
    if untrained:
        notes.append(f"translate_train: no translated train file for {', '.join(untrained)} (not scored)")
    if switched:
        notes.append(f"code_switch: {spec.code_switch}: code-switched pairs (Pan et al. 2021) per language, "
                     f"{RECIPE_NOTES[spec.code_switch]}: {', '.join(switched)}")
    return runs


def transfer_matrix(runner: TaskRunner, data: TaskData, langs, seeds, notes) -> dict:
    spec = data.spec
    halves = (spec.matrix_train_from or spec.train_from) == "test_half"
    tests = {lang: examples for lang in langs if (examples := data.test(lang, halves))}
    if missing := [lang for lang in langs if lang not in tests]:
        notes.append(f"no test items for {', '.join(missing)} (null columns)")
    scores, stds, sources = [], [], {}
    for lang in langs:
        train, origin = matrix_training_data(data, lang)
        sources[lang] = origin if train is None else f"{origin} ({len(train)} items)"
        if train is None:
            scores.append([math.nan] * len(langs))
            stds.append([math.nan] * len(langs))
            continue
        per_seed = [runner.train_and_test(train, tests, seed, f"from {lang}") for seed in seeds]
        stats = summarize({t: [s[t] for s in per_seed] for t in tests}, None)["per_language"]
        scores.append([stats[t]["mean"] if t in stats else math.nan for t in langs])
        stds.append([stats[t]["std"] if t in stats else math.nan for t in langs])
    if halves:
        notes.append("every source trains on its test items of half of the documents; targets are tested on the "
                     "other half")
    return {"type": spec.type, "metric": spec.metric, "report_hints": get_task(spec.type).report_hints,
            "scenario": "transfer_matrix", "seeds": list(seeds),
            "languages": list(langs), "scores": scores, "std": stds, "train_data": sources}


SCENARIO_RUNS = {"zero_shot": _zero_shot, "supervised": _supervised, "translate_train": _translate_train}
