"""A post-trained encoder against its start, on test, with 95% intervals: the README's "Make your encoder better" table.

    python -m tools.start_vs_result docs/results/align-encoder --model align --start start

Reads the published `results.<model>.json` of both models (tools/publish_run.py) and prints one markdown row per
headline: Tatoeba acc@1 (mean over its languages, at each model's dev-chosen layer), test AER of each alignment set
and their mean (each model at its own dev-chosen layer), and each fine-tuning task's zero-shot target average over
the seeds. Every interval is metaxlm.report.uncertainty's (paired bootstrap over the test items, plus the seeds'
part for fine-tuned scores), so these are the rules the reports' verdicts use. Nothing is chosen here: the layers
are the ones the evaluation chose on dev.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from metaxlm.report.results import AlignmentResult, RetrievalResult, load_results
from metaxlm.report.uncertainty import Sample, alignment_sample, difference, retrieval_sample, task_sample


def _load(folder: Path, model: str) -> dict:
    path = folder / f"results.{model}.json"
    if not path.is_file():
        raise SystemExit(f"start_vs_result: {path} not found (publish the run with tools.publish_run first)")
    return load_results(path)


def _aer_sample(entry: dict) -> Sample:
    """Test AER at the reported (dev-chosen) layer, as the report reads it."""
    result = AlignmentResult.of(entry)
    return alignment_sample(entry, result.layer, result.at_layer("aer"))


def _mean_of(samples: dict[str, Sample]) -> Sample:
    """The unweighted mean of single-item-set samples (the alignment sets), their items kept apart."""
    items = {name: s.items["pairs"] for name, s in samples.items()} if all(s.items for s in samples.values()) else None
    mean = sum(s.mean for s in samples.values()) / len(samples)
    return Sample((mean,), items, {name: 1 / len(samples) for name in samples}, 100.0, seeded=False)


def rows(folder: Path, model: str, start: str) -> list[tuple[str, float, float, str, str]]:
    """(headline, start, result, difference with its interval, verdict) per headline."""
    a, b = _load(folder, model), _load(folder, start)
    out = []

    def add(name: str, sa: Sample, sb: Sample, lower_better: bool = False) -> None:
        d = difference(sa, sb)
        improved = d.estimate < 0 if lower_better else d.estimate > 0
        verdict = ("better" if improved else "worse") if d.significant else "within the noise"
        out.append((name, sb.mean, sa.mean, f"{d.estimate:+.2f} [{d.low:+.2f}, {d.high:+.2f}]", verdict))

    for name in a.get("retrieval", {}):
        ea, eb = a["retrieval"][name], b["retrieval"][name]
        la, lb = RetrievalResult.of(ea).layer, RetrievalResult.of(eb).layer
        add(f"{name} acc@1 (%), layers {la} / {lb}", retrieval_sample(ea, la), retrieval_sample(eb, lb))
    aligned = [n for n in a.get("alignment", {}) if n in b.get("alignment", {})]
    for name in aligned:
        ea, eb = a["alignment"][name], b["alignment"][name]
        add(f"{name} AER (%), layers {AlignmentResult.of(ea).layer} / {AlignmentResult.of(eb).layer}",
            _aer_sample(ea), _aer_sample(eb), lower_better=True)
    if len(aligned) > 1:
        add(f"mean AER of {', '.join(aligned)} (%)", _mean_of({n: _aer_sample(a["alignment"][n]) for n in aligned}),
            _mean_of({n: _aer_sample(b["alignment"][n]) for n in aligned}), lower_better=True)
    for name, ea in a.get("tasks", {}).items():
        eb = b["tasks"][name]
        add(f"{name} zero-shot target average (%), {len(ea.get('seeds') or [])} seeds",
            task_sample(ea, "target_average", 100.0), task_sample(eb, "target_average", 100.0))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--model", default="align")
    parser.add_argument("--start", default="start")
    args = parser.parse_args(argv)
    print(f"| test | {args.start} | {args.model} | difference [95% interval] | verdict |")
    print("|---|---:|---:|---:|---|")
    for name, start, result, diff, verdict in rows(args.folder, args.model, args.start):
        print(f"| {name} | {start:.2f} | {result:.2f} | {diff} | {verdict} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
