"""What a task's runs add up to: statistics over seeds (`summarize`), each run's per-item outcomes (`run_items`,
gathered by `item_outcomes` for the report's paired bootstrap), the reports, curves, training times and example
outputs of the runs (`report_summary`), the task entry of the results schema (`task_entry`, `entry_notes`), and the
code the runs were made by (`made_by`, `other_code_note`). Runs trained here and runs replayed from their records
(metaxlm.finetune.run_store) are summarized alike."""

from __future__ import annotations

import math
from collections.abc import Sequence

from metaxlm.errors import MetaXLMError
from metaxlm.finetune.spec import TaskSpec
from metaxlm.finetune.tasks import Task, get_task
from metaxlm.run import code as run_code


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


def report_numbers(reports: dict[str, dict]) -> dict[str, dict[str, float]]:
    """The numbers of each language's `task.report` (its signatures left out): what a curve's point keeps."""
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


def task_entry(spec: TaskSpec, scenario: str, seeds: Sequence[int], runs: dict[str, list[float]],
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


# The code a fine-tuning run is made by (metaxlm.run.code): the module that trains it (run_task's) and everything it
# imports. Named, not imported: that module is above this one.
RUN_CODE = ("metaxlm.finetune.runner",)


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


def entry_notes(spec: TaskSpec, notes: list[str], details: list[dict], chance: dict[str, float]) -> dict:
    """What every task entry adds after its runs (`details`, and the majority-class score per test language: `chance`):
    notes, the curve's test-item count, chance levels, collapses."""
    out: dict = {"note": "; ".join(n for n in [*notes, other_code_note(details)] if n)}
    if spec.hyperparameters.eval_steps and spec.hyperparameters.curve_items is not None:
        out["curve_items"] = spec.hyperparameters.curve_items  # the curve's points are on this many test items
    if chance:
        out["chance"] = chance
    if collapsed := collapsed_runs(details):
        out["collapsed"] = collapsed
    return out
