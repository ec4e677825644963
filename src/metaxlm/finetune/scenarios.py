"""Fine-tuning scenarios, several seeds each, summarized as one task entry of the results schema.

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

import hashlib
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from metaxlm.compute.devices import compute_device
from metaxlm.compute.precision import cpu_model
from metaxlm.config import RECORDED_OUTPUTS
from metaxlm.errors import DataError, MetaXLMError
from metaxlm.finetune.checkpoint import Checkpoints
from metaxlm.finetune.inference import kept_precision, resolved_precision
from metaxlm.finetune.models import load_finetune_tokenizer, load_model
from metaxlm.finetune.spec import TaskSpec
from metaxlm.finetune.tasks import Task, get_task
from metaxlm.finetune.trainer import finetune, predict, set_seed
from metaxlm.io import atomic_dir, atomic_write_text, json_safe
from metaxlm.models.loading import quiet_transformers
from metaxlm.records import json_text
from metaxlm.roots import missing_data_hint
from metaxlm.run import code as run_code
from metaxlm.vocab.load import save_tokenizer

SCENARIOS = ("zero_shot", "supervised", "translate_train", "transfer_matrix")


# -- data ----------------------------------------------------------------------------------------------------

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

    def _halves(self) -> tuple[set[str], set[str]]:
        if self.half is None:
            source = self.load("test", self.spec.source)
            if not source:
                raise MetaXLMError(f"task {self.spec.name}: test_half needs the source language's test file "
                                   f"({_where(self.spec.path('test', self.spec.source))})")
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
            examples = [ex for ex in examples if ex.id in self._halves()[1]]
        return None if examples is None else cap(examples, self.spec.max_test_items)

    def train_half(self, lang: str) -> list | None:
        examples = self.load("test", lang)
        if examples is None:
            return None
        # QA test items whose answer could not be located (start -1) cannot be trained on
        return [ex for ex in examples if ex.id in self._halves()[0] and _trainable(ex)]

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


def _where(path: Path | None) -> str:
    """A task file as an error names it: a missing one says so, and, inside the benchmark-data root, which root
    and where to get the data (metaxlm.roots)."""
    return f"{path}: no such file{missing_data_hint(path)}" if _missing(path) else str(path)


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
                               f"({_where(path)})")
        return
    paths = [spec.path("test", lang) for lang in _task_languages(spec, languages)]
    if paths and all(_missing(path) for path in paths):
        raise MetaXLMError(f"task {spec.name}: no test file for any of its languages ({_where(paths[0])}, ...)")


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
_RECIPE_NOTES = {"paper": "with the English items, instead of the translated originals",
                 "pairs_only": "without the English items, instead of the translated originals",
                 "originals": "with the English items and the translated originals"}


# -- results -------------------------------------------------------------------------------------------------

def _stat(values: Sequence[float], *, runs: bool = False) -> dict:
    """{"mean", "std"} over seeds (NaN for no values), and the values themselves as "runs" when asked."""
    from metaxlm.metrics import mean_std

    out = {k: mean_std(values)[k] for k in ("mean", "std")} if values else {"mean": math.nan, "std": math.nan}
    return {**out, "runs": list(values)} if runs else out


def summarize(runs: dict[str, list[float]], source: str | None) -> dict:
    """per_language mean/std/runs, and over seeds: the average over languages, the average over target
    languages and the transfer gap (source minus mean target), each computed per seed then as mean ± std."""
    from metaxlm.metrics import transfer_gap

    out: dict = {"per_language": {lang: _stat(v, runs=True) for lang, v in runs.items()}}
    if not runs:
        return out
    n_seeds = min(len(v) for v in runs.values())
    per_seed = [{lang: v[i] for lang, v in runs.items()} for i in range(n_seeds)]
    out["average"] = _stat([sum(s.values()) / len(s) for s in per_seed])
    if source is not None and source in runs and len(runs) > 1:
        out["target_average"] = _stat([sum(v for k, v in s.items() if k != source) / (len(s) - 1) for s in per_seed])
        out["transfer_gap"] = _stat([transfer_gap(s, source) for s in per_seed])
    return out


# -- running -------------------------------------------------------------------------------------------------

def _run_name(label: str, seed: int) -> str:
    """The file name (without suffix) of the run of (label, seed): its record and its checkpoints."""
    return f"{label.replace(' ', '_').replace('/', '_')}-seed{seed}"


def _record_name(label: str, seed: int) -> str:
    """The file name of the finished-run record of (label, seed), in a run's store and in an archive alike."""
    return f"{_run_name(label, seed)}.json"


def _read_record(path: Path) -> tuple[str, dict]:
    """(key, detail) of a finished-run record, or a DataError naming the file."""
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        key, detail = kept["key"], kept["detail"]
        dict(detail["scores"])
        int(detail["seed"])
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as err:
        raise DataError(path, None, f"not a finished-run record ({type(err).__name__}: {err})") from None
    return key, detail


class _Runner:
    def __init__(self, spec: TaskSpec, model_dir: Path, tokenizer, progress: bool, save_dir: Path | None = None,
                 runs_dir: Path | None = None, resume_key: str | None = None, archive_dir: Path | None = None):
        self.spec, self.model_dir, self.tokenizer, self.progress = spec, model_dir, tokenizer, progress
        self.save_dir = save_dir  # fine-tuned models are written here when given: <label>-seed<seed>/
        # each finished run is stored here under `resume_key` (what it was computed from), and reused by a rerun
        # with the same key: an interrupted task resumes after its last finished (language, seed)
        self.runs_dir, self.resume_key = runs_dir, resume_key
        # and recorded here too (results only), where a rerun on another machine finds it: evaluate.finished_runs
        self.archive_dir = archive_dir
        self.details: list[dict] = []
        self.chance: dict[str, float] = {}  # test language -> the majority-class score (Task.constant_predictions)

    def _run_files(self, label: str, seed: int) -> list[Path]:
        """Where a finished run is stored: the run's own store, then the archive (evaluate.finished_runs)."""
        if self.resume_key is None:
            return []
        return [folder / _record_name(label, seed) for folder in (self.runs_dir, self.archive_dir)
                if folder is not None]

    def _checkpoints(self, label: str, seed: int) -> Checkpoints | None:
        """Where the run of (label, seed) keeps its checkpoints (beside its finished-run record); None when the
        runner stores no runs."""
        if self.runs_dir is None or self.resume_key is None:
            return None
        return Checkpoints(self.runs_dir / f"{_run_name(label, seed)}.ckpt", self.resume_key)

    def _reusable(self, label: str, seed: int) -> tuple[dict, Path] | None:
        """A stored run of (label, seed) computed from exactly this key (and with its saved model when models are
        saved), and the file it came from."""
        for path in self._run_files(label, seed):
            if not path.exists():
                continue
            key, detail = _read_record(path)
            saved = detail.get("saved_model")
            if key == self.resume_key and (self.save_dir is None or (saved and Path(saved).exists())):
                return detail, path
        return None

    def _check_archive(self, label: str, seed: int) -> None:
        """Before training: the archive's record of (label, seed), when it has one, was computed from this key.
        A record of other task settings or model files (e.g. a pretraining redone on another CPU kind, which gives
        other bytes) is never replaced: the archive's records of one task must stay one series."""
        if self.archive_dir is None or self.resume_key is None:
            return
        path = self.archive_dir / _record_name(label, seed)
        if not path.exists() or (key := _read_record(path)[0]) == self.resume_key:
            return
        raise DataError(path, None, f"holds a finished run of other task settings or model files (key {key}; this "
                                    f"run's is {self.resume_key}), which this run would replace: records of two "
                                    f"series are never mixed. Point evaluate.finished_runs at another directory "
                                    f"for this series, or remove the old records")

    def new_task(self, train_items: list) -> Task:
        task = get_task(self.spec.type)(self.tokenizer, self.spec.hyperparameters)
        task.spec = self.spec  # settings a task type may read (QA normalization, translation direction, ...)
        task.normalization = self.spec.qa_normalization
        task.fit_labels([ex for item in train_items for ex in (item if isinstance(item, tuple) else (item,))])
        return task

    def note_chance(self, tests: dict[str, list]) -> None:
        """The majority-class score of each test language not seen yet (a task type without one: none)."""
        task = get_task(self.spec.type)(self.tokenizer, self.spec.hyperparameters)
        task.spec, task.normalization = self.spec, self.spec.qa_normalization
        for lang, examples in tests.items():
            if lang not in self.chance and (constant := task.constant_predictions(examples)) is not None:
                self.chance[lang] = task.score(examples, constant, metric=self.spec.metric, lang=lang)

    def test(self, task: Task, model, tests: dict[str, list], label: str,
             precisions: dict[str, str]) -> tuple[dict[str, float], dict, dict, dict]:
        """The main metric per language, each language's `task.report` (further scores, signatures), what the
        model does in each language where it collapsed (`task.collapse`), and the predictions; in the precision
        `precisions` holds for "test" (a resumed run's), else the one chosen here (then recorded there)."""
        spec = self.spec
        hp = spec.hyperparameters
        chosen = kept_precision(precisions, "test", resolved_precision(model, hp, compute_device()))
        hp = hp.model_copy(update={"precision": chosen.precision})
        scores, reports, collapsed, predicted = {}, {}, {}, {}
        for lang, examples in tests.items():
            predictions = predicted[lang] = predict(model, task, examples, hp,
                                                    progress=self.progress, desc=f"{spec.name} test {lang}{label}")
            scores[lang] = task.score(examples, predictions, metric=spec.metric, lang=lang)
            if report := task.report(examples, predictions, lang=lang):
                reports[lang] = report
            if what := task.collapse(examples, predictions):
                collapsed[lang] = what
        return scores, reports, collapsed, predicted

    def curve_point(self, task: Task, tests: dict[str, list], predictions: dict, curve_tests: dict[str, list],
                    scores: dict, reports: dict) -> dict:
        """The curve's last point: the final test's scores, rescored on the curve's subset when it is one."""
        if all(len(curve_tests[lang]) == len(tests[lang]) for lang in tests):
            return {"scores": scores, "reports": _numbers(reports)}
        point: dict = {"scores": {}, "reports": {}}
        for lang, examples in curve_tests.items():
            chosen = subset_predictions(tests[lang], predictions[lang], examples)
            point["scores"][lang] = task.score(examples, chosen, metric=self.spec.metric, lang=lang)
            if report := task.report(examples, chosen, lang=lang):
                point["reports"][lang] = _numbers({lang: report})[lang]
        return point

    def train_and_test(self, train_items: list, tests: dict[str, list], seed: int, label: str) -> dict[str, float]:
        """Fine-tune a fresh model on `train_items` with `seed`; score on each test set (and, with
        hyperparameters.eval_steps, also after those steps: the run's `curve`). With a store of runs, the run is
        held by this process alone (`<run>.lock` beside its record): evaluations side by side on one run directory
        (metaxlm.run.lock) never fine-tune the same (language, seed) into the same files."""
        if self.runs_dir is None:
            return self._train_and_test(train_items, tests, seed, label)
        from metaxlm.run.lock import held

        name = _run_name(label, seed)
        with held(self.runs_dir / f"{name}.lock", f"fine-tuning {self.spec.name} {label} seed {seed}",
                  subject=f"fine-tuning run {self.runs_dir / name}",
                  hint="give evaluations side by side other seeds or languages (evaluate.seeds, data.languages)"):
            return self._train_and_test(train_items, tests, seed, label)

    def _train_and_test(self, train_items: list, tests: dict[str, list], seed: int, label: str) -> dict[str, float]:
        spec = self.spec
        hp = spec.hyperparameters
        self.note_chance(tests)
        if reused := self._reusable(label, seed):
            detail, path = reused
            self.details.append(detail)
            if self.progress:
                print(f"  {spec.name} {label} seed {seed}: reused the finished run ({path})", flush=True)
            if path.parent != self.runs_dir and self.runs_dir is not None:  # from the archive: the run keeps it too
                atomic_write_text(self.runs_dir / path.name, json_text(json_safe({"key": self.resume_key,
                                                                                  "detail": detail})))
            return detail["scores"]
        self._check_archive(label, seed)
        task = self.new_task(train_items)
        start = time.perf_counter()
        set_seed(seed)  # the new head's initialization is part of the run
        model = load_model(task, self.model_dir, train_items)
        losses: list[float] = []
        # the curve's points and the seconds spent scoring them: kept in the run's checkpoints, so a resumed run has
        # the points scored before its interruption
        checkpoints = self._checkpoints(label, seed)
        state = checkpoints.extra if checkpoints is not None else {}
        # the precision training and testing run in: one per run, kept in its checkpoints across a resume
        precisions = checkpoints.precision if checkpoints is not None else {}
        state.update(curve=[], testing=0.0)
        # the curve's test items (hyperparameters.curve_items): the same subset at every point
        curve_tests = {lang: cap(examples, hp.curve_items) for lang, examples in tests.items()}

        def on_step(step: int, total: int) -> None:
            if step in hp.eval_steps and step < total:  # the last step is the final test
                began = time.perf_counter()
                scores, reports, _, _ = self.test(task, model, curve_tests, f" @{step}", precisions)
                state["curve"].append({"step": step, "scores": scores, "reports": _numbers(reports)})
                state["testing"] += time.perf_counter() - began

        finetune(model, task, train_items, hp, seed=seed, progress=self.progress, history=losses,
                 desc=f"{spec.name} {label} seed {seed}", on_step=on_step if hp.eval_steps else None,
                 checkpoints=checkpoints, precisions=precisions)
        curve = state["curve"]
        # a resumed run: the seconds up to its last checkpoint, and this process's since
        before = checkpoints.seconds_before if checkpoints is not None else 0.0
        trained = before + time.perf_counter() - start - state["testing"]
        scores, reports, collapsed, predictions = self.test(task, model, tests, "", precisions)
        if hp.eval_steps:
            curve.append({"step": len(losses), **self.curve_point(task, tests, predictions, curve_tests,
                                                                  scores, reports)})
        detail = {"label": label, "seed": seed, "train_items": len(train_items), "steps": len(losses),
                  "first_loss": losses[0], "last_loss": losses[-1], "train_seconds": round(trained, 1),
                  "total_seconds": round(before + time.perf_counter() - start, 1), "scores": scores,
                  "machine": {"cpu": cpu_model(), "threads": torch.get_num_threads()}, "precision": dict(precisions),
                  "code": made_by()}
        if hp.curve_items is not None:
            detail["curve_items"] = {lang: len(examples) for lang, examples in curve_tests.items()}
        if reports:
            detail["reports"] = reports
        if items := run_items(task, tests, predictions, spec.metric):
            detail["items"] = items
        if collapsed:
            detail["collapsed"] = collapsed
        outputs = {lang: rows for lang, examples in tests.items()
                   if (rows := task.outputs(examples, predictions[lang]))}
        if outputs:
            detail["outputs"] = {lang: rows[:RECORDED_OUTPUTS] for lang, rows in outputs.items()}
            if self.runs_dir is not None:  # every output, beside the record (which a rerun reuses without them)
                atomic_write_text(self.runs_dir / f"{_run_name(label, seed)}.outputs.jsonl", "".join(
                    json.dumps({"lang": lang, **row}, ensure_ascii=False) + "\n"
                    for lang, rows in outputs.items() for row in rows))
        if checkpoints is not None and checkpoints.resumed_at:
            detail["resumed_at_steps"] = checkpoints.resumed_at
        if curve:
            detail["curve"] = curve
        if self.save_dir is not None:
            detail["saved_model"] = str(save_finetuned(model, task.tokenizer, self.save_dir / f"{label}-seed{seed}",
                                                       spec.hyperparameters))
        self.details.append(detail)
        for path in self._run_files(label, seed):
            atomic_write_text(path, json_text(json_safe({"key": self.resume_key, "detail": detail})))
        if checkpoints is not None:  # recorded: its checkpoints are of no more use
            checkpoints.remove()
        if self.progress:
            shown = " ".join(f"{k} {v:.3f}" for k, v in scores.items())
            print(f"  {spec.name} {label} seed {seed}: {len(train_items)} items, {len(losses)} steps, "
                  f"{time.perf_counter() - start:.0f}s; {spec.metric} {shown}", flush=True)
        return scores


def run_items(task: Task, tests: dict[str, list], predictions: dict, metric: str) -> dict[str, dict]:
    """One run's per-item outcomes of its final test, {lang: {metric name: {"kind", "rows"}}} (Task.item_rows; none
    for a task type without them): kept in the run's record, so that a reused run has them too, and gathered over
    the seeds by `item_outcomes` for the report's paired bootstrap."""
    out: dict[str, dict] = {}
    for lang, examples in tests.items():
        found = task.item_rows(examples, predictions[lang], metric=metric, lang=lang)
        if not found:
            continue
        if metric not in found:
            raise MetaXLMError(f"task type {task.name}: item_rows gives no rows of the metric {metric!r} it is scored "
                               f"by (only {', '.join(found)})")
        out[lang] = {name: {"kind": kind, "rows": rows} for name, (kind, rows) in found.items()}
    return out


def item_outcomes(details: list[dict]) -> dict:
    """A task entry's `items` from its runs' (`run_items`): {metric name: {"kind", "per_language": {lang: {"seeds",
    "rows"}}}}, the rows of each seed in the order of the runs, which is that of the language's `runs` scores. A run
    recorded before per-item outcomes were (it has none) is left out, and its seed with it."""
    out: dict[str, dict] = {}
    for run in details:
        for lang, metrics in run.get("items", {}).items():
            for name, found in metrics.items():
                entry = out.setdefault(name, {"kind": found["kind"], "per_language": {}})
                if entry["kind"] != found["kind"]:
                    raise MetaXLMError(f"items of {name}: runs record kinds {entry['kind']!r} and {found['kind']!r}")
                per = entry["per_language"].setdefault(lang, {"seeds": [], "rows": []})
                per["seeds"].append(run["seed"])
                per["rows"].append(found["rows"])
    return out


def save_finetuned(model, tokenizer, out_dir: Path, hp=None) -> Path:
    """A fine-tuned model and its tokenizer as an HF directory (safetensors; replaced atomically): an encoder-decoder
    loads with AutoModelForSeq2SeqLM and `metaxlm translate` reads it — with the decoding settings of `hp` (the
    Hyperparameters it was scored with) recorded, so it translates as it was scored —, a task model with its Auto
    class."""
    if getattr(model.config, "is_encoder_decoder", False):
        from metaxlm.finetune.translate import record_decoding
        from metaxlm.models.veco_export import save_seq2seq

        if hp is not None:
            record_decoding(model, num_beams=hp.num_beams, length_penalty=hp.length_penalty,
                            no_repeat_ngram_size=hp.no_repeat_ngram_size)
        return save_seq2seq(model, tokenizer, out_dir)
    with atomic_dir(out_dir) as tmp, quiet_transformers():  # no "Writing model shards" bar
        model.save_pretrained(str(tmp))
        save_tokenizer(tokenizer, tmp)
    return out_dir


def _numbers(reports: dict[str, dict]) -> dict[str, dict[str, float]]:
    return {lang: {k: v for k, v in r.items() if isinstance(v, int | float)} for lang, r in reports.items()}


def machine_text(run: dict) -> str:
    """Where a run trained, e.g. "AMD EPYC · 1 thread · fp32" ("train bf16, test fp32" when they differ)."""
    machine = run.get("machine") or {}
    threads = machine.get("threads")
    parts = [str(machine.get("cpu") or "?")] + ([f"{threads} thread{'s' if threads != 1 else ''}"] if threads else [])
    precision = run.get("precision") or {}
    if len(set(precision.values())) == 1:
        parts.append(next(iter(precision.values())))
    elif precision:
        parts.append(", ".join(f"{part} {p}" for part, p in precision.items()))
    return " · ".join(parts)


def report_summary(details: list[dict], metric: str) -> dict:
    """What the runs' reports and curves add to a task entry: `reports` (per language, each further score as
    mean/std/runs over the runs, and the `signatures` saying how they were computed) and `curve` (per language,
    the steps and each score's mean/std/runs at each step), `training` (the runs' steps, training seconds and the
    machines they ran on) and `examples` (per language, the outputs the lowest seed's run recorded:
    `Task.outputs`' first rows)."""
    out: dict = {}
    reports: dict[str, dict[str, list[float]]] = {}
    signatures: dict[str, dict] = {}
    curves: dict[str, dict[int, dict[str, list[float]]]] = {}
    for run in details:
        for lang, report in run.get("reports", {}).items():
            for key, value in report.items():
                if isinstance(value, int | float):
                    reports.setdefault(lang, {}).setdefault(key, []).append(value)
                else:
                    signatures.setdefault(lang, {})[key] = value
        for point in run.get("curve", []):
            for lang, score in point["scores"].items():
                at = curves.setdefault(lang, {}).setdefault(point["step"], {})
                for key, value in {metric: score, **point["reports"].get(lang, {})}.items():
                    at.setdefault(key, []).append(value)
    if reports:
        out["reports"] = {lang: {**{k: _stat(v, runs=True) for k, v in r.items()}, **signatures.get(lang, {})}
                          for lang, r in reports.items()}
    timed = [run for run in details if "train_seconds" in run]
    if timed:  # what the runs cost, and where they ran
        by_kind: dict[str, list[float]] = {}
        for run in timed:
            by_kind.setdefault(machine_text(run), []).append(run["train_seconds"])
        out["training"] = {"runs": len(timed), "steps": sorted({run["steps"] for run in timed}),
                           "train_seconds": _stat([run["train_seconds"] for run in timed]),
                           "machines": {kind: len(seconds) for kind, seconds in by_kind.items()},
                           # a mean over two kinds of machine is no machine's time: each kind's own
                           "train_seconds_by_machine": {kind: _stat(seconds) for kind, seconds in by_kind.items()}}
    examples: dict[str, dict] = {}
    for run in sorted(details, key=lambda r: r["seed"]):  # the lowest seed's outputs: a rule, not a choice
        for lang, rows in run.get("outputs", {}).items():
            examples.setdefault(lang, {"seed": run["seed"], "rows": rows})
    if examples:
        out["examples"] = examples
    if curves:
        out["curve"] = {}
        for lang, points in curves.items():
            steps = sorted(points)
            keys = list(dict.fromkeys(k for s in steps for k in points[s]))
            out["curve"][lang] = {"steps": steps,
                                  **{k: [_stat(points[s].get(k, []), runs=True) for s in steps] for k in keys}}
    return out


def collapsed_runs(details: list[dict]) -> dict[str, list[dict]]:
    """Per test language, the runs whose model collapsed (Task.collapse): seed, training label, what it does."""
    out: dict[str, list[dict]] = {}
    for detail in details:
        for lang, what in detail.get("collapsed", {}).items():
            out.setdefault(lang, []).append({"seed": detail["seed"], "trained_on": detail["label"], "what": what})
    return out


def _task_languages(spec: TaskSpec, languages: Sequence[str] | None) -> list[str]:
    """The languages a task runs in: `languages` (default: the spec's) that the task has, its source first."""
    langs = [lang for lang in (languages or spec.languages) if lang in spec.languages]
    if spec.source not in langs:
        langs.insert(0, spec.source)
    return langs


def _task_entry(spec: TaskSpec, scenario: str, seeds: Sequence[int], runs: dict[str, list[float]],
                details: list[dict]) -> dict:
    """The task entry of a fine-tuning scenario (not the transfer matrix) from its runs' scores and details."""
    entry = {"type": spec.type, "metric": spec.metric, "scenario": scenario, "source": spec.source,
             "seeds": list(seeds),
             "report_hints": get_task(spec.type).report_hints}
    entry.update(summarize(runs, None if scenario == "supervised" else spec.source))
    entry.update(report_summary(details, spec.metric))
    if items := item_outcomes(details):  # each test item's outcome per seed: the report's paired bootstrap
        entry["items"] = items
    if entry["report_hints"].get("directional"):  # which way it translates: source→language, or back
        # what its results translate from and into: the one language every result has, None where it is each
        # result's own (its per_language key); `reverse` translates each language into the spec's source
        fixed = {"source": spec.source, "target": None} if spec.direction == "forward" else \
            {"source": None, "target": spec.source}
        entry.update(direction=spec.direction, **fixed)
    return entry


# The code a fine-tuning run is made by (metaxlm.run.code): this module and everything it imports.
RUN_CODE = ("metaxlm.finetune.scenarios",)


def made_by() -> dict:
    """What a finished run records of the code it was made by: its fingerprint (RUN_CODE) and the commit. A run is
    reused whatever code runs later (it costs hours; see metaxlm.evaluation.recipe._cached), and an entry with runs
    of other code says so (other_code_note). A run resumed from its checkpoints records the code it finished with."""
    from metaxlm.run.info import git_commit

    return {"fingerprint": run_code.code_fingerprint(*RUN_CODE), **git_commit()}


def other_code_note(details: list[dict]) -> str:
    """A note naming the runs made by other fine-tuning code than this process's, by commit ("" when none; a run
    recorded before runs recorded their code is not known to differ)."""
    current = run_code.code_fingerprint(*RUN_CODE)
    by_commit: dict[str, list[str]] = {}
    for run in details:
        code = run.get("code") or {}
        if code.get("fingerprint") not in (None, current):
            commit = (code.get("commit") or "?")[:7] + (" dirty" if code.get("dirty") else "")
            by_commit.setdefault(commit, []).append(f"{run.get('label')} seed {run.get('seed')}")
    if not by_commit:
        return ""
    runs = "; ".join(f"{', '.join(names)} (commit {commit})" for commit, names in by_commit.items())
    return (f"runs made by other fine-tuning code than this one's, reused: {runs}; delete a run's record to make it "
            f"again")


def _entry_notes(spec: TaskSpec, notes: list[str], runner: _Runner) -> dict:
    """What every task entry adds after its runs: notes, the curve's test-item count, chance levels, collapses."""
    out: dict = {"note": "; ".join(n for n in [*notes, other_code_note(runner.details)] if n)}
    if spec.hyperparameters.eval_steps and spec.hyperparameters.curve_items is not None:
        out["curve_items"] = spec.hyperparameters.curve_items  # the curve's points are on this many test items
    if runner.chance:
        out["chance"] = runner.chance
    if collapsed := collapsed_runs(runner.details):
        out["collapsed"] = collapsed
    return out


def run_task(spec: TaskSpec, model_dir: str | Path, out_dir: str | Path | None = None, *,
             scenario: str = "zero_shot", seeds: Sequence[int] | None = None, languages: Sequence[str] | None = None,
             tokenizer_dir: str | Path | None = None, progress: bool = True,
             save_models: str | Path | None = None, resume_key: str | None = None,
             finished_runs: str | Path | None = None) -> dict:
    """Run one scenario of one task on the model in `model_dir`; return the task entry of the results schema
    (for transfer_matrix: the matrix entry, {"languages", "scores", "std", ...}). `languages` (default: the
    spec's) are intersected with the languages the task has data for. Details of every run go to
    `out_dir/<scenario>.json` when out_dir is given; each fine-tuned model (with its tokenizer) to
    `save_models/<language>-seed<seed>/` when that is given. With `resume_key` (a fingerprint of what the runs are
    computed from: the spec, the model's weights, the scenario) and `out_dir`, every finished run is stored in
    `out_dir/<scenario>-runs/` and a rerun with the same key reuses it instead of fine-tuning again; with
    `finished_runs` also in `finished_runs/<scenario>-runs/` (results only), where a rerun elsewhere finds it."""
    if scenario not in SCENARIOS:
        raise MetaXLMError(f"unknown scenario {scenario!r} (known: {', '.join(SCENARIOS)})")
    if scenario not in get_task(spec.type).scenarios:
        raise MetaXLMError(f"task {spec.name}: scenario {scenario} does not apply to {spec.type} tasks (they run: "
                           f"{', '.join(get_task(spec.type).scenarios)})")
    seeds = list(seeds if seeds is not None else spec.seeds)
    if not seeds:
        raise MetaXLMError("no seeds to run")
    langs = _task_languages(spec, languages)
    notes = [spec.note] if spec.note else []
    if skipped := [lang for lang in (languages or []) if lang not in spec.languages]:
        notes.append(f"no {spec.name} data for {', '.join(skipped)}")
    check_source_data(spec, scenario, langs)
    runner = _Runner(spec, Path(model_dir), load_finetune_tokenizer(model_dir, tokenizer_dir), progress,
                     None if save_models is None else Path(save_models),
                     None if out_dir is None else Path(out_dir) / f"{scenario}-runs", resume_key,
                     None if finished_runs is None else Path(finished_runs) / f"{scenario}-runs")
    data = TaskData(spec)
    start = time.perf_counter()
    if scenario == "transfer_matrix":
        entry = _transfer_matrix(runner, data, langs, seeds, notes)
    else:
        runs = SCENARIO_RUNS[scenario](runner, data, langs, seeds, notes)
        entry = _task_entry(spec, scenario, seeds, runs, runner.details)
    entry.update(_entry_notes(spec, notes, runner))
    if collapsed := entry.get("collapsed"):
        runs = [f"{lang} seed {run['seed']}" for lang, found in collapsed.items() for run in found]
        first = next(iter(collapsed.values()))[0]["what"]
        print(f"warning: {spec.name} ({scenario}): fine-tuning collapsed in {', '.join(runs)} (e.g. {first}): likely "
              f"too few steps or too high a learning rate", file=sys.stderr, flush=True)
    if out_dir is not None:
        atomic_write_text(Path(out_dir) / f"{scenario}.json", json_text(json_safe({
            "task": spec.model_dump(mode="json"), "model_dir": str(model_dir), "entry": entry,
            "seconds": round(time.perf_counter() - start, 1), "runs": runner.details})))
    return entry


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
        train_docs = {document_of(ex) for ex in source if ex.id in data._halves()[0]}
        n_docs = len({document_of(ex) for ex in source})
        notes.append(f"split: the {n_docs} {kind} of the test set are halved by sha256 of their name; trained on "
                     f"{len(examples)} {spec.source} items of the first {len(train_docs)}, tested on the items of the "
                     f"other {n_docs - len(train_docs)} in every language")
    else:
        examples = data.train(spec.source) or []
    if not examples:
        raise MetaXLMError(f"task {spec.name}: no training items for the source language {spec.source} "
                           f"({_where(spec.path('train', spec.source))})")
    return examples


def _zero_shot(runner: _Runner, data: TaskData, langs, seeds, notes) -> dict[str, list[float]]:
    train = _source_train(data, notes)
    tests = _tests(data, langs, notes)
    runs: dict[str, list[float]] = {lang: [] for lang in tests}
    for seed in seeds:
        for lang, score in runner.train_and_test(train, tests, seed, f"{data.spec.source}").items():
            runs[lang].append(score)
    return runs


def _supervised(runner: _Runner, data: TaskData, langs, seeds, notes) -> dict[str, list[float]]:
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


def _translate_train(runner: _Runner, data: TaskData, langs, seeds, notes) -> dict[str, list[float]]:
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
                     f"{_RECIPE_NOTES[spec.code_switch]}: {', '.join(switched)}")
    return runs


def _transfer_matrix(runner: _Runner, data: TaskData, langs, seeds, notes) -> dict:
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


# -- a task entry from finished-run records --------------------------------------------------------------------

class _RecordReader(_Runner):
    """A runner that trains nothing: each (label, seed) run the scenario asks for is read from its finished-run
    record in `folder` (`evaluate.finished_runs`), or listed in `missing` (its scores NaN). The scenario functions
    above decide which runs a task has, here as when it runs."""

    def __init__(self, spec: TaskSpec, folder: Path):
        super().__init__(spec, Path(), None, progress=False)
        self.folder = folder
        self.missing: list[tuple[str, int]] = []
        self.first: tuple[str, Path] | None = None  # the first record's key and file: every other must have that key

    def note_chance(self, tests: dict[str, list]) -> None:  # needs the model's tokenizer: not known here
        pass

    def new_task(self, train_items: list) -> Task:
        raise MetaXLMError(f"task {self.spec.name}: code-switched items need the model's tokenizer; its entry cannot "
                           "be assembled from finished-run records alone")

    def train_and_test(self, train_items: list, tests: dict[str, list], seed: int, label: str) -> dict[str, float]:
        path = self.folder / _record_name(label, seed)
        if not path.exists():
            self.missing.append((label, seed))
            return {lang: math.nan for lang in tests}
        key, detail = _read_record(path)
        scores = dict(detail["scores"])
        self.first = self.first or (key, path)
        if key != self.first[0]:  # runs of other settings or another model: never averaged together
            raise DataError(path, None, f"the finished runs of task {self.spec.name} were computed from different "
                                        f"task settings or model files (key {self.first[0]} in {self.first[1].name}, "
                                        f"{key} in {path.name}); keep the runs of one")
        self.details.append(detail)
        return scores


def recorded_task_entry(spec: TaskSpec, folder: str | Path, *, scenario: str, seeds: Sequence[int],
                        languages: Sequence[str] | None = None) -> dict:
    """A task's entry of the results schema from the finished-run records in `folder` (the task's
    `evaluate.finished_runs/<model>/<task>/` directory; its `<scenario>-runs/` files) — the runs `run_task` would
    make, those recorded so far. With runs missing, the entry's `to_come` lists them ("fr seed 0") and the averages
    over languages are left out (they would mix seeds); with none recorded, it has no scores.
    The records' key is not checked against a model (none is read), only that every record has the same one."""
    if scenario not in SCENARIO_RUNS:
        raise MetaXLMError(f"task {spec.name}: an entry from finished-run records covers the scenarios "
                           f"{', '.join(SCENARIO_RUNS)}, not {scenario}")
    seeds = list(seeds)
    langs = _task_languages(spec, languages)
    notes = [spec.note] if spec.note else []
    reader = _RecordReader(spec, Path(folder) / f"{scenario}-runs")
    runs = SCENARIO_RUNS[scenario](reader, TaskData(spec), langs, seeds, notes)
    runs = {lang: kept for lang, scores in runs.items() if (kept := [s for s in scores if not math.isnan(s)])}
    recorded = sorted({detail["seed"] for detail in reader.details})  # the seeds its cells average over
    entry = _task_entry(spec, scenario, recorded, runs, reader.details)
    if reader.missing:
        for key in ("average", "target_average", "transfer_gap"):
            entry.pop(key, None)
        entry["to_come"] = [f"{label} seed {seed}" for label, seed in reader.missing]
    entry.update(_entry_notes(spec, notes, reader))
    return entry
