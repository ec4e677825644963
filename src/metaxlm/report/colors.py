"""One colour per model in every figure of a report and in its runs' pretraining plots.

A colour comes from a name's position in one ordered list, never from a figure's own lines, so a model missing
from one figure does not shift the colours of the others. The list: each run (in the order given) with its
config's variants in declared order (what results.collect_results sorts by), then the models its results name
outside any variant; a variant's checkpoints (`metaxlm@step50`) share the variant's colour. The pretraining plots
(report/pretraining.py) start from the same config order, so a variant keeps its colour there too.

Every section and plot takes the mapping as `colors: dict[str, str]` (name -> colour); `report_colors` gives it
for a report, with an entry for each model name and each variant name.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from metaxlm.report.results import ModelResult, variant_order
from metaxlm.run.layout import RunDir

# matplotlib's tab10, with red second so the first two variants (usually baseline and method) differ most.
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]


def colors_for(names: Iterable[str]) -> dict[str, str]:
    """Palette colours in order of each name's first appearance (repeating after ten names)."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(dict.fromkeys(names))}


def _pretrained_variants(run_dir: Path) -> list[str]:
    """The variants of a run's pretraining comparison, for a run whose config.yaml does not list them."""
    try:
        return list(json.loads(RunDir(run_dir).comparison_json.read_text(encoding="utf-8"))["final"])
    except (OSError, ValueError, KeyError, TypeError):
        return []  # the report's pretraining section names a bad file; colours only need the names


def run_variant_colors(run_dir: Path, variants: Iterable[str] = ()) -> dict[str, str]:
    """Colours of one run's variants as the run's own report gives them: config order, then `variants`."""
    return colors_for([*variant_order(run_dir), *variants])


def report_variant_names(run_dirs: list[Path], results: list[ModelResult]) -> dict[Path, dict[str, str]]:
    """Per run: each of its variants (config order, then the ones only its results name) -> the variant's name in
    the report, which carries the run's name as a prefix when two runs share a model name (collect_results)."""
    names: dict[Path, dict[str, str]] = {}
    for run in run_dirs:
        reported = {r.own_variant: r.variant for r in results if r.run == run}
        variants = [*variant_order(run), *_pretrained_variants(run), *reported]
        # A variant without results gets the run's prefix in a report of several runs: another run may have it too.
        names[run] = {v: reported.get(v, f"{run.name}/{v}" if len(run_dirs) > 1 else v)
                      for v in dict.fromkeys(variants)}
    return names


def report_colors(run_dirs: list[Path], results: list[ModelResult]) -> dict[str, str]:
    """The report's colours: variant name -> colour, and model name -> its variant's colour."""
    by_variant = colors_for(name for names in report_variant_names(run_dirs, results).values()
                            for name in names.values())
    return {**by_variant, **{r.name: by_variant[r.variant] for r in results}}
