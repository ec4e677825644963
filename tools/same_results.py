"""Check that a change left a run's computation alone: two runs of one config, at two commits, compared.

    git worktree add /tmp/before <commit>                   # the code before the change
    cd /tmp/before && PYTHONPATH=src OMP_NUM_THREADS=1 python -m metaxlm.cli run configs/demo.yaml \\
        output_dir=/tmp/runs/before <overrides> --no-progress
    # ... the same from a checkout of the change, output_dir=/tmp/runs/after
    python -m tools.same_results /tmp/runs/before /tmp/runs/after

Compares every weight file (`*.safetensors`: final models, checkpoints, start models) byte for byte, every
`eval/<model>/results.json` as data (paths, times and keys that only the newer code writes left out: `--ignore`),
the report's Markdown tables, and the pretraining comparison. Exit status 0 when all are the same, 1 otherwise
(each difference listed). Both runs need the same thread count and precision (fp32, or one CPU kind for `auto`):
floating-point sums depend on them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

# wall-clock times and paths differ between any two runs (a fine-tuning run's training seconds too)
IGNORED_KEYS = ("model_dir", "seconds", "started", "finished", "report_hints", "written", "train_seconds",
                "train_seconds_by_machine")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _scrub(value, ignored: tuple[str, ...]):
    if isinstance(value, dict):
        return {k: _scrub(v, ignored) for k, v in value.items() if k not in ignored}
    if isinstance(value, list):
        return [_scrub(v, ignored) for v in value]
    return value


def _table_rows(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("|")] \
        if path.exists() else []


def compare(before: Path, after: Path, ignored: tuple[str, ...] = IGNORED_KEYS) -> list[str]:
    """The differences between two run directories (empty: the same), after printing what was compared."""
    problems = []
    weights = sorted({p.relative_to(before) for p in before.rglob("*.safetensors")} |
                     {p.relative_to(after) for p in after.rglob("*.safetensors")})
    for rel in weights:
        if not (before / rel).exists() or not (after / rel).exists():
            problems.append(f"weights {rel}: only in {'after' if (after / rel).exists() else 'before'}")
        elif _sha(before / rel) != _sha(after / rel):
            problems.append(f"weights {rel}: different bytes")
    results = sorted({p.relative_to(before) for p in before.glob("eval/*/results.json")} |
                     {p.relative_to(after) for p in after.glob("eval/*/results.json")})
    for rel in results:
        if not (before / rel).exists() or not (after / rel).exists():
            problems.append(f"{rel}: only in one run")
        elif _scrub(json.loads((before / rel).read_text()), ignored) != \
                _scrub(json.loads((after / rel).read_text()), ignored):
            problems.append(f"{rel}: different results")
    for rel in ("report/report.md", "comparison.md"):
        if _table_rows(before / rel) != _table_rows(after / rel):
            problems.append(f"{rel}: different tables")
    print(f"compared {len(weights)} weight files, {len(results)} results.json, the tables of report/report.md and "
          f"comparison.md: {len(problems)} difference(s)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--ignore", nargs="*", default=list(IGNORED_KEYS), help="results.json keys left out")
    args = parser.parse_args(argv)
    problems = compare(args.before, args.after, tuple(args.ignore))
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
