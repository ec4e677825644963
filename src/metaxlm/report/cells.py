"""How the report shows a score: the cells, scales and names every section shares (task tables, the method
comparison, the MetaXLM findings), so one number looks the same wherever it appears."""

from __future__ import annotations

import math
import re

from metaxlm.records import DEFAULT_REPORT_HINTS
from metaxlm.report.results import number

DASH = "–"

# How a task's results are shown, as its task type declares it (metaxlm.finetune.tasks: Task.report_hints, copied
# into each results.json task entry), so the report needs no list of task types. Entries written before types
# declared them carry none: the built-in types' declarations stand in for them.
_BEFORE_HINTS = {"qa": {"percent": True},
                 "translation": {"percent": True, "scores": ["bleu", "chrf"], "names": {"bleu": "BLEU", "chrf": "chrF"},
                                 "directional": True}}


def report_hints(entry: dict) -> dict:
    """The report hints of a results.json task (or transfer-matrix) entry."""
    declared = entry.get("report_hints")
    return {**DEFAULT_REPORT_HINTS,
            **(declared if isinstance(declared, dict) else _BEFORE_HINTS.get(entry.get("type"), {}))}


def translation_ends(entry: dict) -> tuple[str | None, str | None]:
    """(source, target): the language every result of a directional entry translates from, and the one it
    translates into; None where it is each result's own (its per_language key). Entries written before `target`
    was recorded name the fixed language `source` in either direction (and those written before the direction was
    recorded are forward)."""
    if entry.get("direction") == "reverse":
        return None, entry.get("target") or entry.get("source") or "?"
    return entry.get("source") or "?", None


def language_pair(entry: dict, lang: str) -> str:
    """How a task's result for test language `lang` is named: `lang` itself, except for a directional task (its
    type's report hints), where it is what it translates: `en→de`, `de→en` (translation_ends)."""
    if not report_hints(entry)["directional"]:
        return lang
    source, target = translation_ends(entry)
    return f"{source or lang}→{target or lang}"


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "x"


def ordered(items) -> list:
    return list(dict.fromkeys(items))


def percent_scale(entries: list[dict]) -> float:
    """Fractions are shown in percent; QA EM/F1 and sacreBLEU's BLEU/chrF already are percent (as the official
    scripts report them)."""
    if any(report_hints(t)["percent"] for t in entries):
        return 1.0
    means = [number(s.get("mean")) for t in entries for s in t.get("per_language", {}).values()]
    return 1.0 if any(m > 1.0 for m in means) else 100.0


def n_seeds(task: dict) -> int:
    runs = [len(s.get("runs") or []) for s in task.get("per_language", {}).values()]
    return len(task.get("seeds") or []) or max(runs + [1])


def cell(stat: dict | None, n_seeds: int, scale: float) -> tuple[str, float]:
    """"mean ± std" (std left out for one seed) and the shown mean, which picks the best of a column."""
    mean = number((stat or {}).get("mean"))
    if math.isnan(mean):
        return DASH, math.nan
    shown = round(mean * scale, 1)
    std = number(stat.get("std"))
    n = len(stat["runs"]) if stat.get("runs") else n_seeds
    return (f"{shown:.1f}" if n <= 1 or math.isnan(std) else f"{shown:.1f} ± {std * scale:.1f}"), shown


def task_languages(entries: dict[str, dict]) -> list[str]:
    sources = [t["source"] for t in entries.values() if t.get("source")]
    return ordered(sources + [lang for t in entries.values() for lang in t.get("per_language", {})])


def best_index(values: list[float], lowest: bool = False) -> int | None:
    valid = [(v, i) for i, v in enumerate(values) if not math.isnan(v)]
    return (min(valid) if lowest else max(valid))[1] if valid else None
