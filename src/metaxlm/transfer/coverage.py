"""How a target vocabulary was initialized: counts per matching rule, overall and per language
(piece types and frequency-weighted tokens), written as JSON and as a Markdown table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from metaxlm.errors import MetaXLMError
from metaxlm.io import atomic_write_json, atomic_write_text
from metaxlm.transfer.vocab_match import RULES, VocabMatch

__all__ = ["coverage_markdown", "coverage_report", "write_coverage_report"]


def _share(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def coverage_report(match: VocabMatch, tgt_tokenizer=None,
                    token_counts: Mapping[str, Counter | Mapping[int, int] | Mapping[str, int]] | None = None,
                    *, n_examples: int = 8) -> dict:
    """How the target vocabulary was initialized: per rule over the whole vocabulary, and per language.

    `token_counts`: {lang: counts of target ids (or pieces) over that language's corpus}. Per language
    the report gives, per rule, the share of the language's piece TYPES (pieces seen at least once) and
    of its TOKENS (frequency-weighted).
    """
    n = len(match)
    counts = match.counts()
    pieces = match.target_pieces or (
        [str(p) for p in tgt_tokenizer.convert_ids_to_tokens(list(range(n)))] if tgt_tokenizer is not None else [])
    report: dict = {
        "vocab_size": n,
        "rules": {rule: {"types": counts[rule], "share": _share(counts[rule], n)} for rule in RULES},
    }
    if pieces:
        examples: dict[str, list[str]] = {rule: [] for rule in RULES}
        for t, rule in enumerate(match.rules):
            if len(examples[rule]) < n_examples and pieces[t] and rule != "special":
                src = match.source_pieces[t] if t < len(match.source_pieces) else [str(i) for i in match.sources[t]]
                examples[rule].append(f"{pieces[t]} -> {', '.join(src)}" if src else pieces[t])
        report["examples"] = {rule: ex for rule, ex in examples.items() if ex}
    if token_counts:
        piece_to_id = {p: i for i, p in enumerate(pieces)}
        languages = {}
        for lang, lang_counts in token_counts.items():
            types = Counter()
            tokens = Counter()
            for key, c in lang_counts.items():
                if c <= 0:
                    continue
                t = piece_to_id.get(key) if isinstance(key, str) else int(key)
                if t is None or not 0 <= t < n:
                    raise MetaXLMError(f"token counts for {lang!r}: {key!r} is not a target id or piece "
                                       f"(vocabulary of {n})")
                types[match.rules[t]] += 1
                tokens[match.rules[t]] += c
            n_types, n_tokens = sum(types.values()), sum(tokens.values())
            languages[lang] = {
                "types": n_types, "tokens": n_tokens,
                "rules": {rule: {"types": types[rule], "type_share": _share(types[rule], n_types),
                                 "tokens": tokens[rule], "token_share": _share(tokens[rule], n_tokens)}
                          for rule in RULES},
            }
        report["languages"] = languages
    return report


def coverage_markdown(report: dict) -> str:
    """The report as Markdown: rule table, per-language table (type / token shares), examples."""
    lines = ["# Vocabulary matching coverage", "",
             f"Target vocabulary: {report['vocab_size']} pieces.", "",
             "| rule | pieces | share |", "|---|---:|---:|"]
    for rule, r in report["rules"].items():
        lines.append(f"| {rule} | {r['types']} | {100 * r['share']:.1f}% |")
    if report.get("languages"):
        lines += ["", "## Per language", "",
                  "Share of each language's piece types / tokens (frequency-weighted) initialized by each rule.", "",
                  "| language | types | tokens | " + " | ".join(RULES) + " |",
                  "|---|---:|---:|" + "---:|" * len(RULES)]
        for lang, lr in report["languages"].items():
            cells = [f"{100 * lr['rules'][rule]['type_share']:.1f}% / {100 * lr['rules'][rule]['token_share']:.1f}%"
                     for rule in RULES]
            lines.append(f"| {lang} | {lr['types']} | {lr['tokens']} | " + " | ".join(cells) + " |")
    if report.get("examples"):
        lines += ["", "## Examples", ""]
        for rule, ex in report["examples"].items():
            lines.append(f"- **{rule}**: " + "; ".join(f"`{e}`" for e in ex))
    return "\n".join(lines) + "\n"


def write_coverage_report(report: dict, path: str | Path) -> Path:
    """Write the report as JSON at `path` and as a Markdown table beside it (same name, .md); return the .md."""
    path = Path(path)
    atomic_write_json(path, report)
    md = path.with_suffix(".md")
    atomic_write_text(md, coverage_markdown(report))
    return md
