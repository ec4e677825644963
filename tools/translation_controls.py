"""Translation rows against each other, with 95% intervals: docs/veco.md's verdict table for VECO's controls.

    python -m tools.translation_controls docs/results/translation/with-controls --language de \\
        "mlm_control/mt_mlm_encoder - start/mt_start_encoder" "veco/mt_veco - start/mt_start_encoder"

Each row is a task of one model (`eval/<model>/results.json` of a report folder, e.g. one written by
`metaxlm report --finished-runs ... --records ...`), so rows fine-tuned under different task names (one per
initialization in configs/translation.yaml) can be compared, which the report's tables, a column per task, do not.
Prints one markdown row per pair: A − B for the task's metric (BLEU) and its further scores (chrF), each with the
interval of metaxlm.report.uncertainty (paired bootstrap over the test items where both record them, plus the
seeds' part; † seeds only), the rules the reports' verdicts use.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from metaxlm.report.uncertainty import SEEDS_ONLY, Sample, difference, task_sample


def _row_sample(folder: Path, row: str, language: str, metric: str | None) -> Sample:
    model, _, task = row.strip().partition("/")
    path = folder / "eval" / model / "results.json"
    if not path.is_file():
        raise SystemExit(f"translation_controls: {path} not found")
    tasks = json.loads(path.read_text(encoding="utf-8")).get("tasks", {})
    if task not in tasks:
        raise SystemExit(f"translation_controls: {path}: no task {task!r} (tasks: {', '.join(tasks)})")
    return task_sample(tasks[task], language, 1.0, metric)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a report folder with eval/<model>/results.json")
    parser.add_argument("pairs", nargs="+", help='"modelA/taskA - modelB/taskB"')
    parser.add_argument("--language", required=True, help="the target language of the direction (e.g. de)")
    parser.add_argument("--metrics", default="bleu,chrf", help="the task's metric first, then its further scores")
    args = parser.parse_args(argv)
    metrics = args.metrics.split(",")
    print("| A − B | " + " | ".join(metrics) + " |")
    print("|---|" + "---:|" * len(metrics))
    for pair in args.pairs:
        if " - " not in pair:
            raise SystemExit(f"translation_controls: {pair!r}: write a pair as \"modelA/taskA - modelB/taskB\"")
        a, b = pair.split(" - ", 1)
        cells = []
        for i, metric in enumerate(metrics):
            key = None if i == 0 else metric
            d = difference(_row_sample(args.folder, a, args.language, key),
                           _row_sample(args.folder, b, args.language, key))
            mark = "†" if d.basis == SEEDS_ONLY else ""
            cells.append(f"{d.estimate:+.1f} [{d.low:+.1f}, {d.high:+.1f}]{mark} ({d.basis})")
        print(f"| {a.strip()} − {b.strip()} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
