"""Compare pretraining variants (XLM vs MetaXLM vs MetaXLM+Dict) on per-language held-out MLM loss.

Reads each variant's metrics.jsonl and writes, into the run directory:
  comparison.json / comparison.md   final held-out loss per language and variant, the mean over the
                                    non-English languages, and the difference to the first variant
  heldout_curves.png                held-out loss (mean over non-English languages) against steps
  heldout_by_language.png           final held-out loss per language, one bar per variant
"""

from __future__ import annotations

import json
from pathlib import Path

from metaxlm.io import atomic_write_json, atomic_write_text


def read_curves(variant_dir: Path) -> dict[int, dict[str, float]]:
    curves: dict[int, dict[str, float]] = {}
    path = variant_dir / "metrics.jsonl"
    if not path.exists():
        return curves
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        losses = {k.split("/", 1)[1]: v for k, v in rec.items() if k.startswith("heldout_loss/") and k != "heldout_loss/mean"}
        if losses:
            curves[rec["step"]] = losses
    return curves


def compare_variants(run_dir: str | Path, variants: list[str], pivot: str = "en") -> dict:
    run = Path(run_dir)
    curves = {v: read_curves(run / "pretrain" / v) for v in variants}
    curves = {v: c for v, c in curves.items() if c}
    if not curves:
        return {}
    final = {v: c[max(c)] for v, c in curves.items()}
    langs = sorted({lang for f in final.values() for lang in f}, key=lambda x: (x != pivot, x))
    others = [lang for lang in langs if lang != pivot]

    def mean_others(losses: dict[str, float]) -> float:
        vals = [losses[lang] for lang in others if lang in losses]
        return sum(vals) / len(vals) if vals else float("nan")

    base = next(iter(final))
    out = {
        "metric": "held-out MLM loss (nats per masked token, fixed masks); lower is better",
        "steps": {v: max(c) for v, c in curves.items()},
        "final": final,
        "mean_non_pivot": {v: mean_others(f) for v, f in final.items()},
        "baseline": base,
        "curves": {v: {str(s): mean_others(losses) for s, losses in sorted(c.items())} for v, c in curves.items()},
    }
    out["delta_vs_baseline"] = {v: out["mean_non_pivot"][v] - out["mean_non_pivot"][base] for v in final}
    atomic_write_json(run / "comparison.json", out)
    atomic_write_text(run / "comparison.md", _markdown(out, langs, pivot))
    _plots(run, out, curves, langs, others)
    return out


def _markdown(out: dict, langs: list[str], pivot: str) -> str:
    variants = list(out["final"])
    head = "| language | " + " | ".join(variants) + " |\n|---|" + "---:|" * len(variants) + "\n"
    rows = "".join(f"| {lang} | " + " | ".join(f"{out['final'][v].get(lang, float('nan')):.3f}" for v in variants)
                   + " |\n" for lang in langs)
    mean = f"| **mean without {pivot}** | " + " | ".join(f"**{out['mean_non_pivot'][v]:.3f}**" for v in variants) + " |\n"
    delta = f"| Δ vs {out['baseline']} | " + " | ".join(f"{out['delta_vs_baseline'][v]:+.3f}" for v in variants) + " |\n"
    steps = ", ".join(f"{v}: {s}" for v, s in out["steps"].items())
    return (f"# Pretraining comparison\n\n{out['metric']}; steps: {steps}.\n\n" + head + rows + mean + delta
            + "\n![held-out loss against steps](heldout_curves.png)\n\n![per language](heldout_by_language.png)\n")


def _plots(run: Path, out: dict, curves: dict, langs: list[str], others: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4))
    for v, c in out["curves"].items():
        steps = [int(s) for s in c]
        ax.plot(steps, list(c.values()), marker="o", markersize=3, label=v)
    ax.set_xlabel("pretraining step")
    ax.set_ylabel(f"held-out MLM loss\n(mean of {len(others)} non-English languages)")
    ax.set_title("Cross-lingual pretraining: held-out MLM loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(run / "heldout_curves.png", dpi=120)
    plt.close(fig)

    variants = list(out["final"])
    width = 0.8 / len(variants)
    fig, ax = plt.subplots(figsize=(max(6.4, 0.6 * len(langs) * len(variants) / 2), 4))
    for i, v in enumerate(variants):
        xs = [j + i * width for j in range(len(langs))]
        ax.bar(xs, [out["final"][v].get(lang, 0) for lang in langs], width=width, label=v)
    ax.set_xticks([j + width * (len(variants) - 1) / 2 for j in range(len(langs))], langs)
    ax.set_ylabel("final held-out MLM loss")
    ax.set_title("Held-out MLM loss per language (lower is better)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(run / "heldout_by_language.png", dpi=120)
    plt.close(fig)
