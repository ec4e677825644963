"""Transfer from an English (meta-pretrained) encoder: vocabulary matching and weight initialization."""

from metaxlm.transfer.initialize import (
    body_parameter_names,
    embedding_parameter_names,
    freeze_body,
    initialize_from_source,
)
from metaxlm.transfer.matching import (
    RULES,
    VocabMatch,
    coverage_report,
    dictionaries_in,
    load_dictionaries,
    match_vocab,
    normalizer_for,
    write_coverage_report,
)

__all__ = [
    "RULES", "VocabMatch", "body_parameter_names", "coverage_report", "dictionaries_in", "embedding_parameter_names",
    "freeze_body", "initialize_from_source", "load_dictionaries", "match_vocab", "normalizer_for",
    "write_coverage_report",
]
