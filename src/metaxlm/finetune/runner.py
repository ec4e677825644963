"""Fine-tuning a task: the training runner, which fine-tunes and tests each run a scenario asks for (a TaskRunner,
metaxlm.finetune.scenarios), with its curve, outputs and saved model, reusing and recording finished runs in the
run store (metaxlm.finetune.run_store); and `run_task`, one scenario of one task on one model, several seeds each,
summarized as one task entry of the results schema (metaxlm.finetune.summaries)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from metaxlm.compute.devices import compute_device
from metaxlm.compute.precision import cpu_model
from metaxlm.config import RECORDED_OUTPUTS
from metaxlm.errors import MetaXLMError
from metaxlm.finetune.inference import kept_precision, resolved_precision
from metaxlm.finetune.models import load_finetune_tokenizer, load_model
from metaxlm.finetune.run_store import RunStore, run_name
from metaxlm.finetune.scenarios import SCENARIO_RUNS, SCENARIOS, transfer_matrix
from metaxlm.finetune.spec import TaskSpec
from metaxlm.finetune.summaries import entry_notes, made_by, report_numbers, run_items, task_entry
from metaxlm.finetune.task_data import TaskData, cap, check_source_data, subset_predictions, task_languages
from metaxlm.finetune.tasks import Task, get_task
from metaxlm.finetune.trainer import finetune, predict, set_seed
from metaxlm.io import atomic_dir, atomic_write_text, json_safe
from metaxlm.models.loading import quiet_transformers
from metaxlm.records import json_text
from metaxlm.vocab.load import save_tokenizer


class TrainingRunner:
    """The runner that trains (a TaskRunner): each run fine-tunes a fresh model on the scenario's training items and
    scores it on its test sets, unless `store` has it finished already."""

    def __init__(self, spec: TaskSpec, model_dir: Path, tokenizer, progress: bool, save_dir: Path | None = None,
                 store: RunStore | None = None):
        self.spec, self.model_dir, self.tokenizer, self.progress = spec, model_dir, tokenizer, progress
        self.save_dir = save_dir  # fine-tuned models are written here when given: <label>-seed<seed>/
        # where finished runs are reused from and recorded: the run's own store and the archive
        self.store = store if store is not None else RunStore()
        self.details: list[dict] = []
        self.chance: dict[str, float] = {}  # test language -> the majority-class score (Task.constant_predictions)
        self._scorer: Task | None = None  # an unfitted task, for the majority-class scores

    def _task(self) -> Task:
        task = get_task(self.spec.type)(self.tokenizer, self.spec.hyperparameters)
        task.spec = self.spec  # settings a task type may read (QA normalization, translation direction, ...)
        task.normalization = self.spec.qa_normalization
        return task

    def new_task(self, train_items: list) -> Task:
        task = self._task()
        task.fit_labels([ex for item in train_items for ex in (item if isinstance(item, tuple) else (item,))])
        return task

    def note_chance(self, tests: dict[str, list]) -> None:
        """The majority-class score of each test language not seen yet (a task type without one: none)."""
        if self._scorer is None:
            self._scorer = self._task()
        task = self._scorer
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
            return {"scores": scores, "reports": report_numbers(reports)}
        point: dict = {"scores": {}, "reports": {}}
        for lang, examples in curve_tests.items():
            chosen = subset_predictions(tests[lang], predictions[lang], examples)
            point["scores"][lang] = task.score(examples, chosen, metric=self.spec.metric, lang=lang)
            if report := task.report(examples, chosen, lang=lang):
                point["reports"][lang] = report_numbers({lang: report})[lang]
        return point

    def train_and_test(self, train_items: list, tests: dict[str, list], seed: int, label: str) -> dict[str, float]:
        """Fine-tune a fresh model on `train_items` with `seed`; score on each test set (and, with
        hyperparameters.eval_steps, also after those steps: the run's `curve`). With a store of runs, the run is
        held by this process alone (`<run>.lock` beside its record): evaluations side by side on one run directory
        (metaxlm.run.lock) never fine-tune the same (language, seed) into the same files."""
        if self.store.folder is None:
            return self._train_and_test(train_items, tests, seed, label)
        from metaxlm.run.lock import held

        name = run_name(label, seed)
        with held(self.store.folder / f"{name}.lock", f"fine-tuning {self.spec.name} {label} seed {seed}",
                  subject=f"fine-tuning run {self.store.folder / name}",
                  hint="give evaluations side by side other seeds or languages (evaluate.seeds, data.languages)"):
            return self._train_and_test(train_items, tests, seed, label)

    def _train_and_test(self, train_items: list, tests: dict[str, list], seed: int, label: str) -> dict[str, float]:
        spec = self.spec
        hp = spec.hyperparameters
        self.note_chance(tests)
        if reused := self.store.reusable(label, seed, saving_models=self.save_dir is not None):
            detail, path = reused
            self.details.append(detail)
            if self.progress:
                print(f"  {spec.name} {label} seed {seed}: reused the finished run ({path})", flush=True)
            self.store.keep(path, detail)  # one from the archive: the run's own store keeps it too
            return detail["scores"]
        self.store.check_archive(label, seed)
        task = self.new_task(train_items)
        start = time.perf_counter()
        set_seed(seed)  # the new head's initialization is part of the run
        model = load_model(task, self.model_dir, train_items)
        losses: list[float] = []
        # the curve's points and the seconds spent scoring them: kept in the run's checkpoints, so a resumed run has
        # the points scored before its interruption
        checkpoints = self.store.checkpoints(label, seed)
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
                state["curve"].append({"step": step, "scores": scores, "reports": report_numbers(reports)})
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
            if self.store.folder is not None:  # every output, beside the record (which a rerun reuses without them)
                atomic_write_text(self.store.folder / f"{run_name(label, seed)}.outputs.jsonl", "".join(
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
        self.store.record(label, seed, detail)
        if checkpoints is not None:  # recorded: its checkpoints are of no more use
            checkpoints.remove()
        if self.progress:
            shown = " ".join(f"{k} {v:.3f}" for k, v in scores.items())
            print(f"  {spec.name} {label} seed {seed}: {len(train_items)} items, {len(losses)} steps, "
                  f"{time.perf_counter() - start:.0f}s; {spec.metric} {shown}", flush=True)
        return scores


def save_finetuned(model, tokenizer, out_dir: Path, hp=None) -> Path:
    """A fine-tuned model and its tokenizer as an HF directory (safetensors; replaced atomically): an encoder-decoder
    loads with AutoModelForSeq2SeqLM and `metaxlm translate` reads it — with the decoding settings of `hp` (the
    Hyperparameters it was scored with) recorded, so it translates as it was scored —, a task model with its Auto
    class."""
    if getattr(model.config, "is_encoder_decoder", False):
        from metaxlm.finetune.translate import record_decoding
        from metaxlm.models.seq2seq import save_seq2seq

        if hp is not None:
            record_decoding(model, num_beams=hp.num_beams, length_penalty=hp.length_penalty,
                            no_repeat_ngram_size=hp.no_repeat_ngram_size)
        return save_seq2seq(model, tokenizer, out_dir)
    with atomic_dir(out_dir) as tmp, quiet_transformers():  # no "Writing model shards" bar
        model.save_pretrained(str(tmp))
        save_tokenizer(tokenizer, tmp)
    return out_dir


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
    langs = task_languages(spec, languages)
    notes = [spec.note] if spec.note else []
    if skipped := [lang for lang in (languages or []) if lang not in spec.languages]:
        notes.append(f"no {spec.name} data for {', '.join(skipped)}")
    check_source_data(spec, scenario, langs)
    store = RunStore(None if out_dir is None else Path(out_dir) / f"{scenario}-runs", resume_key,
                     None if finished_runs is None else Path(finished_runs) / f"{scenario}-runs")
    runner = TrainingRunner(spec, Path(model_dir), load_finetune_tokenizer(model_dir, tokenizer_dir), progress,
                            None if save_models is None else Path(save_models), store)
    data = TaskData(spec)
    start = time.perf_counter()
    if scenario == "transfer_matrix":
        entry = transfer_matrix(runner, data, langs, seeds, notes)
    else:
        runs = SCENARIO_RUNS[scenario](runner, data, langs, seeds, notes)
        entry = task_entry(spec, scenario, seeds, runs, runner.details)
    entry.update(entry_notes(spec, notes, runner.details, runner.chance))
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
