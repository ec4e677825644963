"""Transfer from an English (meta-pretrained) encoder: vocabulary matching and weight initialization.

- `matching`: `match_vocab`, the rules (exact -> normalized -> dictionary -> fallback) over a source index;
- `tokenizer_rules`: what the source tokenizer does to text (`normalizer_for`, isolated characters);
- `pieces`: how a vocabulary marks word starts, and its special tokens;
- `dictionaries`: en-<lang> dictionary files (`dictionaries_in`, `load_dictionaries`);
- `vocab_match`: the result (`VocabMatch`, `RULES`), saved and loaded as JSON;
- `coverage`: the per-rule / per-language report of a match (`coverage_report`, `write_coverage_report`);
- `initialize`: copying body and matched embeddings into the target (`initialize_from_source`, `freeze_body`).
"""

from metaxlm.transfer.coverage import coverage_report, write_coverage_report
from metaxlm.transfer.dictionaries import dictionaries_in, load_dictionaries
from metaxlm.transfer.initialize import (
    body_parameter_names,
    embedding_parameter_names,
    freeze_body,
    initialize_from_source,
)
from metaxlm.transfer.matching import match_vocab
from metaxlm.transfer.tokenizer_rules import normalizer_for
from metaxlm.transfer.vocab_match import RULES, VocabMatch

__all__ = [
    "RULES", "VocabMatch", "body_parameter_names", "coverage_report", "dictionaries_in", "embedding_parameter_names",
    "freeze_body", "initialize_from_source", "load_dictionaries", "match_vocab", "normalizer_for",
    "write_coverage_report",
]
