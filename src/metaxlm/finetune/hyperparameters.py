"""Fine-tuning hyperparameters: one set for every task type (the ones a type does not use are ignored), in a
task's YAML under `hyperparameters:` and overridable like every field (`hyperparameters.lr=5e-5`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from metaxlm.config import INFERENCE_BATCH_TOKENS, AutocastPrecision, Strict


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
