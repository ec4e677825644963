"""`metaxlm report --finished-runs CONFIG --out DIR`: the report of a comparison still under way, from the
finished-run records it keeps in the repository.

A comparison longer than a machine's sessions records each finished fine-tuning run in `evaluate.finished_runs`
(results only; metaxlm.finetune.run_store). From those records alone — no model and no checkpoint is read — this
assembles, for each model of the config, the results.json its evaluate stage would write, from the runs finished so
far, each task saying which runs are still to come; it writes them as a run directory (`DIR/config.yaml`,
`DIR/eval/<model>/results.json`, and `DIR/assembled-from.json`: the records' directory and the runs to come; only a
new, empty or earlier such directory is written to) and the report on it (`DIR/report/`: tables, curves with which line
leads, example outputs, training times). Which runs a task has, its scenario and seeds are decided as in the evaluate
stage (`plan_tasks` and the scenario functions). A record's key names the model files it was fine-tuned from; without
the model it cannot be checked, so only this is: every record of one task has the same key (else an error naming both
files) — runs of other settings are never averaged together.

`--records DIR` (repeatable) adds the records of another series (e.g. the controls run on another CPU kind beside
the published series): each model's records come whole from the first directory that has any for it —
`evaluate.finished_runs` first, then each DIR in order — so one model's runs never mix two series, and the report's
table of training times says each run's CPU and precision. `assembled-from.json` names each model's directory.
"""

from __future__ import annotations

from pathlib import Path

from metaxlm.config import RunConfig
from metaxlm.config.yaml import dump_config
from metaxlm.errors import ConfigError, MetaXLMError
from metaxlm.evaluation.recipe import ModelToEvaluate, evaluated_variants, plan_tasks
from metaxlm.finetune.run_store import recorded_task_entry
from metaxlm.io import atomic_dir, atomic_write_json
from metaxlm.records import RESULTS_FILE, write_results
from metaxlm.report.evaluation import write_report
from metaxlm.run.layout import LOCK_FILE, RunDir

# Beside the assembled results: what they were assembled from. Only a directory that has it (or an empty or new
# one) is written to, so an --out that names a real run (its eval/, config.yaml) is never replaced.
ASSEMBLED = "assembled-from.json"


def _check_out(out: Path, cfg: RunConfig) -> None:
    if Path(cfg.output_dir).resolve() == out.resolve():
        raise MetaXLMError(f"{out}: is this config's own run directory (output_dir); give --out another directory")
    # the lock this command holds on --out (metaxlm.run.lock) is its own, not a run's content
    if out.is_dir() and any(p.name != LOCK_FILE for p in out.iterdir()) and not (out / ASSEMBLED).exists():
        raise MetaXLMError(f"{out}: not empty and not written by `metaxlm report --finished-runs` (no {ASSEMBLED}): "
                           "give a new or empty directory, so that no run's results are replaced")


def _records_of(name: str, roots: list[Path]) -> Path:
    """The directory whose records of model `name` are read: the first of `roots` with any (else the first)."""
    return next((root for root in roots if (root / name).is_dir()), roots[0])


def assemble_finished_runs(cfg: RunConfig, out: Path, more_records: tuple[Path, ...] = ()) -> dict[str, list[str]]:
    """Write `out/config.yaml` and `out/eval/<model>/results.json` for every model of `cfg` with finished-run
    records (in `evaluate.finished_runs`, else the first of `more_records` with any for that model); return, per
    "model · task", the runs still to come ("fr seed 0"; tasks with no record included)."""
    if cfg.evaluate.finished_runs is None:
        raise ConfigError("evaluate.finished_runs: not set in this config, so it records no finished runs to report")
    roots = [Path(cfg.evaluate.finished_runs), *map(Path, more_records)]
    if missing := [root for root in roots if not root.is_dir()]:
        where = "evaluate.finished_runs" if missing[0] == roots[0] else "--records"
        raise MetaXLMError(f"{missing[0]}: no such directory ({where}): no run has finished yet")
    _check_out(Path(out), cfg)
    to_come: dict[str, list[str]] = {}
    read_from: dict[str, str] = {}
    run = RunDir(out)
    with atomic_dir(run.eval) as eval_dir:  # a model whose records went away leaves no stale results behind
        for name in [*evaluated_variants(cfg), *cfg.evaluate.models]:
            variant = name if name in cfg.variants else None
            root = _records_of(name, roots)
            tasks = {}
            for task in plan_tasks(cfg, ModelToEvaluate(name, Path(), Path(), variant=variant)):
                tasks[task.name] = recorded_task_entry(task.spec, root / name / task.name, scenario=task.scenario,
                                                       seeds=task.seeds, languages=cfg.data.languages)
                if missing := tasks[task.name].get("to_come"):
                    to_come[f"{name} · {task.name}"] = missing
            if any(entry["per_language"] for entry in tasks.values()):  # a model with something finished
                read_from[name] = str(root)
                write_results(eval_dir / name / RESULTS_FILE, {
                    "model_name": name, "variant": variant, "step": None,
                    "model_dir": f"finished-run records in {root / name}", "tasks": tasks})
        if not any(eval_dir.iterdir()):
            raise MetaXLMError(f"{', '.join(map(str, roots))}: no finished run of this config's models and tasks "
                               f"recorded yet ({sum(map(len, to_come.values()))} to come)")
    dump_config(cfg, run.config)
    assembled = {"finished_runs": str(roots[0]), "to_come": to_come}
    if more_records:  # which series each model's records came from
        assembled |= {"more_records": [str(r) for r in more_records], "models_from": read_from}
    atomic_write_json(Path(out) / ASSEMBLED, assembled)
    return to_come


def report_finished_runs(cfg: RunConfig, out: Path,
                         more_records: tuple[Path, ...] = ()) -> tuple[dict, dict[str, list[str]]]:
    """assemble_finished_runs into `out`, then the report on it in `out/report`: (write_report's paths, to come)."""
    to_come = assemble_finished_runs(cfg, Path(out), more_records)
    return write_report([Path(out)], Path(out) / "report"), to_come
