"""A zero-shot model's target average against its task's chance level, with the 95% interval the reports use.

    python -m tools.above_chance docs/results/reproduce-metaxlm-10x xlm module spans

The chance level is the report's (metaxlm.report.findings.target_chance: the mean over the target languages of
the best input-blind answer, Task.constant_predictions, scored on each test set). The interval of
score − chance is metaxlm.report.uncertainty's: a bootstrap over the test items (where the results record them)
plus the seeds' part, Student's t; chance is a fixed number computed on the test set, so it adds no noise. The
reports only flag a model as at chance (within its seed spread or 0.5 points); this says by how much it is above.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from metaxlm.report.cells import percent_scale
from metaxlm.report.findings import target_chance
from metaxlm.report.uncertainty import Difference, Sample, difference, task_sample


def above_chance(entry: dict) -> tuple[float, float, Difference]:
    """(target average, chance, target average − chance with its interval), in report units."""
    scale = percent_scale([entry])
    chance = target_chance(entry) * scale
    score = task_sample(entry, "target_average", scale)
    # the chance level as a side of no seeds and no items (empty weights: it resamples to itself)
    fixed = Sample((chance,), {} if score.items is not None else None, {}, scale, seeded=False)
    return score.mean, chance, difference(score, fixed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.above_chance", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a run's results folder (results.<model>.json)")
    parser.add_argument("model")
    parser.add_argument("tasks", nargs="+")
    args = parser.parse_args(argv)
    path = args.folder / f"results.{args.model}.json"
    if not path.is_file():
        raise SystemExit(f"above_chance: {path} not found")
    tasks = json.loads(path.read_text(encoding="utf-8")).get("tasks", {})
    print("| model | task | target avg | chance | difference (95%) | interval | above chance |")
    print("|---|---|---:|---:|---:|---|---|")
    for task in args.tasks:
        if task not in tasks:
            raise SystemExit(f"above_chance: {path}: no task {task!r} (tasks: {', '.join(tasks)})")
        score, chance, diff = above_chance(tasks[task])
        if math.isnan(chance):
            raise SystemExit(f"above_chance: {path}: task {task!r} records no chance level")
        verdict = ("cannot tell" if not diff.decides else "yes" if diff.low > 0 else "below" if diff.high < 0
                   else "not shown (the interval holds chance)")
        print(f"| {args.model} | {task} | {score:.2f} | {chance:.2f} | {diff.text(2)} | [{diff.low:.2f}, "
              f"{diff.high:.2f}] ({diff.basis}) | {verdict} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
