"""The MetaXLM paper's findings (Chi et al. 2021, arXiv 2109.11129), checked in direction on one run, with stated
uncertainty.

A run names its models in `report.findings` (role -> model name; roles in ROLES). Each finding compares two roles'
models and gets a verdict; the report shows one table row per finding (per task or probe set where it applies) and
`findings.json` beside report.md holds the same rows with their numbers. Only directions are checked, never sizes:
metaxlm's runs are far smaller than the paper's.

Verdicts rest on the 95% interval of the difference between the two models' scores (report/uncertainty.py: a
paired bootstrap over the test items combined with the spread over fine-tuning seeds; `judge`):
  - "greater" / "less": `reproduced` when the interval lies on the claim's side of 0, `not reproduced` when it lies
    on the other side, `inconclusive` when it contains 0.
  - "about equal": `reproduced` when the interval lies inside ±margin (the paper's own largest task difference
    between the two rows, `Finding.margin`: Table 3's 0.9 points), `not reproduced` when it lies outside, else
    `inconclusive`.
  - `inconclusive: one seed` when either side of a fine-tuned score has one seed: the seeds' spread is unknown, so no
    interval can decide (the items' interval alone is shown; it is the least the noise is). Departure from the
    issue's wording ("unless the item bootstrap alone decides it"): the items alone never decide a fine-tuned score,
    because in metaxlm's multi-seed runs the seeds' spread is as large as the differences judged.
  - `inconclusive: no interval` when nothing recorded makes one (a probe without per-pair outcomes, e.g. AER results
    written before they were recorded). Results written before per-item outcomes were recorded get an interval
    from their seeds alone (basis "seeds only").
  - `no data` when a mean is missing (NaN/null).
  - `cannot judge: both at chance` when both target averages sit at the task's chance level (within their seed
    spread or CHANCE_MARGIN_POINTS of the mean majority-class score of the target languages, which results.json
    records per language as "chance"): neither model has learned the task, so their order means nothing.
An undecided row states the smallest difference the run could have detected (80% power).
Per-layer claims on deterministic probes (`compare_layers`; no seeds, the interval over the test pairs): the
considered layers are those both models have a value for (minus the excluded ones). `reproduced` when the interval
lies on the claim's side at every considered layer, `not reproduced` when it lies on the other side at more than
half of them, `inconclusive` otherwise, `no data` without a considered layer. Retrieval at a random ranking's
accuracy@1 (1 / pairs) at every considered layer on both sides is `cannot judge: both at the probe's floor`.
The checkpoint claim (`compare_gap_trends`, paper Fig. 5 and Sec. 5.1: "METAXLM starts with a high transfer gap
but continually reduces the gap", while XLM's gap "has a fast increase" and then stays): on the transfer_gap of
each variant's checkpoint models (results with a step; at least two), MetaXLM's gap at its last checkpoint is
below its first ("less" above) and XLM's gap at its last checkpoint is above its first ("greater" above).
`reproduced` when both parts are, `not reproduced` when either part is not, `no data` when either lacks data,
else `inconclusive`. Departure: the paper's text gives the two trends but not which gap ends lower, so the final
ordering is shown but not judged.

Which numbers: the zero-shot findings use each task's `target_average` (mean over the non-source languages), for
every task both models ran zero-shot; the paper's Table 1 averages over all test languages, English included.
Tables 3-5 print no average: the paper figure shown is our mean of their five task columns (F1 for QA).
A finding whose role is not configured, or whose model has no results in the run, is listed as `not run`; a
finding whose models lack the data (task, probe set, checkpoints) gets `no data`. Without any `report.findings`
the report has no findings section and no findings.json.

Not checked: the paper's Table 5 gives no consistent direction for initializing one component against none
(Body 47.5, Emb 50.2, None 49.9 on average; "slight improvements on TyDiQA and PAWS-X, but harms the results on
the other three tasks"), so "Body > None" is not a finding of the paper; Both above Body and above Emb is.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from metaxlm.errors import DataError
from metaxlm.io import atomic_write_json, json_safe
from metaxlm.report.cells import DASH, cell, n_seeds, ordered, percent_scale
from metaxlm.report.document import Bullets, Section, Table, Text
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
from metaxlm.run.layout import RunDir

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NO_DATA, NOT_RUN = (
    "reproduced", "not reproduced", "inconclusive", "no data", "not run")
INCONCLUSIVE_ONE_SEED, INCONCLUSIVE_NO_INTERVAL = "inconclusive: one seed", "inconclusive: no interval"
AT_CHANCE, AT_FLOOR = "cannot judge: both at chance", "cannot judge: both at the probe's floor"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, INCONCLUSIVE_ONE_SEED, INCONCLUSIVE_NO_INTERVAL, AT_CHANCE,
            AT_FLOOR, NO_DATA, NOT_RUN)
# a score within this many points (percent) of its chance level, or within its seed spread, "sits at chance"
CHANCE_MARGIN_POINTS = 0.5
GREATER, LESS, ABOUT_EQUAL = "greater", "less", "about equal"

ROLE_LABELS = {"xlm": "XLM", "body": "Body init", "emb": "Emb init", "both": "MetaXLM", "both_dict": "MetaXLM+Dict",
               "frozen": "MetaXLM frozen body", "distill": "XLM+KD"}
ROLES = tuple(ROLE_LABELS)

TITLE = "The MetaXLM paper's findings, checked in direction"


# -- verdicts ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Measurement:
    """A score as mean ± std over fine-tuning seeds; NaN mean = missing, NaN std = one seed (no spread). Used for
    the chance-level check; verdicts use the interval of the difference (report/uncertainty.py)."""

    mean: float
    std: float = 0.0

    @classmethod
    def of(cls, stat: dict | None) -> Measurement:
        """From a results.json {"mean", "std"} entry (null -> NaN; no entry -> missing)."""
        stat = stat or {}
        return cls(number(stat.get("mean")), number(stat.get("std")))

    @property
    def missing(self) -> bool:
        return math.isnan(self.mean)

    @property
    def spread(self) -> float:
        return 0.0 if math.isnan(self.std) else abs(self.std)


def at_chance(m: Measurement, chance: float, scale: float) -> bool:
    """The score is no better than the best input-blind answer (Task.constant_predictions): within its seed spread
    or CHANCE_MARGIN_POINTS of the chance level `chance` (both in the entry's units; `scale` 100 for fractions)."""
    if m.missing or math.isnan(chance):
        return False
    return m.mean <= chance + max(m.spread, CHANCE_MARGIN_POINTS / scale)


def target_chance(task: dict) -> float:
    """The chance level of a zero-shot entry's target average: the mean of its target languages' majority-class
    scores (NaN when the entry has none, e.g. results written before they were recorded)."""
    chance = task.get("chance") or {}
    targets = [lang for lang in task.get("per_language", {}) if lang != task.get("source")]
    values = [number(chance.get(lang)) for lang in targets]
    return sum(values) / len(values) if values and not any(math.isnan(v) for v in values) else math.nan


def _holds(a: float, b: float, claim: str) -> bool:
    return a > b if claim == GREATER else a < b


def judge(d: Difference, claim: str, margin: float | None = None) -> str:
    """The verdict on "A is `claim` than B" (GREATER, LESS, or ABOUT_EQUAL within ±`margin`) from the 95% interval
    of A − B: rules in the module docstring."""
    if claim not in (GREATER, LESS, ABOUT_EQUAL):
        raise ValueError(f"judge: unknown claim {claim!r}")
    if claim == ABOUT_EQUAL and (margin is None or margin <= 0):
        raise ValueError("judge: an about-equal claim needs a positive margin")
    if math.isnan(d.estimate):
        return NO_DATA
    if d.basis == ONE_SEED:
        return INCONCLUSIVE_ONE_SEED
    if not d.decides:
        return INCONCLUSIVE_NO_INTERVAL
    if claim == ABOUT_EQUAL:
        if -margin < d.low and d.high < margin:
            return REPRODUCED
        return NOT_REPRODUCED if d.low >= margin or d.high <= -margin else INCONCLUSIVE
    above, below = d.low > 0, d.high < 0
    if not (above or below):
        return INCONCLUSIVE
    return REPRODUCED if above == (claim == GREATER) else NOT_REPRODUCED


def compare(a: Sample, b: Sample, claim: str, margin: float | None = None) -> tuple[str, Difference]:
    """The verdict on "a is `claim` than b" and the difference's interval it rests on."""
    d = difference(a, b)
    return judge(d, claim, margin), d


@dataclass(frozen=True)
class LayerComparison:
    verdict: str
    holds_at: list[int]     # considered layers where the interval puts the difference on the claim's side
    opposite_at: list[int]  # ... on the other side
    considered: list[int]   # layers both models have a value for, minus the excluded ones
    differences: dict[int, Difference] = field(default_factory=dict)


def compare_layers(a: dict[int, Sample], b: dict[int, Sample], claim: str,
                   exclude: tuple[int, ...] = ()) -> LayerComparison:
    """The verdict on "a is `claim` (GREATER or LESS) than b at every layer" for a deterministic probe (layer ->
    Sample): reproduced when the interval puts the difference on the claim's side at every considered layer, not
    reproduced when it puts it on the other side at more than half of them, inconclusive otherwise (no interval at
    any layer: inconclusive: no interval)."""
    if claim not in (GREATER, LESS):
        raise ValueError(f"compare_layers: claim must be {GREATER!r} or {LESS!r}, not {claim!r}")
    considered = sorted(layer for layer in a.keys() & b.keys()
                        if layer not in exclude and not math.isnan(a[layer].mean) and not math.isnan(b[layer].mean))
    differences = {layer: difference(a[layer], b[layer]) for layer in considered}
    verdicts = {layer: judge(d, claim) for layer, d in differences.items()}
    holds_at = [layer for layer in considered if verdicts[layer] == REPRODUCED]
    opposite_at = [layer for layer in considered if verdicts[layer] == NOT_REPRODUCED]
    if not considered:
        verdict = NO_DATA
    elif all(v == INCONCLUSIVE_NO_INTERVAL for v in verdicts.values()):
        verdict = INCONCLUSIVE_NO_INTERVAL
    elif len(holds_at) == len(considered):
        verdict = REPRODUCED
    elif 2 * len(opposite_at) > len(considered):
        verdict = NOT_REPRODUCED
    else:
        verdict = INCONCLUSIVE
    return LayerComparison(verdict, holds_at, opposite_at, considered, differences)


def combine(verdicts: list[str]) -> str:
    """Several parts of one claim: no data if any part has none, not reproduced if any part is not, reproduced
    if all are, one seed if a part is inconclusive for that reason, else inconclusive."""
    for decisive in (NO_DATA, NOT_REPRODUCED):
        if decisive in verdicts:
            return decisive
    if all(v == REPRODUCED for v in verdicts):
        return REPRODUCED
    for reason in (INCONCLUSIVE_ONE_SEED, INCONCLUSIVE_NO_INTERVAL):
        if reason in verdicts:
            return reason
    return INCONCLUSIVE


Series = list[tuple[int, Sample]]  # (pretraining step, transfer gap) per checkpoint, by step


def compare_gap_trends(metaxlm: Series, xlm: Series) -> tuple[str, str, str]:
    """(verdict, MetaXLM part, XLM part) of Fig. 5: MetaXLM's gap falls from its first to its last checkpoint and
    XLM's rises; each series needs two checkpoints."""
    def trend(series: Series, claim: str) -> str:
        return compare(series[-1][1], series[0][1], claim)[0] if len(series) >= 2 else NO_DATA

    falls, rises = trend(metaxlm, LESS), trend(xlm, GREATER)
    return combine([falls, rises]), falls, rises


# -- the paper's numbers -------------------------------------------------------------------------------------

TABLE1_TASKS = ("POS", "NER", "XQuAD", "MLQA", "TyDiQA", "XNLI", "PAWS-X")
# Table 1 (cross-lingual transfer, 5 seeds): per task as printed (QA: F1 of "F1 / EM"), and the printed Avg
# (which counts QA as the mean of F1 and EM).
TABLE1 = {"xlm": ((63.8, 51.0, 47.3, 39.9, 26.8, 57.9, 77.8), 49.2),
          "both": ((63.7, 54.0, 57.9, 51.5, 39.7, 64.6, 83.2), 55.7),
          "both_dict": ((67.4, 55.0, 64.4, 57.0, 44.4, 67.2, 84.2), 59.3)}
ABLATION_TASKS = ("XQuAD", "MLQA", "TyDiQA", "XNLI", "PAWS-X")  # QA: F1
# Tables 3-5 share the XLM (= Table 5's None) and MetaXLM (= Both) rows.
ABLATIONS = {"xlm": (47.3, 39.9, 26.8, 57.9, 77.8),
             "both": (57.9, 51.5, 39.7, 64.6, 83.2),
             "body": (43.5, 38.0, 28.4, 51.3, 76.1),     # Table 5
             "emb": (46.8, 39.4, 31.4, 55.7, 77.9),      # Table 5
             "frozen": (45.2, 41.1, 30.0, 53.8, 81.7),   # Table 4, "+freezing"
             "distill": (47.3, 40.4, 27.7, 57.9, 78.3)}  # Table 3, "XLM+KD"


def _in_direction(a: tuple, b: tuple, claim: str) -> str:
    if claim == ABOUT_EQUAL:
        return f"within {max(abs(x - y) for x, y in zip(a, b, strict=True)):.1f} on every task"
    word = "higher" if claim == GREATER else "lower"
    return f"{word} on {sum(_holds(x, y, claim) for x, y in zip(a, b, strict=True))} of {len(a)} tasks"


def table1_figure(a: str, b: str, claim: str) -> str:
    (scores_a, avg_a), (scores_b, avg_b) = TABLE1[a], TABLE1[b]
    return f"Avg {avg_a:.1f} vs {avg_b:.1f}; {_in_direction(scores_a, scores_b, claim)}"


def ablation_mean(role: str) -> float:
    """A Table 3-5 row's mean over its five tasks (the paper prints none)."""
    return sum(ABLATIONS[role]) / len(ABLATIONS[role])


def ablation_margin(a: str, b: str) -> float:
    """The about-equal margin the paper's own numbers give: the largest difference between the two rows over their
    tasks (Table 3, XLM+KD against XLM: 0.9 points)."""
    return round(max(abs(x - y) for x, y in zip(ABLATIONS[a], ABLATIONS[b], strict=True)), 1)


def ablation_figure(a: str, b: str, claim: str) -> str:
    return (f"{ablation_mean(a):.1f} vs {ablation_mean(b):.1f} (mean of {', '.join(ABLATION_TASKS)}); "
            f"{_in_direction(ABLATIONS[a], ABLATIONS[b], claim)}")


# -- the findings --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    claim: str     # as the report states it
    a: str         # role whose model is claimed `direction` than b's
    b: str
    direction: str  # GREATER, LESS or ABOUT_EQUAL (checkpoints: how a's gap moves; b's moves the other way)
    kind: str      # "tasks" (zero-shot target average), "retrieval", "alignment" (per layer), "checkpoints"
    source: str    # where in the paper
    paper: str     # the paper's figure
    margin: float | None = None  # ABOUT_EQUAL: the difference (points) within which the two count as equal


FINDINGS = (
    Finding("zero-shot transfer: MetaXLM above XLM", "both", "xlm", GREATER, "tasks", "Table 1",
            table1_figure("both", "xlm", GREATER)),
    Finding("zero-shot transfer: MetaXLM+Dict above MetaXLM", "both_dict", "both", GREATER, "tasks", "Table 1",
            table1_figure("both_dict", "both", GREATER)),
    Finding("sentence retrieval acc@1: MetaXLM above XLM at every layer", "both", "xlm", GREATER, "retrieval",
            "Fig. 3", "figure only"),
    Finding("word alignment AER: MetaXLM below XLM at every layer but 0", "both", "xlm", LESS, "alignment",
            "Fig. 4", "figure only"),
    Finding("initialization: Both above Emb only", "both", "emb", GREATER, "tasks", "Table 5",
            ablation_figure("both", "emb", GREATER)),
    Finding("initialization: Both above Body only", "both", "body", GREATER, "tasks", "Table 5",
            ablation_figure("both", "body", GREATER)),
    Finding("frozen body below full training (MetaXLM)", "frozen", "both", LESS, "tasks", "Table 4",
            ablation_figure("frozen", "both", LESS)),
    Finding("distillation (XLM+KD) about equal to XLM", "distill", "xlm", ABOUT_EQUAL, "tasks", "Table 3",
            ablation_figure("distill", "xlm", ABOUT_EQUAL), ablation_margin("distill", "xlm")),
    Finding("transfer gap across checkpoints: MetaXLM's falls, XLM's rises", "both", "xlm", LESS, "checkpoints",
            "Fig. 5", "figure only"),
)


@dataclass
class Check:
    """One row: a finding on one task or probe set (`on`), this run's figure and the verdict."""

    finding: Finding
    on: str
    measured: str
    verdict: str
    models: dict[str, str]                      # role -> model name
    numbers: dict = field(default_factory=dict)  # for findings.json (raw scores, as in results.json)

    def as_json(self) -> dict:
        f = self.finding
        return json_safe({"finding": f.claim, "source": f.source, "claim": {"a": f.a, "direction": f.direction,
                                                                            "b": f.b},
                          "on": self.on, "models": self.models, "paper": f.paper, "measured": self.measured,
                          "verdict": self.verdict, "numbers": self.numbers})


def _zero_shot_tasks(model: ModelResult) -> dict[str, dict]:
    return {name: task for name, task in model.data.get("tasks", {}).items()
            if task.get("scenario") == "zero_shot" and task.get("target_average") is not None}


def _difference_text(d: Difference, claim: str, verdict: str) -> str:
    """"difference +2.3 ± 1.1 (95%, items and seeds)", and for an undecided comparison the smallest difference the
    run could have detected."""
    text = f"difference {d.text()}"
    if d.basis not in (ONE_SEED, NO_INTERVAL):
        text += f" (95%, {d.basis})"
    elif d.basis == ONE_SEED and not math.isnan(d.half_width):
        text += f"; items alone ± {d.half_width:.1f}, the seeds' spread unknown"
    if verdict in (INCONCLUSIVE, INCONCLUSIVE_ONE_SEED) and not math.isnan(d.detectable):
        text += f"; smallest detectable {'≥ ' if d.basis == ONE_SEED else ''}{d.detectable:.1f}"
    return text


def _difference_json(d: Difference) -> dict:
    return {"estimate": d.estimate, "low": d.low, "high": d.high, "basis": d.basis, "detectable": d.detectable}


def _check_tasks(finding: Finding, a: ModelResult, b: ModelResult, models: dict) -> list[Check]:
    tasks_a, tasks_b = _zero_shot_tasks(a), _zero_shot_tasks(b)
    shared = [name for name in tasks_a if name in tasks_b]
    if not shared:
        return [Check(finding, "zero-shot tasks", "no zero-shot task with a target average in both", NO_DATA,
                      models)]
    checks = []
    for name in shared:
        task_a, task_b = tasks_a[name], tasks_b[name]
        scale = percent_scale([task_a, task_b])
        cells = [cell(t["target_average"], n_seeds(t), scale)[0] for t in (task_a, task_b)]
        seeds = " / ".join(dict.fromkeys(str(n_seeds(t)) for t in (task_a, task_b)))
        measured = f"{cells[0]} vs {cells[1]} ({seeds} seed(s))"
        samples = [task_sample(t, "target_average", scale) for t in (task_a, task_b)]
        verdict, d = compare(*samples, finding.direction, finding.margin)
        sides = [Measurement.of(t["target_average"]) for t in (task_a, task_b)]
        chance = [target_chance(t) for t in (task_a, task_b)]
        if verdict != NO_DATA and all(at_chance(m, c, scale) for m, c in zip(sides, chance, strict=True)):
            verdict = AT_CHANCE
            measured += f"; chance (majority class) {cell({'mean': chance[0]}, 1, scale)[0]}"
        if verdict != NO_DATA:
            measured += f"; {_difference_text(d, finding.direction, verdict)}"
        checks.append(Check(finding, f"{name} ({task_a.get('metric', 'score')}, target avg)", measured, verdict,
                            models, {"a": task_a["target_average"], "b": task_b["target_average"],
                                     "difference": _difference_json(d)}))
    return checks


def _per_layer(kind: str, entry: dict) -> dict[int, Sample]:
    """layer -> retrieval accuracy@1 (%) or test AER (%) as a Sample (with the per-pair items where recorded)."""
    if kind == "retrieval":
        return {layer: retrieval_sample(entry, layer) for layer in entry["layers"]}
    a = AlignmentResult.of(entry)
    return {layer: alignment_sample(entry, layer, aer) for layer, aer in zip(a.layers, a.test["aer"], strict=True)}


def retrieval_floor(entry: dict) -> float:
    """accuracy@1 of a random ranking, averaged over the set's languages (1 / pairs each); NaN when unknown."""
    pairs = [number((stat or {}).get("pairs")) for stat in entry.get("per_language", {}).values()]
    return sum(1 / n for n in pairs) / len(pairs) if pairs and all(n > 0 for n in pairs) else math.nan


def _aer_label(entry: dict) -> str:
    return "test AER" if AlignmentResult.of(entry).is_test else "AER, no dev split"


def _check_layers(finding: Finding, a: ModelResult, b: ModelResult, models: dict) -> list[Check]:
    """Retrieval average accuracy@1 (higher) or AER (lower, layer 0 = embeddings excluded as in the paper; on the
    test pairs, report/results.py AlignmentResult), judged at each layer by the interval over the test pairs."""
    kind = finding.kind
    probes_a, probes_b = a.data.get(kind, {}), b.data.get(kind, {})
    shared = [name for name in probes_a if name in probes_b]
    if not shared:
        return [Check(finding, f"{kind} sets", f"no {kind} set in both", NO_DATA, models)]
    exclude = (0,) if kind == "alignment" else ()
    checks = []
    for name in shared:
        by_layer = [_per_layer(kind, probes[name]) for probes in (probes_a, probes_b)]
        result = compare_layers(*by_layer, finding.direction, exclude)
        verdict = result.verdict
        word = "higher" if finding.direction == GREATER else "lower"
        bases = sorted({d.basis for d in result.differences.values()})
        pointwise = sum(_holds(d.estimate, 0.0, finding.direction) for d in result.differences.values())
        measured = f"{word} at {pointwise} of {len(result.considered)} layers"
        if any(d.decides for d in result.differences.values()):
            measured += (f", beyond noise at {len(result.holds_at)}, the opposite beyond noise at "
                         f"{len(result.opposite_at)} (95% intervals: {', '.join(bases)})")
        elif result.considered:
            measured += " (no interval: no per-pair outcomes recorded)"
        if kind == "retrieval" and result.considered:
            floors = [retrieval_floor(probes[name]) for probes in (probes_a, probes_b)]
            if all(at_chance(Measurement(values[layer].mean / 100), floor, 100.0)
                   for values, floor in zip(by_layer, floors, strict=True) for layer in result.considered):
                verdict = AT_FLOOR
                measured += f"; random ranking {floors[0] * 100:.1f}%"
        if result.considered:
            means = [sum(values[layer].mean for layer in result.considered) / len(result.considered)
                     for values in by_layer]
            measured += f"; mean over layers {means[0]:.1f} vs {means[1]:.1f} (%)"
            undecided = [d.detectable for layer, d in result.differences.items()
                         if layer not in result.holds_at + result.opposite_at and not math.isnan(d.detectable)]
            if undecided and verdict == INCONCLUSIVE:
                span = f"{min(undecided):.1f}" + (f"–{max(undecided):.1f}" if max(undecided) - min(undecided) >= 0.05
                                                   else "")
                measured += f"; smallest detectable at the undecided layers {span}"
        checks.append(Check(finding, f"{name} ({'acc@1' if kind == 'retrieval' else _aer_label(probes_a[name])})",
                            measured,
                            verdict, models,
                            {"layers": result.considered, "holds_at": result.holds_at,
                             "opposite_at": result.opposite_at,
                             "a": {layer: s.mean for layer, s in by_layer[0].items()},
                             "b": {layer: s.mean for layer, s in by_layer[1].items()},
                             "differences": {layer: _difference_json(d) for layer, d in result.differences.items()}}))
    return checks


def _checkpoints(model: ModelResult, run_results: list[ModelResult]) -> list[ModelResult]:
    """The model's variant's results with a pretraining step, by step (one per step)."""
    by_step: dict[int, ModelResult] = {}
    for r in run_results:
        if r.variant == model.variant and r.step is not None:
            by_step.setdefault(r.step, r)
    return [by_step[step] for step in sorted(by_step)]


def _gap_entries(checkpoints: list[ModelResult], task: str) -> list[tuple[int, dict]]:
    """(step, the zero-shot task's entry) at each checkpoint whose entry has a transfer gap."""
    entries = [(r.step, _zero_shot_tasks(r).get(task) or {}) for r in checkpoints]
    return [(step, entry) for step, entry in entries if entry.get("transfer_gap") is not None]


def _trend_text(points: list[tuple[int, dict]], scale: float) -> str:
    (first_step, first), (last_step, last) = points[0], points[-1]
    cells = [cell(entry["transfer_gap"], n_seeds(entry), scale)[0] for entry in (first, last)]
    return f"{cells[0]} → {cells[1]} (step {first_step} → {last_step})"


def _check_checkpoints(finding: Finding, a: ModelResult, b: ModelResult, models: dict,
                       run_results: list[ModelResult]) -> list[Check]:
    checkpoints = {"a": _checkpoints(a, run_results), "b": _checkpoints(b, run_results)}
    tasks = [task for task in dict.fromkeys(t for r in checkpoints["a"] for t in r.data.get("tasks", {}))
             if all(len(_gap_entries(side, task)) >= 2 for side in checkpoints.values())]
    if not tasks:
        return [Check(finding, "checkpoints", "no task with a transfer gap at two or more checkpoints of both",
                      NO_DATA, models)]
    checks = []
    for task in tasks:
        entries = {side: _gap_entries(ckpts, task) for side, ckpts in checkpoints.items()}
        scale = percent_scale([entry for points in entries.values() for _, entry in points])
        series = {side: [(step, task_sample(entry, "transfer_gap", scale)) for step, entry in points]
                  for side, points in entries.items()}
        verdict, falls, rises = compare_gap_trends(series["a"], series["b"])
        trends = {side: _trend_text(points, scale) for side, points in entries.items()}
        changes = {side: difference(points[-1][1], points[0][1]).text() for side, points in series.items()}
        measured = (f"{ROLE_LABELS[finding.a]} gap {trends['a']}, change {changes['a']}: falls {falls}; "
                    f"{ROLE_LABELS[finding.b]} gap {trends['b']}, change {changes['b']}: rises {rises}")
        checks.append(Check(finding, f"{task} (transfer gap)", measured, verdict, models,
                            {side: [[step, m.mean] for step, m in points] for side, points in series.items()}
                            | {"parts": {"a_falls": falls, "b_rises": rises}}))
    return checks


def run_roles(run_dir: Path) -> dict[str, str]:
    """role -> model name from the `report.findings` of `run`'s config.yaml ({} without one)."""
    roles = report_config(run_dir).findings
    unknown = sorted(set(roles) - set(ROLES))
    if unknown:
        raise DataError(RunDir(run_dir).config, None, f"report.findings: unknown role(s) {', '.join(unknown)} "
                                                   f"(roles: {', '.join(ROLES)})")
    return roles


def check_findings(roles: dict[str, str], run_results: list[ModelResult]) -> list[Check]:
    """Every finding on the models `roles` names (a role names a results.json's model_name) among the results of
    one run; [] without roles."""
    if not roles:
        return []
    by_model_name = {r.data["model_name"]: r for r in run_results}
    checks = []
    for finding in FINDINGS:
        pair = (finding.a, finding.b)
        models = {role: roles[role] for role in pair if role in roles}
        missing = [f"role {role} not set" if role not in roles else f"no results for {roles[role]}"
                   for role in pair if roles.get(role) not in by_model_name]
        if missing:
            checks.append(Check(finding, DASH, "; ".join(missing), NOT_RUN, models))
            continue
        a, b = by_model_name[roles[finding.a]], by_model_name[roles[finding.b]]
        if finding.kind == "tasks":
            checks += _check_tasks(finding, a, b, models)
        elif finding.kind in ("retrieval", "alignment"):
            checks += _check_layers(finding, a, b, models)
        else:
            checks += _check_checkpoints(finding, a, b, models, run_results)
    return checks


RULES = [
    "Every verdict rests on the 95% interval of the difference A − B (report/uncertainty.py): a paired bootstrap "
    "over the test items (the same resample for both models; corpus metrics recomputed from per-item statistics) "
    "combined with the spread over fine-tuning seeds (s²/n per model, Student's t at the Welch–Satterthwaite degrees "
    "of freedom). Greater/less: reproduced when the interval lies on the claim's side of 0, not reproduced when it "
    "lies on the other side, inconclusive when it contains 0. About equal: reproduced when the interval lies inside "
    "the stated margin (the paper's own largest task difference, e.g. Table 3's 0.9 points), not reproduced when it "
    "lies outside it, inconclusive otherwise.",
    "One seed on either side of a fine-tuned score: inconclusive: one seed (the seeds' spread is unknown, and in "
    "metaxlm's multi-seed runs it is as large as the differences judged); the items' interval is shown as the least "
    "the noise is. Results written before per-item outcomes were recorded get an interval from their seeds alone "
    "(marked seeds only / † in the tables: too narrow by the test items' noise); a probe without per-pair outcomes "
    "gets the binomial interval of accuracy@1 (‡) or, for AER, none (inconclusive: no interval).",
    "Layers (retrieval, AER; no seeds): the interval over the test pairs at each layer; reproduced when it lies on "
    "the claim's side at every layer both models have (AER: each gold set's test pairs; layer 0, the embeddings, "
    "left out as in the paper), not reproduced when it lies on the other side at more than half of them, "
    "inconclusive otherwise.",
    "Checkpoints (Fig. 5): MetaXLM's transfer gap at its last checkpoint below its first and XLM's above its "
    "first, each judged by the interval of last − first; reproduced when both parts are, not reproduced when either "
    "is not.",
    "An inconclusive row gives the smallest difference the run could have detected, (t 97.5% + t 80%) · SE: a true "
    "difference that large is found 80% of the time, so a small one means no effect of that size, a large one a run "
    "too small to tell.",
    "Zero-shot findings compare each task's average over the target languages (the paper's Table 1 averages all "
    "test languages, English included). Tables 3-5 print no average: their figure here is the mean of their five "
    "task columns (QA: F1). not run: a role is not set or its model has no results; no data: the models lack the "
    "task, probe or checkpoints.",
    f"Cannot judge: both models at the task's chance level — within their seed spread or {CHANCE_MARGIN_POINTS} "
    "points of the majority-class score (the best input-blind answer on each target language's test set, averaged) "
    "— or, for retrieval, both at a random ranking's accuracy@1 at every layer: neither side has learned the task, "
    "so their order says nothing. (AER has no such floor and is always judged.)",
    "Not checked: one-component initialization against none, for which Table 5 shows no consistent direction "
    f"(Body {ablation_mean('body'):.1f}, Emb {ablation_mean('emb'):.1f}, None {ablation_mean('xlm'):.1f} on "
    "average).",
]


def limits_section(final: list[ModelResult]) -> list[Section]:
    """"What this run can and cannot show", from the checks the verdicts use: tasks where models sit at chance,
    retrieval sets at a random ranking's floor, collapsed fine-tuning runs. None when nothing is limited."""
    bullets = []
    tasks = ordered(name for r in final for name in r.data.get("tasks", {}))
    for name in tasks:
        entries = {r.name: r.data["tasks"][name] for r in final if name in r.data.get("tasks", {})}
        at = []
        for model, t in entries.items():
            key = "target_average" if t.get("target_average") is not None else "average"
            chance = target_chance(t) if key == "target_average" else _mean_chance(t)
            if at_chance(Measurement.of(t.get(key)), chance, percent_scale([t])):
                at.append(model)
        if at:
            who = "every model" if len(at) == len(entries) else ", ".join(at)
            bullets.append(f"{name}: {who} at the task's chance level (the majority-class score): "
                           + ("the run cannot rank models on this task" if len(at) == len(entries) else
                              "those models have not learned it, their order against others says nothing")
                           + " — fine-tuning or pretraining is too short for it here.")
        collapsed = [f"{model} ({', '.join(sorted(t['collapsed']))})" for model, t in entries.items()
                     if t.get("collapsed")]
        if collapsed:
            bullets.append(f"{name}: fine-tuning collapsed (one answer for nearly every test item) in "
                           f"{'; '.join(collapsed)}; those scores are a prior, not transfer.")
    for name in ordered(n for r in final for n in r.data.get("retrieval", {})):
        entries = {r.name: r.data["retrieval"][name] for r in final if name in r.data.get("retrieval", {})}
        floors = {m: retrieval_floor(e) for m, e in entries.items()}
        if all(all(at_chance(Measurement(number(v)), floors[m], 100.0) for v in e.get("average", []))
               for m, e in entries.items()):
            bullets.append(f"retrieval {name}: every model at a random ranking's accuracy@1 at every layer: the "
                           f"encoders do not yet map translations together; their order says nothing.")
        elif entries and all(_best_layer(e) == 0 for e in entries.values()):
            bullets.append(f"retrieval {name}: every model retrieves best from its embeddings (layer 0): no layer "
                           f"maps translations together better than the tokens they share (numbers, names, "
                           f"markup), so the scores measure that overlap, not cross-lingual learning, and a model "
                           f"whose layers have barely trained keeps more of it at its last layer.")
    if not bullets:
        return []
    return [Section("What this run can and cannot show", [
        Text("Checked on these results (the same checks the verdicts use); a score at chance ranks nothing:"),
        Bullets(bullets)])]


def _best_layer(entry: dict) -> int | None:
    """The layer a retrieval entry is reported at, as the comparison table's "(layer N)" shows it: chosen on dev
    (or, in results without a dev split, the best on the pairs scored; report/results.py RetrievalResult)."""
    return RetrievalResult.of(entry).layer if entry.get("average") else None


def _mean_chance(task: dict) -> float:
    values = [number(v) for v in (task.get("chance") or {}).values()]
    return sum(values) / len(values) if values else math.nan


def findings_section(run_dir: Path, results: list[ModelResult], out_dir: Path) -> list[Section]:
    """The findings section of the report on `run`'s results (none when its config names no roles), and
    `out_dir/findings.json` beside report.md (removed when there are no findings, so it never describes an
    older report)."""
    roles = run_roles(run_dir)
    checks = check_findings(roles, [r for r in results if r.path.is_relative_to(RunDir(run_dir).eval)])
    path = Path(out_dir) / "findings.json"
    if not checks:
        path.unlink(missing_ok=True)
        return []
    counts = Counter(c.verdict for c in checks)
    summary = {v: counts[v] for v in VERDICTS if counts[v]}
    atomic_write_json(path, {"run": str(run_dir), "roles": roles, "summary": summary,
                             "findings": [c.as_json() for c in checks]})
    rows = [[c.finding.claim, c.on, f"{c.finding.source}: {c.finding.paper}", c.measured, c.verdict]
            for c in checks]
    return [Section(TITLE, [
        Text("Each finding of the MetaXLM paper is checked in direction only (this run is far smaller than the "
             "paper's) on the models the run's `report.findings` names: "
             + ", ".join(f"{ROLE_LABELS[role]} = `{name}`" for role, name in roles.items()) + "."),
        Table(["finding", "on", "paper", "this run", "verdict"], rows, text_columns=5,
              caption="This run: mean ± std over fine-tuning seeds (std left out for one seed), scores in percent "
                      "as in the task tables; the difference A − B ± the half-width of its 95% interval and what "
                      "the interval rests on."),
        Text("Verdicts: " + ", ".join(f"{n} {v}" for v, n in summary.items()) + " (also in `findings.json`). "
             "Rules:"),
        Bullets(RULES)])]
