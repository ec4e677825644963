"""A fine-tuning task's settings: which data, which head, which metric, which hyperparameters.

`configs/tasks/<name>.yaml` holds each task's defaults; a run config overrides any field
(`evaluate.tasks.<name>: {task: <yaml name>, max_train_items: 500}`) and so does the CLI (`key=value`).
Path templates fill in `{lang}` (the run's language code) and `{flores}` (its FLORES-200 code, as
SIB-200 names its folders); a mapping gives one path per language instead, for benchmarks whose files
are named irregularly (UD treebanks). Relative paths are relative to the working directory, as in run configs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from metaxlm.config import (
    INFERENCE_BATCH_TOKENS,
    AutocastPrecision,
    Strict,
    apply_override,
    format_errors,
    read_yaml,
)
from metaxlm.errors import ConfigError
from metaxlm.languages import FLORES, check_language

TASK_CONFIG_DIR = Path(__file__).resolve().parents[3] / "configs" / "tasks"

PathTemplate = str | dict[str, str] | None


class Hyperparameters(Strict):
    lr: float = Field(2e-5, gt=0.0)
    batch_size: int = Field(32, ge=1)
    # alternatively: batches cut by padded tokens (features x longest feature, source + target for translation),
    # so short sentences come in larger batches (fairseq's --max-tokens); None: batch_size features per batch
    batch_tokens: int | None = Field(None, ge=8)
    epochs: float = Field(3.0, gt=0.0)
    max_steps: int | None = Field(None, ge=1)  # when set, overrides epochs
    max_seq_len: int = Field(128, ge=8)
    warmup_ratio: float = Field(0.1, ge=0.0, lt=1.0)
    weight_decay: float = Field(0.01, ge=0.0)
    clip: float = Field(1.0, gt=0.0)
    # lr multiplier for the weights the checkpoint did not have (the new task head, a pooler the encoder lacks):
    # a fresh head on a sentence-embedding encoder whose [CLS] states barely differ learns slowly at a body's lr
    head_lr_scale: float = Field(1.0, gt=0.0)
    # every dropout of the model (hidden, attention, embeddings) during fine-tuning; None: the model's own (BERT: 0.1)
    dropout: float | None = Field(None, ge=0.0, lt=1.0)
    # used: only the word-embedding rows the training inputs use are trained (the rest are not weight-decayed;
    # about half of a CPU step for a 250k-row vocabulary, metaxlm.finetune.used_rows); all: dense, as the HF Trainer
    embedding_rows: Literal["used", "all"] = "used"
    # inference batches (tests, curves): at most eval_batch_size features and eval_batch_tokens padded tokens
    eval_batch_size: int = Field(64, ge=1)
    eval_batch_tokens: int | None = Field(INFERENCE_BATCH_TOKENS, ge=1)
    # auto: bf16 autocast only where bf16 matmuls are faster (metaxlm.compute.precision); default: evaluate.precision
    precision: AutocastPrecision = "auto"
    # extractive QA (SQuAD-style features)
    doc_stride: int = Field(128, ge=1)
    max_query_len: int = Field(64, ge=1)
    n_best: int = Field(20, ge=1)
    max_answer_len: int = Field(30, ge=1)
    # translation (seq2seq): teacher-forced cross-entropy with label smoothing; beam search for the test
    label_smoothing: float = Field(0.1, ge=0.0, lt=1.0)
    num_beams: int = Field(4, ge=1)
    length_penalty: float = 1.0  # exponent on the length a beam's log-probability is divided by (HF generate)
    max_new_tokens: int = Field(128, ge=1)
    # no n-gram of this size twice in one output (HF generate's, fairseq's --no-repeat-ngram-size); 0: off
    no_repeat_ngram_size: int = Field(0, ge=0)
    # score the test sets also after these fine-tuning steps (any task type): the result's `curve`
    eval_steps: list[int] = Field(default_factory=list)
    # the curve's points on this many test items per language (those with the smallest sha256 of their id, the same
    # in every language; the last point from the final test's predictions on them), the final score on every item;
    # None: every point on every item (a translation curve of 1,000 pairs at beam 4 costs minutes per point)
    curve_items: int | None = Field(None, ge=1)

    @field_validator("eval_steps")
    @classmethod
    def _steps(cls, steps: list[int]) -> list[int]:
        if any(s < 1 for s in steps):
            raise ValueError("eval_steps must be >= 1")
        return sorted(set(steps))

    @field_validator("lr", "epochs", "warmup_ratio", "weight_decay", "clip", "label_smoothing", "length_penalty",
                     "head_lr_scale", "dropout", mode="before")
    @classmethod
    def _float_text(cls, value):
        # YAML 1.1 reads `2e-5` (no dot) as a string; take it for the number it plainly means
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        return value


class Seq2SeqAssembly(Strict):
    """How a translation task builds its encoder-decoder when the model directory holds an encoder (a VECO run's
    output, any BERT-style MLM): metaxlm.models.veco_export.assemble_seq2seq, new weights drawn under the
    fine-tuning seed. veco: the VECO layers' own cross-attention; encoder: the same encoder weights in both
    halves, cross-attention new; random: the same shapes, every weight new."""
    init: Literal["veco", "encoder", "random"]
    decoder_layers: int | list[int] = 6  # the last n layers, or layer indices (the paper: 6)
    # full: the model's whole vocabulary; train: the tokenizer and every vocabulary row (both embeddings, the output
    # layer) trimmed to the pieces the training pairs use, both sides (a 250k or 46k-row softmax dominates a small
    # decoder's cost; the training text tokenizes exactly as before, other text may take smaller pieces)
    vocabulary: Literal["full", "train"] = "full"
    # one word-embedding matrix for encoder input, decoder input and decoder output (the paper's shared
    # embeddings); false: the halves start equal and train apart (the decoder's output stays tied to its input)
    share_embeddings: bool = False
    # cross-attention at hyperparameters.head_lr_scale whatever its start: with init veco it comes pretrained (by
    # CS-MLM) and would otherwise train at the body's rate; init encoder / random already count it as new
    fast_cross_attention: bool = False


class TaskSpec(Strict):
    name: str
    type: Literal["classification", "tagging", "spans", "qa", "translation"]
    format: str  # a loader of metaxlm.data.benchmarks (demo_module, xnli, udpos, squad, parallel_tsv, ...)
    # classification: accuracy; tagging: accuracy | seqeval_f1; spans: span_f1; qa: f1 | exact_match;
    # translation: bleu | chrf (sacreBLEU, both are reported)
    metric: str
    languages: list[str]
    source: str = "en"
    test: str | dict[str, str]
    train: PathTemplate = None
    dev: PathTemplate = None
    translate_train: PathTemplate = None  # machine-translated train data per language (translate_train scenario)
    # Where the training items come from. `test_half`: the test items of half of the documents (QA: the
    # article title; other tasks: the id part before '#'), chosen by sha256, in the source language; every
    # language is then tested on the other half only (XQuAD has no English train split of its own).
    train_from: Literal["train", "test_half"] = "train"
    # The same for the transfer_matrix scenario (default: as train_from). With `train`, a source language
    # without a train file falls back to its translate_train file, then its dev file, else its row is null.
    matrix_train_from: Literal["train", "test_half"] | None = None
    code_switch: bool = True  # translate_train, pair tasks: (x_xx, y_en) and (x_en, y_xx) of an item in one batch
    # ... and also train on the translated original (x_xx, y_xx) of a code-switched item (PPA does not: footnote 2)
    code_switch_originals: bool = False
    # ... and also on the English items (metaxlm before issue 26; PPA trains on the switched pairs alone: "2x
    # training data" of the translated set)
    code_switch_english: bool = False
    qa_normalization: Literal["squad", "mlqa"] = "squad"  # mlqa: per-language answer normalization
    # translation: `forward` translates the source language (TSV column 1, the `{side}` = source file) into each
    # language, `reverse` each language into the source language
    direction: Literal["forward", "reverse"] = "forward"
    # translation: sacreBLEU's tokenizer for BLEU; None: by target language (zh: zh; ja, ko: char, since the
    # mecab tokenizers are not installed; else 13a). The signature in the results names the one used.
    bleu_tokenize: str | None = None
    # translation: assemble the encoder-decoder from the model directory (else it must be one already)
    seq2seq: Seq2SeqAssembly | None = None
    hyperparameters: Hyperparameters = Field(default_factory=Hyperparameters)
    max_train_items: int | None = Field(None, ge=1)  # per training language, first items by sha256 of the id
    max_test_items: int | None = Field(None, ge=1)   # per test language, chosen the same way
    # A dev set cut from the training file: the n items of each language with the LARGEST sha256 of their id, never
    # trained on (max_train_items then caps the rest), for choosing settings where the dev file is missing.
    dev_from_train: int | None = Field(None, ge=1)
    # what is scored: `test` (the test file), or `dev` (the dev file, else the items dev_from_train holds out) when
    # settings are being chosen — the numbers a README reports are test numbers of settings chosen on dev
    evaluate_on: Literal["test", "dev"] = "test"
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    note: str = ""  # free text for the results entry (e.g. how the data was split)

    @field_validator("languages")
    @classmethod
    def _known(cls, langs: list[str]) -> list[str]:
        for lang in langs:
            check_language(lang, "languages")
        if len(set(langs)) != len(langs):
            raise ValueError("duplicate language codes")
        return langs

    @model_validator(mode="after")
    def _consistent(self) -> TaskSpec:
        check_language(self.source, "source")
        if self.source not in self.languages:
            raise ValueError(f"source {self.source!r} is not one of languages")
        if self.train_from == "train" and self.train is None:
            raise ValueError("train_from=train needs a `train` path (or set train_from: test_half)")
        allowed = {"classification": {"accuracy"}, "tagging": {"accuracy", "seqeval_f1"}, "spans": {"span_f1"},
                   "qa": {"f1", "exact_match"}, "translation": {"bleu", "chrf"}}[self.type]
        if self.metric not in allowed:
            raise ValueError(f"metric {self.metric!r} is not one of {sorted(allowed)} for type {self.type}")
        pair_formats = {"parallel_tsv", "parallel_files"}
        if (self.type == "translation") != (self.format in pair_formats):
            raise ValueError(f"format {self.format!r} does not fit type {self.type}: translation tasks read "
                             f"{' or '.join(sorted(pair_formats))}, and only they do")
        if self.dev_from_train is not None and self.train_from != "train":
            raise ValueError("dev_from_train cuts the dev set from the train file: it needs train_from: train")
        if self.seq2seq is not None and self.type != "translation":
            raise ValueError("seq2seq (assembling an encoder-decoder) is for translation tasks only")
        if self.type == "translation" and self.train_from != "train":
            raise ValueError("translation tasks train on their `train` pairs (train_from: train)")
        hp = self.hyperparameters
        room = hp.max_seq_len - hp.max_query_len - 4  # the context window after the question and special tokens
        if self.type == "qa" and hp.doc_stride >= room:
            raise ValueError(f"hyperparameters.doc_stride ({hp.doc_stride}) must be < max_seq_len - max_query_len - 4"
                             f" ({room})")
        return self

    def path(self, which: Literal["train", "dev", "test", "translate_train"], lang: str) -> Path | None:
        """The file for `lang`, or None when the template does not cover that language."""
        template = getattr(self, which)
        if template is None:
            return None
        if isinstance(template, dict):
            return Path(template[lang]) if lang in template else None
        # `{side}` (file pairs of translation tasks) is left for the loader, which fills in each side's language
        return Path(template.format(lang=lang, flores=FLORES.get(lang, lang), side="{side}"))


def _find_task_file(path_or_name: str | Path) -> Path:
    path = Path(path_or_name)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    for root in (Path.cwd() / "configs" / "tasks", TASK_CONFIG_DIR):
        if (root / f"{path_or_name}.yaml").exists():
            return root / f"{path_or_name}.yaml"
    known = sorted(p.stem for p in TASK_CONFIG_DIR.glob("*.yaml"))
    raise ConfigError(f"no task config {path_or_name!r} (known in {TASK_CONFIG_DIR}: {', '.join(known)})")


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) \
            else value
    return out


def load_task_spec(path_or_name: str | Path, overrides: dict[str, Any] | list[str] | None = None) -> TaskSpec:
    """Read a task YAML (a path, or a name under configs/tasks/) and apply overrides: a mapping (from a run
    config's `evaluate.tasks` entry; its `task` key names the YAML and is dropped) or `key.sub=value` strings."""
    path = _find_task_file(path_or_name)
    try:
        tree = read_yaml(path.read_text(encoding="utf-8")) or {}
    except OSError as err:
        raise ConfigError(f"cannot read task config {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: top level must be a mapping of keys")
    tree.setdefault("name", path.stem)
    if isinstance(overrides, dict):
        tree = _deep_merge(tree, {k: v for k, v in overrides.items() if k != "task"})
    else:
        for override in overrides or ():
            apply_override(tree, override)
    try:
        return TaskSpec.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(format_errors(err, str(path))) from None
