"""Configuration: the run and section schemas (`schema`), the YAML they are read from and the overrides (`yaml`),
and the decisions made once that configs and loops share (`defaults`, `alignment_defaults`). The names every layer
uses are importable from here; each is defined in one of those modules."""

from metaxlm.config.defaults import (
    AUTOCAST_PRECISIONS,
    FINETUNE_CHECKPOINT_SECONDS,
    INFERENCE_BATCH_TOKENS,
    MASK_PROB,
    PRECISIONS,
    PROBE_PRECISIONS,
    RECORDED_OUTPUTS,
    START_OF,
    AutocastPrecision,
    Precision,
)
from metaxlm.config.schema import (
    PAPER_MU,
    AlignmentEvalSpec,
    CorpusSpec,
    DataConfig,
    EvalConfig,
    MetaConfig,
    ModelConfig,
    NoOptions,
    ParallelSpec,
    PrepareConfig,
    ReportConfig,
    RetrievalEvalSpec,
    RunConfig,
    SelectConfig,
    Strict,
    TrainConfig,
    TransferConfig,
    VariantPlan,
    VocabConfig,
    arch_options,
    check_component_options,
    did_you_mean,
    format_errors,
    load_config,
    objective_options,
    validation_problems,
)
from metaxlm.config.yaml import _YAML_ERRORS as YAML_ERRORS  # what reading YAML raises besides YAMLError too
from metaxlm.config.yaml import apply_override, dump_config, read_yaml, yaml_error

__all__ = [
    "NoOptions", "arch_options", "check_component_options", "objective_options",
    "AUTOCAST_PRECISIONS", "FINETUNE_CHECKPOINT_SECONDS", "INFERENCE_BATCH_TOKENS", "MASK_PROB", "PAPER_MU",
    "PRECISIONS", "PROBE_PRECISIONS", "RECORDED_OUTPUTS", "START_OF", "AlignmentEvalSpec", "AutocastPrecision",
    "CorpusSpec", "DataConfig", "EvalConfig", "MetaConfig",
    "ModelConfig", "ParallelSpec", "Precision", "PrepareConfig", "ReportConfig", "RetrievalEvalSpec", "RunConfig",
    "SelectConfig", "Strict", "TrainConfig", "TransferConfig", "VariantPlan", "VocabConfig", "apply_override",
    "dump_config",
    "YAML_ERRORS", "did_you_mean", "format_errors", "load_config", "read_yaml", "validation_problems", "yaml_error",
]
