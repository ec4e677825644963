"""Decisions made once and imported wherever they apply: defaults shared by several config sections and loops,
and the names a config may use for a precision or a start model. (The word-alignment defaults, chosen by a
measurement of their own, are in `alignment_defaults`.)"""

from __future__ import annotations

from typing import Literal, get_args

# Padded tokens per inference batch (items x the longest): a token budget rather than an item count keeps the
# working set small (it stays in cache: the measurement is in docs/benchmarks.md, bench/evaluation_profile.py) and
# keeps a batch of long items from growing with them. Larger suits a GPU: evaluate.batch_tokens,
# hyperparameters.eval_batch_tokens.
INFERENCE_BATCH_TOKENS = 1024
MASK_PROB = 0.15  # BERT's share of tokens chosen for masking: train.mask_prob and every objective that masks

# The precision names (resolved by metaxlm.compute.precision, the one resolver). auto: bf16 only where a measurement
# shows bf16 matmuls faster (GPU: where supported). Pretraining runs under accelerate, whose fp16 has a loss scaler
# (GPU only); fine-tuning and inference autocast on their own, without one, so they take no fp16. Probes may also run
# "native": no autocast, the weights' own dtype (e.g. a bf16 copy of the model).
Precision = Literal["auto", "bf16", "fp16", "fp32"]
AutocastPrecision = Literal["auto", "bf16", "fp32"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
AUTOCAST_PRECISIONS: tuple[str, ...] = get_args(AutocastPrecision)
PROBE_PRECISIONS: tuple[str, ...] = (*AUTOCAST_PRECISIONS, "native")
START_OF = "start_of:"  # evaluate.models: {start: "start_of:<variant>"}, a start_from variant's start model
# A fine-tuning run writes a checkpoint after each this many seconds of training (metaxlm.finetune.checkpoint): a
# run of a few minutes writes none, a translation model's hours-long run loses at most this much to an interruption.
FINETUNE_CHECKPOINT_SECONDS = 600.0
# A finished fine-tuning run's record keeps its first this many test outputs per language (a task type that has
# outputs to read: translation), the test set's first items, not chosen; all of them go to <run>.outputs.jsonl.
RECORDED_OUTPUTS = 5
