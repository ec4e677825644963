"""Remake every published report under docs/results/ from its committed results with today's report code.

    python -m tools.regenerate_reports                 # rewrite report.md, findings.json and figures/ in place
    python -m tools.regenerate_reports --check         # exit 1 naming each report that differs (tests run this)
    python -m tools.regenerate_reports docs/results/ppa --check

A published run (tools/publish_run.py) holds its results as `results.<model>.json` beside its `config.yaml`,
`run_info.json`, `timings.json`, `pretraining.json` / `pretraining.md` and each pretraining's `metrics.<variant>.jsonl`
and `summary.<variant>.json` (older publications: `comparison.json` as is). What a run did not publish cannot be made
again: a report section that needs it says what is missing (e.g. the budget table of runs published without their
pretraining records). Each is laid out again as the run directory
its config names (`output_dir`, e.g. runs/compare, under a temporary directory, so the report names the same paths
as the original did), and `metaxlm report`'s own `write_report` writes the report; report.md and findings.json are
copied back (findings.json removed when the report has none) and so are the report's figures — the pretraining
figures publish_run added beside them are kept. No model is loaded and nothing is retrained: the report reads only
the results.

The committed report therefore always equals what the current code makes from the committed results
(tools/tests/test_regenerate_reports.py); a change to the report code that changes a verdict shows up as a diff of
the committed reports, to be regenerated and explained in the same commit.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import yaml

from metaxlm.errors import MetaXLMError

RESULTS = Path("docs/results")
# published name -> name in the run directory (publish_run's COPIED, reversed)
RUN_FILES = {"config.yaml": "config.yaml", "run_info.json": "run_info.json", "timings.json": "timings.json",
             "pretraining.json": "comparison.json", "pretraining.md": "comparison.md",
             "comparison.json": "comparison.json", "comparison.md": "comparison.md"}  # older publications: as is
COMPARED = ("report.md", "findings.json")


def published_runs(root: Path = RESULTS) -> list[Path]:
    """Every published run under `root`: a folder with a report.md and a config.yaml."""
    return sorted(p.parent for p in root.glob("*/report.md") if (p.parent / "config.yaml").is_file())


def _output_dir(published: Path) -> Path:
    config = yaml.safe_load((published / "config.yaml").read_text(encoding="utf-8")) or {}
    out = Path(str(config.get("output_dir") or f"runs/{published.name}"))
    if out.is_absolute() or ".." in out.parts:
        raise MetaXLMError(f"{published / 'config.yaml'}: output_dir {out} is not a relative path inside the run "
                           f"folder; cannot lay the run out again")
    return out


@contextmanager
def _in_directory(path: Path):
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def regenerate(published: Path, scratch: Path) -> dict[str, str | None]:
    """The files the current report code makes from `published`'s results: {name: text or None (not made)} for
    COMPARED, the figures written under `scratch`/figures."""
    from metaxlm.report.evaluation import write_report

    out = _output_dir(published)
    run = scratch / "layout" / out
    run.mkdir(parents=True)
    for name, target in RUN_FILES.items():
        if (published / name).is_file():
            shutil.copy2(published / name, run / target)
    for path in sorted(published.glob("results.*.json")):
        model = path.name.removeprefix("results.").removesuffix(".json")
        (run / "eval" / model).mkdir(parents=True)
        shutil.copy2(path, run / "eval" / model / "results.json")
    for path in sorted([*published.glob("metrics.*.jsonl"), *published.glob("summary.*.json")]):
        stem, variant, suffix = path.name.split(".", 1)[0], *path.name.split(".", 1)[1].rsplit(".", 1)
        root = run / "meta" if variant == "meta" else run / "pretrain" / variant
        root.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, root / f"{stem}.{suffix}")
    if (run / "comparison.json").is_file() and not (run / "comparison.md").is_file():
        # published before the comparison's markdown travelled with it: made again from its numbers, as the
        # pretrain stage writes it
        from metaxlm.report.pretraining import comparison_markdown

        comparison = json.loads((run / "comparison.json").read_text(encoding="utf-8"))
        (run / "comparison.md").write_text(comparison_markdown(comparison), encoding="utf-8")
    with _in_directory(scratch / "layout"):
        write_report([out])
    report = run / "report"
    if (report / "figures").is_dir():
        shutil.copytree(report / "figures", scratch / "figures")
    return {name: (report / name).read_text(encoding="utf-8") if (report / name).is_file() else None
            for name in COMPARED}


@contextmanager
def _figures_not_drawn():
    """Figures laid out but not drawn (report/plots.py `_save` closes them and writes an empty file): report.md names
    them, their pixels are not what --check compares, and drawing is most of a report's time."""
    from metaxlm.report import plots

    def close_only(fig, path: Path) -> None:
        Path(path).write_bytes(b"")
        plots._pyplot().close(fig)

    drawn = plots._save
    plots._save = close_only
    try:
        yield
    finally:
        plots._save = drawn


def differences(published: Path) -> list[str]:
    """What differs between `published`'s committed report files and the regenerated ones (empty: the same)."""
    with tempfile.TemporaryDirectory() as tmp, _figures_not_drawn():
        made = regenerate(published, Path(tmp))
    problems = []
    for name, text in made.items():
        path = published / name
        committed = path.read_text(encoding="utf-8") if path.is_file() else None
        if committed == text:
            continue
        if committed is None or text is None:
            problems.append(f"{path}: {'not committed' if committed is None else 'not made by the current code'}")
            continue
        diff = list(difflib.unified_diff(committed.splitlines(), text.splitlines(), "committed", "current code",
                                         lineterm="", n=0))
        problems.append(f"{path}: differs from what the current code makes ({len(diff)} diff lines), e.g.\n"
                        + "\n".join(diff[:12]))
    return problems


def write(published: Path) -> None:
    """Replace `published`'s report files with the regenerated ones (its other figures kept)."""
    with tempfile.TemporaryDirectory() as tmp:
        made = regenerate(published, Path(tmp))
        for name, text in made.items():
            if text is None:
                (published / name).unlink(missing_ok=True)
            else:
                (published / name).write_text(text, encoding="utf-8")
        figures = Path(tmp) / "figures"
        if figures.is_dir():
            (published / "figures").mkdir(exist_ok=True)
            for png in sorted(figures.glob("*.png")):
                shutil.copy2(png, published / "figures" / png.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.regenerate_reports", description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="*", type=Path, help="published runs (default: every one under docs/results)")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when a report differs")
    args = parser.parse_args(argv)
    runs = args.runs or published_runs()
    failed = []
    try:
        for published in runs:
            if args.check:
                problems = differences(published)
                failed += problems
                print(f"{published}: {'differs' if problems else 'as committed'}")
            else:
                write(published)
                print(f"{published}: regenerated")
    except MetaXLMError as err:
        print(f"regenerate_reports: error: {err}", file=sys.stderr)
        return 2
    for problem in failed:
        print(problem, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
