"""The README's head-to-head table: the final models of the comparison runs side by side, from their results.

    python -m tools.head_to_head docs/results/compare docs/results/compare-from-metaxlm

Each argument is a run directory (`eval/<model>/results.json`) or a published copy of one (`results.<model>.json`
beside its `config.yaml`, as under docs/results/). Per run, four columns, the cells of the run's report
(report/comparison.py `headline_scores`): SIB-200 and UD POS zero-shot from English (target average, mean ± std
over fine-tuning seeds), Tatoeba accuracy@1 at the last layer, and the de-en test AER at the layer chosen on its dev
part. **Bold**: the 95% interval of the difference to the run's control (`report.control`) excludes 0
(report/comparison.py `beyond_noise`: test items and seeds; a fine-tuned score from one seed is never bold); *italic*:
at the task's chance level, the majority-class score (report/findings.py `at_chance`), so it ranks nothing.
tools/tests/test_head_to_head.py checks that the README's table is this output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from metaxlm.errors import MetaXLMError
from metaxlm.report.cells import DASH, percent_scale
from metaxlm.report.comparison import Score, beyond_noise, headline_scores
from metaxlm.report.findings import Measurement, at_chance, target_chance
from metaxlm.report.results import (
    ModelResult,
    collect_results,
    final_models,
    load_results,
    report_config,
    variant_order,
)

# (header, headline column of report/comparison.py, task whose chance level applies)
COLUMNS = (("SIB-200", "sib200: target avg", "sib200"), ("UD POS", "udpos: target avg", "udpos"),
           ("Tatoeba", "tatoeba: acc@1 last", None), ("AER", "de-en: test AER", None))
LABELS = {"mlm_only": "MLM only", "mlm_tlm": "MLM + TLM", "xlm_align": "XLM-Align", "ppa": "PPA",
          "veco": "VECO (encoder)", "xlm_align_ppa": "XLM-Align → PPA", "start": "the start itself"}


def run_models(run_dir: Path) -> list[ModelResult]:
    """The final model of each variant, in the run config's variant order (models outside it, e.g. the start, last)."""
    if (run_dir / "eval").is_dir():
        return final_models(collect_results([run_dir]))
    paths = sorted(run_dir.glob("results.*.json"))
    if not paths:
        raise MetaXLMError(f"{run_dir}: neither eval/*/results.json nor results.<model>.json")
    order = variant_order(run_dir)
    found = []
    for path in paths:
        data = load_results(path)
        variant = data.get("variant") or data["model_name"]
        found.append(ModelResult(data["model_name"], variant, data.get("step"), data, path))
    found.sort(key=lambda m: order.index(m.variant) if m.variant in order else len(order))
    return final_models(found)


def _shown(score: Score, column: str) -> str:
    if score.missing:
        return DASH
    return f"{score.mean:.1f}" if "AER" in column else score.text  # AER without its "(layer N)"


def _chance(model: ModelResult, task: str | None, scales: dict[str, float]) -> bool:
    entry = model.data.get("tasks", {}).get(task) if task else None
    if not entry:
        return False
    return at_chance(Measurement.of(entry.get("target_average")), target_chance(entry), scales[task])


def run_cells(run_dir: Path) -> tuple[str, dict[str, list[str]]]:
    """The run's control (a variant) and {variant: its four cells, marked}."""
    models = run_models(run_dir)
    control = report_config(run_dir).control
    by_variant = {m.variant: m for m in models}
    if control not in by_variant:
        raise MetaXLMError(f"{run_dir}: report.control {control!r} is none of its models ({', '.join(by_variant)})")
    _, scores = headline_scores(models)
    scales = {task: percent_scale([m.data["tasks"][task] for m in models if task in m.data.get("tasks", {})])
              for _, _, task in COLUMNS if task}  # one unit per task column, as the report's
    cells = {}
    for m in models:
        row = []
        for _, column, task in COLUMNS:
            score = scores[m.name].get(column)
            if score is None:
                row.append(DASH)
                continue
            text = _shown(score, column)
            if _chance(m, task, scales):
                text = f"*{text}*"
            if beyond_noise(score, scores[by_variant[control].name][column]):
                text = f"**{text}**"
            row.append(text)
        cells[m.variant] = row
    return control, cells


def head_to_head(runs: list[Path]) -> str:
    """The Markdown table: one row per variant (in the first run's order), four columns per run (`n: SIB-200`...)."""
    per_run = [run_cells(run) for run in runs]
    variants = list(dict.fromkeys(v for _, cells in per_run for v in cells))
    control = per_run[0][0]
    header = ["model", *(f"{i}: {name}" for i in range(1, len(runs) + 1) for name, _, _ in COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for v in variants:
        label = LABELS.get(v, v) + (" (control)" if v == control else "")
        row = [c for _, cells in per_run for c in cells.get(v, [DASH] * len(COLUMNS))]
        lines.append("| " + " | ".join([label, *row]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.head_to_head", description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories or their published results, in order")
    args = parser.parse_args(argv)
    try:
        print(head_to_head(args.runs))
    except MetaXLMError as err:
        print(f"head_to_head: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
