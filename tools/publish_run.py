"""Publish a finished run's small results under docs/results/<name>/: what a reader checks, never weights.

    python -m tools.publish_run runs/compare docs/results/compare

Copies, renamed where the run's own name says less out of context:
- `config.yaml` (the resolved config), `run_info.json` (every invocation's time, versions, CPU), `timings.json`;
- `report/report.md` → `report.md`, `report/findings.json` when there is one, and `report/figures/*.png` → `figures/`
  (report.md links its figures as `figures/<name>.png`);
- `comparison.json` / `comparison.md` (the pretraining comparison) → `pretraining.json` / `pretraining.md`, the
  links to the figures beside comparison.md pointed into `figures/` (the report's identical copy, else a copy);
- `eval/<model>/results.json` → `results.<model>.json`;
- each pretraining's records, `pretrain/<variant>/metrics.jsonl` and `summary.json` → `metrics.<variant>.jsonl` and
  `summary.<variant>.json` (MetaXLM's English phase, `meta/`: as variant `meta`), which the report's budget table
  reads: tools/regenerate_reports lays them out again to remake the report from what is published.
Then `python -m tools.regenerate_reports <dest>`: the report a run's report stage wrote still counts that
invocation as running, and the committed report must equal what the current code makes from the published files
(tools/tests/test_regenerate_reports.py). The destination is replaced as a whole (written beside it, then swapped), so a
stale file of an earlier run never stays behind. The report is required: publish after `metaxlm report` (or the run's
report stage) has written it.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

from metaxlm.errors import MetaXLMError
from metaxlm.io import atomic_dir

COPIED = {"config.yaml": "config.yaml", "run_info.json": "run_info.json", "timings.json": "timings.json",
          "report/report.md": "report.md", "report/findings.json": "findings.json",
          "comparison.json": "pretraining.json", "comparison.md": "pretraining.md"}
ARCHIVE = "finished-runs"  # evaluate.finished_runs pointed into the published folder (docs/results/code-switching)
REQUIRED = ("config.yaml", "run_info.json", "report/report.md")
_IMAGE_LINK = re.compile(r"(!\[[^\]]*\]\()([^)\s/]+\.png)(\))")  # a figure beside the markdown file


def publish(run_dir: Path, dest: Path) -> list[str]:
    """Copy `run`'s small results into `dest` (replaced); the names written, sorted."""
    missing = [name for name in REQUIRED if not (run_dir / name).is_file()]
    if missing:
        raise MetaXLMError(f"{run_dir}: not a finished, reported run (missing {', '.join(missing)})")
    results = sorted((run_dir / "eval").glob("*/results.json"))
    if not results:
        raise MetaXLMError(f"{run_dir}: no eval/<model>/results.json to publish")
    with atomic_dir(dest) as tmp:
        if (dest / ARCHIVE).is_dir():  # an evaluate.finished_runs archive kept here is the run's input, not output
            shutil.copytree(dest / ARCHIVE, tmp / ARCHIVE)
        for source, name in COPIED.items():
            if (run_dir / source).is_file():
                shutil.copy2(run_dir / source, tmp / name)
        for path in results:
            shutil.copy2(path, tmp / f"results.{path.parent.name}.json")
        for name, variant in pretraining_records(run_dir).items():
            shutil.copy2(variant, tmp / name)
        figures = sorted((run_dir / "report" / "figures").glob("*.png"))
        if figures:
            (tmp / "figures").mkdir()
            for path in figures:
                shutil.copy2(path, tmp / "figures" / path.name)
        if (tmp / "pretraining.md").is_file():
            _publish_linked_figures(run_dir, tmp / "pretraining.md", tmp / "figures")
    return sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())


def pretraining_records(run_dir: Path) -> dict[str, Path]:
    """{published name: path} of every pretraining's metrics.jsonl and summary.json in `run`."""
    roots = {p.name: p for p in sorted((run_dir / "pretrain").glob("*")) if p.is_dir()}
    if (run_dir / "meta").is_dir():
        roots["meta"] = run_dir / "meta"
    return {f"{stem}.{name}{suffix}": root / f"{stem}{suffix}" for name, root in roots.items()
            for stem, suffix in (("metrics", ".jsonl"), ("summary", ".json")) if (root / f"{stem}{suffix}").is_file()}


def _publish_linked_figures(run_dir: Path, markdown: Path, figures: Path) -> None:
    """Point `markdown`'s links to run-root figures at `figures/`: the report's identical copy when it has one (the
    report embeds the pretraining figures too), else a copy under the figure's own name."""
    source_md = run_dir / "comparison.md"
    by_content: dict[bytes, str] = {}  # each published figure read once, however many links there are
    for path in sorted(figures.glob("*.png")):
        by_content.setdefault(path.read_bytes(), path.name)

    def moved(match: re.Match) -> str:
        name = match.group(2)
        source = run_dir / name
        if not source.is_file():
            raise MetaXLMError(f"{source_md}: links {name}, which is not in {run_dir}")
        data = source.read_bytes()
        if data not in by_content:
            if (figures / name).is_file():
                raise MetaXLMError(f"{source_md}: its figure {name} would overwrite the report's different figure "
                                   f"of the same name")
            figures.mkdir(exist_ok=True)
            shutil.copy2(source, figures / name)
            by_content[data] = name
        return f"{match.group(1)}figures/{by_content[data]}{match.group(3)}"

    markdown.write_text(_IMAGE_LINK.sub(moved, markdown.read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.publish_run", description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="the run directory (its output_dir)")
    parser.add_argument("dest", type=Path, help="where to publish, e.g. docs/results/<name> (replaced)")
    args = parser.parse_args(argv)
    try:
        written = publish(args.run, args.dest)
    except MetaXLMError as err:
        print(f"publish_run: error: {err}", file=sys.stderr)
        return 2
    print(f"published {len(written)} files to {args.dest}: {', '.join(written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
