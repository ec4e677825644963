"""`metaxlm data stats`: per-language corpus sizes and the α-sampling probabilities they imply."""

from __future__ import annotations

import json
from pathlib import Path

from metaxlm.config import DataConfig
from metaxlm.data.corpus import count_pairs, count_texts
from metaxlm.data.sampling import sampling_probs
from metaxlm.languages import language_name, split_pair


def corpus_stats(data: DataConfig, prepared_dir: str | Path | None = None) -> dict:
    """Sizes N_i (texts or pairs) and p_i ∝ N_i^α; token counts too when a prepared dir exists."""
    meta = {}
    if prepared_dir and (Path(prepared_dir) / "meta.json").exists():
        meta = json.loads((Path(prepared_dir) / "meta.json").read_text())
    out: dict = {"alpha": data.alpha}
    for kind, corpora, count in (("mono", data.mono_corpora(), count_texts),
                                 ("parallel", data.parallel_corpora(), count_pairs)):
        if not corpora:
            out[kind] = {}
            continue
        prepared = meta.get(kind, {})
        sizes = {k: prepared[k]["examples"] if k in prepared else count(spec) for k, spec in corpora.items()}
        probs = sampling_probs(sizes, data.alpha)
        uniform = sampling_probs(sizes, 1.0)
        out[kind] = {
            k: {"examples": sizes[k], "tokens": prepared.get(k, {}).get("tokens"),
                "share": uniform[k], "p_alpha": probs[k]}
            for k in sorted(corpora, key=lambda k: -sizes[k])
        }
    return out


def format_stats(stats: dict) -> str:
    lines = []
    for kind, title in (("mono", "monolingual"), ("parallel", "parallel")):
        rows = stats.get(kind) or {}
        if not rows:
            continue
        names = {key: language_name(split_pair(key)[1] if kind == "parallel" else key) for key in rows}
        # the columns fit the longest code (en-zh-Hant) and name (Chinese (Traditional))
        key_w, name_w = max(8, *(len(k) + 1 for k in rows)), max(12, *(len(n) + 1 for n in names.values()))
        lines.append(f"{title} corpora (alpha={stats['alpha']}):")
        lines.append(f"  {'lang':<{key_w}}{'name':<{name_w}}{'examples':>10}{'tokens':>12}{'share':>8}{'p_alpha':>9}")
        for key, r in rows.items():
            tokens = f"{r['tokens']:,}" if r["tokens"] is not None else "-"
            lines.append(f"  {key:<{key_w}}{names[key]:<{name_w}}{r['examples']:>10,}{tokens:>12}{r['share']:>8.3f}"
                         f"{r['p_alpha']:>9.3f}")
        total_ex = sum(r["examples"] for r in rows.values())
        total_tok = sum(r["tokens"] or 0 for r in rows.values())
        lines.append(f"  {'total':<{key_w + name_w}}{total_ex:>10,}{total_tok:>12,}")
    return "\n".join(lines)
