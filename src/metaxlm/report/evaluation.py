"""`metaxlm report RUN_DIR...`: one Markdown and one self-contained HTML report of the evaluations of one or more runs.

Input: every `<run>/eval/<model_name>/results.json` (written by evaluation/recipe.py or `metaxlm finetune`), read
as the typed records of metaxlm.records, which hold its schema. An alignment set's reported layer has the lowest
dev AER (ties: the shallower layer), and every AER the report shows is the test AER at that layer; a set without a
dev part (`dev_fraction: 0`) is scored whole at the aligner's fixed default layer; results written before the
dev/test split are shown at the layer of lowest AER on those same sentences, which the report says
(report/results.py AlignmentResult).

Scores are fractions 0..1 (shown in percent) except QA EM/F1, already 0..100 like the official script. Every key
but model_name is optional; numbers may be null. Output, in out_dir (default <first run>/report): report.md,
report.html and figures/*.png. Sections, each only when some result has the data for it:
  what this run can and cannot show (models at chance, retrieval at its floor, collapsed fine-tuning; only
  when something is); overview; the method comparison when the run config names a control (report/comparison.py); per
  task a table (models x languages, avg, transfer gap; mean ± std over seeds) and grouped bars; test scores against
  fine-tuning steps for tasks run with eval_steps (e.g. translation from several inits), with which line is highest at
  each step and whether beyond noise (the 95% interval of the difference); example outputs (the first test items, each
  model and task side by side: translation); each task's fine-tuning runs (steps, minutes, the CPU, threads and
  precision they trained on); retrieval accuracy@1 and AER against layer (paper Figures 3-4) with the best layer per
  model; average target score and transfer gap against pretraining step (Figure 5); transfer-direction heat maps (Figure
  6); each run's pretraining comparison (report/pretraining.py, redrawn); notes (e.g. the XQuAD split) and provenance.
Tables, bars, layer curves and heat maps show each variant's final model; all checkpoints appear against steps.
A model has one colour in every figure (report/colors.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from metaxlm.data.examples import DEV_FRACTION
from metaxlm.errors import DataError, MetaXLMError
from metaxlm.io import atomic_dir, atomic_write_text
from metaxlm.records import CHOSEN_ON_DEV, FIXED_DEFAULT
from metaxlm.report import plots
from metaxlm.report.cells import (
    DASH,
    cell,
    language_pair,
    n_seeds,
    ordered,
    percent_scale,
    report_hints,
    slug,
    task_languages,
    translation_ends,
)
from metaxlm.report.colors import colors_for, report_colors, report_variant_names
from metaxlm.report.comparison import comparison_sections
from metaxlm.report.document import Bullets, Figure, Section, Table, Text, markdown_block, render_markdown
from metaxlm.report.findings import findings_section, limits_section
from metaxlm.report.html import render_html
from metaxlm.report.pretraining import (
    BY_LANGUAGE_PNG,
    CURVES_PNG,
    comparable,
    language_order,
    plot_comparison,
    untrained_head_note,
)
from metaxlm.report.results import (
    ALIGNMENT_METRICS,
    NO_DEV_SPLIT,
    AlignmentResult,
    ModelResult,
    RetrievalResult,
    collect_results,
    final_models,
    number,
    run_languages,
)
from metaxlm.report.uncertainty import Sample, difference, task_sample
from metaxlm.run.layout import RunDir

TITLE = "MetaXLM evaluation report"
PRETRAINING_TITLE = "MetaXLM pretraining report"  # runs with no evaluation results: their comparisons alone
# How the alignment table names where its layer comes from (report/results.py AlignmentResult.chosen_on).
CHOSEN_ON_TEXT = {CHOSEN_ON_DEV: "dev", FIXED_DEFAULT: "fixed default (no dev part)",
                  NO_DEV_SPLIT: "the scored sentences (older results, no dev split)"}
CHOSEN_ON_CAPTION = {
    CHOSEN_ON_DEV: "Test scores at the layer chosen on dev (lowest dev AER; ties: the shallower layer).",
    FIXED_DEFAULT: f"'{CHOSEN_ON_TEXT[FIXED_DEFAULT]}': a set without a dev part (dev_fraction 0) is scored whole "
                   "at the aligner's default layer.",
    NO_DEV_SPLIT: f"'{CHOSEN_ON_TEXT[NO_DEV_SPLIT]}': results written before the split; their layer is the lowest "
                  "AER on the very sentences scored, so their 'test' columns are not test scores and flatter the "
                  "model."}


RETRIEVAL_CHOSEN_ON_TEXT = {CHOSEN_ON_DEV: "dev", FIXED_DEFAULT: "last layer (no dev part)",
                            NO_DEV_SPLIT: "the scored pairs (older results, no dev split)"}
RETRIEVAL_CHOSEN_ON_CAPTION = {
    CHOSEN_ON_DEV: "Test accuracy at the layer chosen on dev (highest mean dev accuracy@1; ties: the shallower layer).",
    FIXED_DEFAULT: f"'{RETRIEVAL_CHOSEN_ON_TEXT[FIXED_DEFAULT]}': a set without a dev part (dev_fraction 0) is "
                   "scored whole at the last layer.",
    NO_DEV_SPLIT: f"'{RETRIEVAL_CHOSEN_ON_TEXT[NO_DEV_SPLIT]}': results written before the split; their layer is "
                  "the best on the very pairs scored, so their accuracy flatters the model and is not a test score."}


def task_table(task: str, entries: dict[str, dict]) -> Table:
    """Rows = models, columns = languages (source first), avg and transfer gap; the best per column in bold where it is
    better than the runner-up beyond noise."""
    langs = task_languages(entries)
    scale = percent_scale(list(entries.values()))
    extras = [(label, key) for label, key in (("avg", "average"), ("gap", "transfer_gap"))
              if any(t.get(key) for t in entries.values())]
    header = ["model", *langs, *(label for label, _ in extras)]
    rows, shown = [], []
    collapsed_seen = []
    for model, t in entries.items():
        cells = [cell(t.get("per_language", {}).get(lang), n_seeds(t), scale) for lang in langs]
        cells += [cell(t.get(key), n_seeds(t), scale) for _, key in extras]
        texts = [text for text, _ in cells]
        for c, lang in enumerate(langs):
            if runs := (t.get("collapsed") or {}).get(lang):
                texts[c] += f" (collapsed: {len(runs)}/{n_seeds(t)} seeds)"
                collapsed_seen.append((model, lang, runs))
        rows.append([model, *texts])
        shown.append([value for _, value in cells])
    bold = set()
    keys = [*langs, *(key for _, key in extras)]
    models = list(entries)
    for c in range(len(header) - 1) if len(rows) > 1 else ():
        # the best of the column, bold only when its 95% interval against the runner-up excludes 0: "best" means
        # better than the rest by more than the noise (report/uncertainty.py), not first by a hair
        ranked = sorted((r for r, row in enumerate(shown) if not math.isnan(row[c])),
                        key=lambda r, c=c: shown[r][c], reverse=header[c + 1] != "gap")
        if len(ranked) < 2 or shown[ranked[0]][c] == shown[ranked[1]][c]:
            continue
        best, second = (task_sample(entries[models[r]], keys[c], scale) for r in ranked[:2])
        if difference(best, second).significant:
            bold.add((ranked[0], c + 1))
    first = next(iter(entries.values()))
    metric = ", ".join(ordered(str(t.get("metric", "score")) for t in entries.values()))
    scenario = ", ".join(ordered(str(t.get("scenario", "?")) for t in entries.values()))
    seeds = ", ".join(ordered(str(n_seeds(t)) for t in entries.values()))
    caption = (f"{task}: {metric}{' (%)' if scale == 100 else ''}, {scenario}"
               + (f" {'from' if fixed[0] else 'into'} {fixed[0] or fixed[1]}" if (fixed := _fixed_language(first))
                  else "")
               + f"; mean ± std over {seeds} seed(s). avg: all languages; gap: source − mean of the other languages"
               " (lower is better). Bold: the best of its column, where the 95% interval of its difference to the "
                 "runner-up excludes 0 (test items and seeds; one seed: never).")
    if collapsed_seen:
        model, lang, runs = collapsed_seen[0]
        caption += (" Collapsed: the fine-tuned model gives one answer to (nearly) every test item, so its score is a"
                    f" prior, not transfer (e.g. {model}, {lang}, seed {runs[0]['seed']}: {runs[0]['what']}); likely"
                    " too few fine-tuning steps or too high a learning rate.")
    return Table(header, rows, bold, caption)


def _fixed_language(entry: dict) -> tuple[str | None, str | None] | None:
    """(source, None) of an entry whose results all come from one language, (None, target) of a translation into
    one language (`direction: reverse`), None for neither."""
    if report_hints(entry)["directional"]:
        return translation_ends(entry)
    return (entry["source"], None) if entry.get("source") else None


def format_task_table(task: str, entries: dict[str, dict]) -> str:
    """The Markdown table of one task, e.g. for `metaxlm finetune` to print."""
    return markdown_block(task_table(task, entries))


def _overview(results: list[ModelResult], final: list[ModelResult]) -> list[Section]:
    rows = [[r.name, r.variant, DASH if r.step is None else str(r.step),
             ", ".join(r.data.get("tasks", {})) or DASH, ", ".join(r.data.get("transfer_matrix", {})) or DASH,
             ", ".join(r.data.get("retrieval", {})) or DASH, ", ".join(r.data.get("alignment", {})) or DASH]
            for r in results]
    blocks = [Table(["model", "variant", "step", "tasks", "transfer matrix", "retrieval", "alignment"], rows,
                    text_columns=7)]
    if len(final) < len(results):
        blocks.append(Text(f"Tables, bars, layer curves and heat maps show each variant's final model "
                           f"({', '.join(r.name for r in final)}); every checkpoint appears in 'Across pretraining "
                           "steps'."))
    return [Section("Overview", blocks)]


def _task_sections(models: list[ModelResult], fig_dir: Path, colors: dict[str, str]) -> list[Section]:
    sections = []
    for task in ordered(t for m in models for t in m.data.get("tasks", {})):
        entries = {m.name: m.data["tasks"][task] for m in models if task in m.data.get("tasks", {})}
        to_come = [Text("Runs still to come (a comparison under way): " + "; ".join(
            f"{model}: {', '.join(t['to_come'])}" for model, t in entries.items() if t.get("to_come")) + ".")] \
            if any(t.get("to_come") for t in entries.values()) else []
        if not any(t.get("per_language") for t in entries.values()):
            sections.append(Section(f"Task {task}", [Text("No run has finished yet."), *to_come], level=3))
            continue
        langs, scale = task_languages(entries), percent_scale(list(entries.values()))
        bars = {model: {lang: (number(s.get("mean")) * scale,
                               number(s.get("std")) * scale if n_seeds(t) > 1 and s.get("std") is not None else 0.0)
                        for lang, s in t.get("per_language", {}).items()} for model, t in entries.items()}
        metric = next(iter(entries.values())).get("metric", "score")
        name = f"task_{slug(task)}.png"
        plots.task_bars(fig_dir / name, f"{task}: {metric} per language", f"{metric}{' (%)' if scale == 100 else ''}",
                        langs, bars, colors)
        sections.append(Section(f"Task {task}", [task_table(task, entries), Figure(name, f"{task} per language"),
                                                 *to_come], level=3))
    if sections:
        sections.insert(0, Section("Fine-tuning tasks", [Text("Cells: mean ± std over seeds (std left out for one "
                                                              "seed); scores in percent.")]))
    return sections


def _curve_sections(models: list[ModelResult], fig_dir: Path, colors: dict[str, str]) -> list[Section]:
    """Test scores against fine-tuning steps (tasks run with hyperparameters.eval_steps: e.g. translation from
    several initializations, as VECO's Table 4 compares them): one line per model and task, per metric and language;
    a line has its model's colour, and a line style per task. A report of one model (configs/translation.yaml: one
    pretrained model, one task per initialization) colours the lines by task instead."""
    entries = [(m.name, task, t) for m in models for task, t in m.data.get("tasks", {}).items() if t.get("curve")]
    if not entries:
        return []
    label = {(model, task): f"{model} · {task}" for model, task, _ in entries}
    tasks = ordered(task for _, task, _ in entries)
    # A model keeps one colour in every figure of a report; only a report of one model frees colour for the tasks.
    by_task = colors_for(tasks) if len(models) == 1 else None
    line_colors = {text: by_task[task] if by_task else colors[model] for (model, task), text in label.items()}
    styles = {text: tasks.index(task) for (_, task), text in label.items()}
    panels: dict[str, dict[str, list]] = {}
    ylabels: dict[str, str] = {}
    header, rows = ["model · task", "language", "metric"], []
    steps_seen: list[int] = []
    for model, task, t in entries:
        scale = percent_scale([t])
        hints = report_hints(t)
        metrics = hints["scores"] or (t.get("metric", "score"),)  # a type's further scores: every curve point has them
        for lang, curve in t["curve"].items():
            for metric in metrics:
                if metric not in curve:
                    continue
                where = language_pair(t, lang)
                panel = f"{metric} · {where}"
                ylabels[panel] = f"{metric}{' (%)' if scale == 100 else ''}"
                points = [(step, number(stat.get("mean")) * scale, number(stat.get("std")) * scale,
                           tuple(number(v) * scale for v in stat.get("runs") or ()))
                          for step, stat in zip(curve["steps"], curve[metric], strict=True)]
                panels.setdefault(panel, {})[label[(model, task)]] = points
                steps_seen += curve["steps"]
                rows.append((label[(model, task)], where, metric,
                             {step: cell(stat, n_seeds(t), scale)[0]
                              for step, stat in zip(curve["steps"], curve[metric], strict=True)}))
    steps = sorted(set(steps_seen))
    table = Table(header + [f"step {s}" for s in steps],
                  [[*row[:3], *(row[3].get(s, DASH) for s in steps)] for row in rows], text_columns=3,
                  caption="Test score after each number of fine-tuning steps; mean ± std over seeds.")
    plots.finetune_curves(fig_dir / "finetune_curves.png", "test score against fine-tuning steps", panels, ylabels,
                          line_colors, styles)
    subsets = sorted({f"{task}: {n} test items per language" for _, task, t in entries
                      if (n := t.get("curve_items")) is not None})
    on_subset = (" Curve points on a fixed subset of the test items (`hyperparameters.curve_items`; the tables' "
                 f"final scores use every item): {'; '.join(subsets)}.") if subsets else ""
    leads = curve_leaders(panels)
    return [Section("Against fine-tuning steps", [
        Text("Each model and task scored on its test sets during fine-tuning (`hyperparameters.eval_steps`); the "
             f"last point is the end of fine-tuning.{on_subset}"),
        Figure("finetune_curves.png", "test score against fine-tuning steps"), table]
        + ([Text("Which line is highest at each step its panel's lines share; *beyond noise*: the 95% interval of "
                 "its difference to every other line excludes 0 (from the seeds' spread alone: curve points keep no "
                 "per-item outcomes; one seed decides nothing)."), Bullets(leads)] if leads else []))]


def curve_leaders(panels: dict[str, dict[str, list[tuple]]]) -> list[str]:
    """Per panel of two or more lines (points (step, mean, std, per-seed scores)): which line is highest at each
    shared step, and where beyond noise — the 95% interval of its difference to every other line, from the seeds
    (report/uncertainty.py), excludes 0; a line of one seed decides nothing."""
    out = []
    for panel, series in panels.items():
        if len(series) < 2:
            continue
        points = {name: {point[0]: point[1:] for point in line} for name, line in series.items()}
        shared = sorted(set.intersection(*(set(p) for p in points.values())))
        if not shared:
            continue
        one_seed = all(len(point[2]) < 2 for p in points.values() for point in p.values())
        leaders, beyond = [], []
        for step in shared:
            at = {name: p[step] for name, p in points.items()}
            top = max(at, key=lambda name: at[name][0])
            leaders.append(top)
            beyond.append(all(difference(Sample(at[top][2] or (at[top][0],)), Sample(runs or (mean,))).significant
                              for name, (mean, _, runs) in at.items() if name != top))
        if len(set(leaders)) == 1:
            text = f"{panel}: {leaders[0]} highest at every step ({', '.join(map(str, shared))})"
            if one_seed:
                text += "; one seed each: nothing decided"
            else:
                missed = [str(step) for step, ok in zip(shared, beyond, strict=True) if not ok]
                text += (f"; beyond noise at {len(shared) - len(missed)} of {len(shared)}"
                         + (f" (not at {', '.join(missed)})" if missed and len(missed) < len(shared) else ""))
        else:
            text = f"{panel}: the highest changes — " + ", ".join(
                f"step {step}: {leader}" + (" (beyond noise)" if ok and not one_seed else "")
                for step, leader, ok in zip(shared, leaders, beyond, strict=True))
        out.append(text)
    return out


def _f(value: float) -> str:
    return DASH if math.isnan(value) else f"{value:.1f}"


def _example_sections(models: list[ModelResult]) -> list[Section]:
    """Outputs beside their source and reference (tasks whose runs keep them: translation): the first test items
    of each language (pair), as the test file orders them, from each model and task's lowest-seed run — a fixed
    rule, so the examples are not picked."""
    groups: dict[str, dict] = {}  # language (pair) -> items in order, and each model · task's outputs
    for m in models:
        for task, t in m.data.get("tasks", {}).items():
            for lang, shown in t.get("examples", {}).items():
                group = groups.setdefault(language_pair(t, lang), {"items": {}, "outputs": {}})
                outputs = group["outputs"].setdefault(f"{m.name} · {task} (seed {shown['seed']})", {})
                for row in shown["rows"]:
                    item = (row["id"], row["source"], row["reference"])
                    group["items"].setdefault(item, len(group["items"]) + 1)
                    outputs[item] = row["output"]
    blocks: list = []
    for where, group in groups.items():
        rows = []
        for item, n in group["items"].items():
            rows += [[str(n), "source", item[1]], [str(n), "reference", item[2]]]
            rows += [[str(n), system, found.get(item, DASH)] for system, found in group["outputs"].items()]
        blocks.append(Table(["#", where, "text"], rows, text_columns=3,
                            caption=f"{where}: the first {len(group['items'])} test items in the test file's order, "
                                    "each model · task's output from its lowest-seed run."))
    return [Section("Example outputs", [Text("Outputs as the models wrote them, beside the source and reference "
                                             "(not chosen: the test set's first items).")] + blocks)] if blocks else []


def _training_section(models: list[ModelResult]) -> list[Section]:
    """Per model and task: how many fine-tuning runs, of how many steps, how long each trained and on what."""
    rows = []
    for m in models:
        for task, t in m.data.get("tasks", {}).items():
            if training := t.get("training"):
                # one row per kind of machine (results written before the split have only the pooled time)
                by_kind = training.get("train_seconds_by_machine") or {
                    "; ".join(f"{kind} ({n})" if len(training["machines"]) > 1 else kind
                              for kind, n in training["machines"].items()): training["train_seconds"]}
                for kind, seconds in by_kind.items():
                    runs = training["machines"].get(kind, training["runs"])
                    minutes = {k: number(seconds.get(k)) / 60 for k in ("mean", "std")}
                    time_cell = (f"{minutes['mean']:.1f}" + (f" ± {minutes['std']:.1f}" if runs > 1
                                                               and not math.isnan(minutes["std"]) else ""))
                    rows.append([f"{m.name} · {task}", kind, str(runs), ", ".join(map(str, training["steps"])),
                                 time_cell])
    if not rows:
        return []
    return [Section("Fine-tuning runs", [Table(
        ["model · task", "trained on (CPU · threads · precision)", "runs", "steps", "minutes per run"], rows,
        text_columns=2, caption="Training time of each run, mean ± std over the runs (every language and seed) "
                                "on one kind of machine, testing not included; a run resumed from its checkpoints "
                                "counts the pieces that trained. Runs on several kinds of machine: a row each.")])]


def _precision_section(models: list[ModelResult]) -> list[Section]:
    """Per model: the precision it was pretrained in, and the one its evaluation ran in (results.json "precision";
    the fine-tuning runs' own are in "Fine-tuning runs")."""
    rows = []
    for m in models:
        recorded = m.data.get("precision")
        if recorded is None:
            rows.append([m.name, "not recorded", "not recorded (results written before precision was recorded)"])
            continue
        evaluated = recorded.get("evaluate") or DASH
        if evaluated == "auto":
            evaluated = f"auto → {recorded['auto']}" if recorded.get("auto") else "auto (not resolved: no probe ran)"
        rows.append([m.name, recorded.get("pretrained") or "not by this run", evaluated])
    if not rows:
        return []
    return [Section("Precision", [Table(
        ["model", "pretrained in", "evaluated in (evaluate.precision)"], rows, text_columns=3,
        caption="`auto` is decided once per run (by measurement on a CPU, bf16 only at 1.5x fp32's speed; bf16 on a "
                "GPU that has it), recorded in run_info.json and kept on resume; each fine-tuning run's train/test "
                "precision is in the table above.")])]


def _feature_sections(models: list[ModelResult], fig_dir: Path, colors: dict[str, str]) -> list[Section]:
    sections = []
    retrieval: dict[str, dict] = {}
    retrieval_marked: dict[str, dict[str, int]] = {}
    retrieval_chosen_on: set[str] = set()
    rows = []
    for m in models:
        for name, entry in m.data.get("retrieval", {}).items():
            r = RetrievalResult.of(entry)
            retrieval_chosen_on.add(r.chosen_on)
            retrieval.setdefault(name, {})[m.name] = (r.layers, [v * 100 for v in r.test])
            if r.layer is not None:
                retrieval_marked.setdefault(name, {})[m.name] = r.layer
            pairs = DASH if not r.is_test else f"{r.dev_pairs} / {r.test_pairs}"
            rows.append([m.name, name, pairs, DASH if r.layer is None else str(r.layer),
                         RETRIEVAL_CHOSEN_ON_TEXT[r.chosen_on], _f(r.at_layer("dev") * 100),
                         _f(r.at_layer() * 100), _f(r.test[-1] * 100)])
    if retrieval:
        rows.sort(key=lambda row: list(retrieval).index(row[1]))  # group by set, models in order
        plots.layer_curves(fig_dir / "retrieval.png", "Sentence retrieval: test accuracy@1 against layer (mean of "
                           "both directions); ringed: the layer chosen on dev", "accuracy@1 (%)", retrieval, colors,
                           marked=retrieval_marked)
        sections.append(Section("Sentence retrieval against layer", [
            Text("Mean-pooled hidden states, cosine nearest neighbour; accuracy@1 averaged over both directions "
                 "and over languages (as the MetaXLM paper's Figure 3). Each language's pairs are split once by "
                 f"their file order: the first (`dev_fraction`, by default {DEV_FRACTION:.0%}) are dev, the rest "
                 "test, each part retrieved among its own pairs. The layer is chosen on dev (highest mean dev "
                 "accuracy; ties: the shallower layer) and the accuracy shown is on the test pairs, at that layer."),
            Figure("retrieval.png", "test accuracy@1 against layer; ringed: the layer chosen on dev"),
            Table(["model", "set", "dev / test pairs", "layer", "layer chosen on", "dev acc@1 (%)",
                   "test acc@1 (%)", "test acc@1 (%) at last layer"], rows, text_columns=5,
                  caption=" ".join(text for kind, text in RETRIEVAL_CHOSEN_ON_CAPTION.items()
                                   if kind in retrieval_chosen_on))]))
    alignment: dict[str, dict] = {}
    marked: dict[str, dict[str, int]] = {}
    chosen_on: set[str] = set()
    rows = []
    for m in models:
        for name, entry in m.data.get("alignment", {}).items():
            a = AlignmentResult.of(entry)
            chosen_on.add(a.chosen_on)
            alignment.setdefault(name, {})[m.name] = (a.layers, [v * 100 for v in a.test["aer"]])
            if a.layer is not None:
                marked.setdefault(name, {})[m.name] = a.layer
            pairs = (DASH if a.test_pairs is None else f"no split ({a.test_pairs})" if not a.is_test
                     else f"{a.dev_pairs} / {a.test_pairs}")
            rows.append([m.name, name, str(entry.get("method", "?")), pairs,
                         DASH if a.layer is None else str(a.layer), CHOSEN_ON_TEXT[a.chosen_on],
                         _f(a.at_layer("aer", "dev") * 100),
                         *(_f(a.at_layer(key) * 100) for key in ALIGNMENT_METRICS), _f(a.test["aer"][-1] * 100)])
    if alignment:
        rows.sort(key=lambda row: list(alignment).index(row[1]))  # group by alignment set, models in order
        plots.layer_curves(fig_dir / "alignment.png", "Word alignment: test AER against layer (lower is better); "
                           "ringed: the layer chosen on dev", "test AER (%)", alignment, colors, marked=marked)
        sections.append(Section("Word alignment against layer", [
            Text("Alignment error rate with sure/possible gold links (as the MetaXLM paper's Figure 4). Each gold "
                 "set is split once by its file order: its first pairs are dev (`dev_fraction`, by default "
                 f"{DEV_FRACTION:.0%}), the rest test. The layer is chosen on dev (lowest dev AER; ties: the "
                 "shallower layer) and every AER, precision, recall and F1 shown is on the test pairs, at that "
                 "layer. The figure shows the test AER at every layer, the chosen layer ringed."),
            Figure("alignment.png", "test AER against layer; ringed: the layer chosen on dev"),
            Table(["model", "set", "method", "dev / test pairs", "layer", "layer chosen on", "dev AER (%)",
                   "test AER (%)", "test precision (%)", "test recall (%)", "test F1 (%)",
                   "test AER (%) at last layer"], rows, text_columns=6,
                  caption=" ".join(text for kind, text in CHOSEN_ON_CAPTION.items() if kind in chosen_on))]))
    return sections


def _steps_section(results: list[ModelResult], fig_dir: Path, colors: dict[str, str]) -> list[Section]:
    by_variant: dict[str, list[ModelResult]] = {}
    for r in results:
        if r.step is not None and r.data.get("tasks"):
            by_variant.setdefault(r.variant, []).append(r)
    variants = {v: rs for v, rs in by_variant.items() if len({r.step for r in rs}) >= 2}
    if not variants:
        return []
    checkpoints = [r for rs in variants.values() for r in rs]
    tasks = ordered(t for r in checkpoints for t in r.data["tasks"])
    blocks: list = [Text("Average score over the target languages (all languages when there is no source) and "
                         "the transfer gap, per pretraining variant, against pretraining steps (as the MetaXLM "
                         "paper's Figure 5).")]
    header, rows = ["model", "step"], [[r.name, str(r.step)] for r in checkpoints]
    for task in tasks:
        entries = [r.data["tasks"].get(task) for r in checkpoints]
        scale = percent_scale([t for t in entries if t])
        series: dict[str, list] = {}
        for r, t in zip(checkpoints, entries, strict=True):
            if t:
                target = t.get("target_average") or t.get("average") or {}
                gap = (t.get("transfer_gap") or {}).get("mean")
                series.setdefault(r.variant, []).append((r.step, number(target.get("mean")) * scale,
                                                         number(gap) * scale))
        metric = next(t for t in entries if t).get("metric", "score")
        name = f"steps_{slug(task)}.png"
        plots.step_curves(fig_dir / name, f"{task} against pretraining steps",
                          f"average target {metric}{' (%)' if scale == 100 else ''}", series, colors)
        blocks.append(Figure(name, f"{task} against pretraining steps"))
        header += [f"{task} target avg", f"{task} gap"]
        for row, t in zip(rows, entries, strict=True):
            row += [cell(t and (t.get("target_average") or t.get("average")), n_seeds(t or {}), scale)[0],
                    cell(t and t.get("transfer_gap"), n_seeds(t or {}), scale)[0]]
    blocks.append(Table(header, rows))
    return [Section("Across pretraining steps", blocks)]


def _transfer_sections(models: list[ModelResult], fig_dir: Path) -> list[Section]:
    matrices: dict[str, dict[str, tuple[list[str], list[list[float]]]]] = {}
    for m in models:
        for task, matrix in m.data.get("transfer_matrix", {}).items():
            matrices.setdefault(task, {})[m.name] = (matrix["languages"],
                                                     [[number(v) for v in row] for row in matrix["scores"]])
    blocks: list = []
    for task, by_model in matrices.items():
        values = [v for _, rows in by_model.values() for row in rows for v in row if not math.isnan(v)]
        percent = any(report_hints(m.data.get("transfer_matrix", {}).get(task) or {})["percent"] or
                      report_hints(m.data.get("tasks", {}).get(task) or {})["percent"] for m in models)
        scale = 1.0 if percent or any(v > 1.0 for v in values) else 100.0
        value_range = (min(values) * scale, max(values) * scale) if values else None
        for model, (langs, rows) in by_model.items():
            scores = [[v * scale for v in row] for row in rows]
            name = f"transfer_{slug(task)}_{slug(model)}.png"
            unit = " (%)" if scale == 100 else ""
            plots.heatmap(fig_dir / name, f"{model}: {task}, source → target", langs, scores, f"score{unit}",
                          value_range)
            blocks += [Figure(name, f"{model}: {task} transfer directions"),
                       Table(["source \\ target", *langs],
                             [[src, *map(_f, row)] for src, row in zip(langs, scores, strict=True)],
                             caption=f"{model}, {task}: fine-tuned on the row language, tested on the column "
                                     f"language{unit}; one colour scale for all models.")]
    return [Section("Transfer directions", blocks)] if blocks else []


def _pretraining_sections(run_dirs: list[Path], fig_dir: Path, colors: dict[str, str],
                          variant_names: dict[Path, dict[str, str]]) -> list[Section]:
    """Each run's pretraining comparison; its figures are drawn again from comparison.json with the report's
    colours (a run's own PNGs may predate them, and two runs would each start at the first colour)."""
    sections = []
    for run in run_dirs:
        if not RunDir(run).comparison_md.exists():
            continue
        title = "Pretraining comparison" + (f" ({run.name})" if len(run_dirs) > 1 else "")
        path = RunDir(run).comparison_json
        if not path.exists():
            sections.append(Section(title, [Text(f"See `{RunDir(run).comparison_md}`.")]))
            continue
        try:
            # a variant that trains no objective on the MLM head: out of the numbers, with one line
            comp = comparable(json.loads(path.read_text(encoding="utf-8")), run)
            variants, final, untrained = list(comp["final"]), comp["final"], comp["untrained_head"]
            if not final:
                sections.append(Section(title, [Text(untrained_head_note(untrained))]))
                continue
            # the order the terminal showed: the run config's (older comparisons: the order they recorded)
            langs = language_order((lang for losses in final.values() for lang in losses),
                                   run_languages(run) or comp.get("languages"), comp.get("pivot"))
            comp = {**comp, "languages": langs}  # the figure's bars in the table's order
            rows = [[lang, *(f"{number(final[v].get(lang)):.3f}" for v in variants)] for lang in langs]
            rows.append(["mean without the pivot", *(f"{number(comp['mean_non_pivot'][v]):.3f}" for v in variants)])
            if len(variants) > 1 and comp["baseline"]:  # one variant: nothing to compare it with
                rows.append([f"Δ vs {comp['baseline']}", *(f"{number(comp['delta_vs_baseline'][v]):+.3f}"
                                                           for v in variants)])
            steps = ", ".join(f"{v}: {s}" for v, s in comp["steps"].items())
            metric = comp["metric"]
            curves, by_language = (f"pretraining_{slug(run.name)}_{png}" for png in (CURVES_PNG, BY_LANGUAGE_PNG))
            plot_comparison(comp, fig_dir / curves, fig_dir / by_language,
                            {v: colors[variant_names[run][v]] for v in {*variants, *comp["curves"]}})
        except json.JSONDecodeError as err:
            raise DataError(path, err.lineno, f"not valid JSON: {err.msg}") from None
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            raise DataError(path, None, f"not a comparison written by report/pretraining.py ({err!r})") from None
        blocks = [Text(f"{metric}; steps: {steps}."),
                  Table(["language", *variants], rows, {(len(langs), c) for c in range(len(variants) + 1)}),
                  *([Text(untrained_head_note(untrained))] if untrained else []),
                  Figure(curves, "held-out loss against steps"), Figure(by_language, "held-out loss per language")]
        sections.append(Section(title, blocks))
    return sections


def _notes_section(results: list[ModelResult], run_dirs: list[Path]) -> list[Section]:
    notes: dict[str, dict[str, list[str]]] = {}
    for r in results:
        for kind in ("tasks", "transfer_matrix", "retrieval", "alignment"):
            for name, entry in r.data.get(kind, {}).items():
                if entry.get("note"):
                    notes.setdefault(name, {}).setdefault(str(entry["note"]), []).append(r.name)
    items = [f"{name}: {note}" + (f" ({', '.join(ordered(models))})" if len(by_note) > 1 else "")
             for name, by_note in notes.items() for note, models in by_note.items()]
    provenance = [f"`{r.path}` (model {r.name}; written {r.modified})" for r in results]
    provenance += [f"`{RunDir(run).comparison_json}`" for run in run_dirs if RunDir(run).comparison_json.exists()
                   and RunDir(run).comparison_md.exists()]
    blocks = ([Text("Notes:"), Bullets(items)] if items else []) + [Text("Results files:"), Bullets(provenance)]
    times = [line for run in run_dirs if (line := _run_time_line(run))]
    if times:
        blocks += [Text("Run time (from each run's `run_info.json`; an interrupted invocation counts up to its last "
                        "record):"), Bullets(times)]
    return [Section("Notes and provenance", blocks)]


def _run_time_line(run_dir: Path) -> str | None:
    from metaxlm.run.clock import hms
    from metaxlm.run.info import run_time

    took = run_time(run_dir)
    if took is None:
        return None
    how = [f"{took.stopped} stopped before finishing"] if took.stopped else []
    how += ["the one writing this report still running"] if took.running else []
    stages = ", ".join(f"{stage} {hms(seconds)}" for stage, seconds in took.stage_seconds.items())
    return (f"`{run_dir}`: {hms(took.seconds)} over {took.invocations} invocation{'s' * (took.invocations != 1)}"
            + (f" ({'; '.join(how)})" if how else "")
            + f" on {', '.join(took.cpus)}; by stage, summed over invocations: {stages}; "
            + f"code {', '.join(took.commits)}")


def write_report(run_dirs: list[Path], out_dir: Path | None = None) -> dict:
    """Write report.md, report.html and figures/*.png; returns {"markdown", "html", "figures"} paths."""
    seen, runs = set(), []
    for run in map(Path, run_dirs):  # the same run given twice would otherwise collide with itself
        if run.resolve() not in seen:
            seen.add(run.resolve())
            runs.append(run)
    if not runs:
        raise MetaXLMError("report: no run directory given")
    results = collect_results(runs)
    if not results and not any(RunDir(run).comparison_md.exists() for run in runs):
        raise MetaXLMError(f"nothing to report: no eval/*/results.json (nor comparison.md) in "
                           f"{', '.join(map(str, runs))}; run `metaxlm evaluate CONFIG` first")
    out = Path(out_dir) if out_dir is not None else runs[0] / "report"
    final = final_models(results)
    colors = report_colors(runs, results)  # one colour per model in every figure
    with atomic_dir(out / "figures") as fig_dir:  # figures of an earlier report never linger beside new ones
        sections = (limits_section(final) + (_overview(results, final) if results else [])
                    + findings_section(runs[0], results, out)
                    + comparison_sections(final, runs[0], fig_dir, colors) + _task_sections(final, fig_dir, colors)
                    + _curve_sections(final, fig_dir, colors) + _example_sections(final) + _training_section(final)
                    + _precision_section(final)
                    + _feature_sections(final, fig_dir, colors)
                    + _steps_section(results, fig_dir, colors) + _transfer_sections(final, fig_dir)
                    + _pretraining_sections(runs, fig_dir, colors, report_variant_names(runs, results))
                    + _notes_section(results, runs))
        title = TITLE if results else PRETRAINING_TITLE  # titled by what it holds
        html = render_html(title, sections, fig_dir)
    figures = [out / "figures" / b.file for s in sections for b in s.blocks if isinstance(b, Figure)]
    atomic_write_text(out / "report.md", render_markdown(title, sections))
    atomic_write_text(out / "report.html", html)
    return {"markdown": out / "report.md", "html": out / "report.html", "figures": figures}
