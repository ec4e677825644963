"""The result of vocabulary matching: per target id, the source ids to average and the rule that matched."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from metaxlm.errors import DataError, MetaXLMError
from metaxlm.io import atomic_write_json

__all__ = ["RULES", "VocabMatch"]

RULES = ("special", "exact", "normalized", "dict", "fallback")


@dataclass
class VocabMatch:
    """For every target id: the source ids whose embeddings are averaged, and the rule that matched."""

    sources: list[list[int]]  # per TARGET id; empty = unmatched
    rules: list[str]  # per target id: one of RULES
    target_pieces: list[str] = field(default_factory=list)  # optional, for reports
    source_pieces: list[list[str]] = field(default_factory=list)  # optional: the pieces behind `sources`

    def __post_init__(self):
        if len(self.sources) != len(self.rules):
            raise MetaXLMError(f"VocabMatch: {len(self.sources)} source lists but {len(self.rules)} rules")
        bad = sorted({r for r in self.rules if r not in RULES})
        if bad:
            raise MetaXLMError(f"VocabMatch: unknown rule(s) {bad}; expected one of {list(RULES)}")

    def __len__(self) -> int:
        return len(self.sources)

    def counts(self) -> dict[str, int]:
        """Number of target pieces (types) per rule, every rule listed."""
        c = Counter(self.rules)
        return {rule: c.get(rule, 0) for rule in RULES}

    def to_json(self) -> dict:
        return {"sources": self.sources, "rules": self.rules, "target_pieces": self.target_pieces,
                "source_pieces": self.source_pieces}

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> VocabMatch:
        try:
            obj = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(sources=[[int(i) for i in s] for s in obj["sources"]], rules=list(obj["rules"]),
                       target_pieces=list(obj.get("target_pieces", [])),
                       source_pieces=[list(s) for s in obj.get("source_pieces", [])])
        except FileNotFoundError:
            raise DataError(path, None, "no such vocabulary-match file") from None
        except (ValueError, KeyError, TypeError) as err:
            raise DataError(path, None, f"not a vocabulary-match file: {err}") from None
        except MetaXLMError as err:
            raise DataError(path, None, str(err)) from None
