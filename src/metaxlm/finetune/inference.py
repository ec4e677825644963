"""Features into padded batches, and batched inference over them: what the task types' defaults and the trainer share.

A feature is a dict of one model input's token ids (`input_ids`, maybe `token_type_ids`), its training targets and
whatever decoding needs. Inference runs in eval mode in the resolved precision (metaxlm.compute.precision), features
sorted by length and cut into batches of at most `hp.eval_batch_size` features and `hp.eval_batch_tokens` padded
tokens, so little compute goes to padding; outputs come back in the features' order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import torch
from tqdm import tqdm

from metaxlm.compute.devices import compute_device
from metaxlm.compute.precision import PrecisionChoice, precision_for, resume_precision
from metaxlm.data.padding import IGNORE, length_sorted_batches
from metaxlm.finetune.hyperparameters import Hyperparameters

Feature = dict[str, Any]
MODEL_INPUTS = ("input_ids", "token_type_ids")


class HasOutputs(Protocol):
    """What batched inference needs of a task type (every `metaxlm.finetune.tasks.base.Task` has it; task types
    build on this module, so it names no task class)."""

    tokenizer: Any
    output_keys: tuple[str, ...]   # the model output fields kept per feature
    token_outputs: bool            # per-token outputs, cut to each feature's length


def resolved_precision(model, hp: Hyperparameters, device: torch.device) -> PrecisionChoice:
    """hp.precision on `device` (metaxlm.compute.precision.precision_for): what training, inference and generation
    of a task run in (`auto`: the process's one decision)."""
    return precision_for(model, hp.precision, device=device)


def kept_precision(precisions: dict[str, str] | None, part: str, chosen: PrecisionChoice) -> PrecisionChoice:
    """The precision of one part of a fine-tuning run ("train", "test"), recorded in `precisions`: `chosen`, unless
    `precisions` holds the part already — a run resumed from its checkpoint, perhaps on another CPU where `auto`
    chooses otherwise —, then the one the run began in (metaxlm.compute.precision.resume_precision)."""
    if precisions is None:
        return chosen
    choice = resume_precision(precisions.get(part), chosen, what=f"fine-tuning's {part}")
    precisions[part] = choice.precision
    return choice


def collate(features: list[Feature], pad_id: int, target_keys: Sequence[str] = ()) -> dict[str, torch.Tensor]:
    """Pad to the longest feature; targets that are per-token lists are padded with -100 (ignored)."""
    width = max(len(f["input_ids"]) for f in features)
    batch = {"attention_mask": torch.zeros(len(features), width, dtype=torch.long)}
    for key in MODEL_INPUTS:
        if key in features[0]:
            fill = pad_id if key == "input_ids" else 0
            batch[key] = torch.full((len(features), width), fill, dtype=torch.long)
    for key in target_keys:
        if isinstance(features[0][key], list):
            batch[key] = torch.full((len(features), width), IGNORE, dtype=torch.long)
        else:
            batch[key] = torch.tensor([f[key] for f in features], dtype=torch.long)
    for row, f in enumerate(features):
        n = len(f["input_ids"])
        batch["attention_mask"][row, :n] = 1
        for key in MODEL_INPUTS:
            if key in batch:
                batch[key][row, :n] = torch.tensor(f[key])
        for key in target_keys:
            if isinstance(f[key], list):
                batch[key][row, :n] = torch.tensor(f[key])
    return batch


def predict_outputs(model, task: HasOutputs, features: list[Feature], hp: Hyperparameters, *,
                    progress: bool = False, desc: str = "predict") -> list[tuple[np.ndarray, ...]]:
    """The model's outputs (`task.output_keys`, float32) per feature, cut to the feature's length for token outputs."""
    device = compute_device()
    # moved outside inference mode: weights copied to a GPU inside it would be inference tensors, and a training
    # after this prediction (a score before fine-tuning, an evaluation between steps) could not use them
    was_training = model.training  # an evaluation between training steps leaves dropout as it found it
    model.to(device).eval()
    try:
        with torch.inference_mode():
            return _predict_outputs(model, task, features, hp, device, progress=progress, desc=desc)
    finally:
        model.train(was_training)


def _predict_outputs(model, task: HasOutputs, features: list[Feature], hp: Hyperparameters, device: torch.device, *,
                     progress: bool, desc: str) -> list[tuple[np.ndarray, ...]]:
    pad_id = task.tokenizer.pad_token_id if task.tokenizer.pad_token_id is not None else 0
    precision = resolved_precision(model, hp, device)
    batches = length_sorted_batches([len(f["input_ids"]) for f in features], hp.eval_batch_size, hp.eval_batch_tokens)
    results: list[tuple[np.ndarray, ...] | None] = [None] * len(features)
    for chunk in tqdm(batches, desc=desc, unit="batch", disable=not progress, leave=False):
        batch = collate([features[k] for k in chunk], pad_id)
        with precision.autocast(device.type):
            out = model(**{k: v.to(device) for k, v in batch.items()})
        arrays = [getattr(out, key).float().cpu().numpy() for key in task.output_keys]
        for row, k in enumerate(chunk):
            n = len(features[k]["input_ids"])
            results[k] = tuple(a[row, :n] if task.token_outputs else a[row] for a in arrays)
    return results
