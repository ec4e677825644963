"""One fine-tuning loop for every task type, and batched inference.

Training: AdamW (fused kernel), linear warm-up then linear decay, gradient clipping, in `hp.precision`
(auto: bf16 autocast only where bf16 matmuls are faster on this machine, see metaxlm.compute.precision);
batches padded to their longest feature, with features of similar length batched together (shuffled
within windows of 64 batches, then batch order shuffled), which wastes little compute on padding.
Everything random is seeded from `seed` (torch, numpy, python; the batch order from its own generator),
so a run is a function of its seed — also when it was interrupted and continued from a checkpoint (a long run writes
one every 10 minutes where it has a place for them: metaxlm.finetune.checkpoint). Inference: eval mode, the same
precision, features sorted by length.
In fp32 on a CPU, training runs under metaxlm.compute.fastpath (dropout masks from parallel numpy streams, attention
with dropout and padding mask in one function instead of SDPA's slow math kernel); bf16 keeps torch's own dropout
and SDPA, so bf16 fine-tuning results of earlier versions reproduce.

A training item is an example or a tuple of examples that must share a batch (the code-switched pairs
of translate-train); all features of one item (e.g. a long QA context's windows) stay together too.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext

import numpy as np
import torch
from tqdm import tqdm

from metaxlm.compute.devices import compute_device
from metaxlm.compute.fastpath import training_fast_path
from metaxlm.compute.optim import adamw
from metaxlm.errors import MetaXLMError
from metaxlm.finetune import checkpoint as ckpt
from metaxlm.finetune.checkpoint import Checkpoints
from metaxlm.finetune.hyperparameters import Hyperparameters
from metaxlm.finetune.inference import kept_precision, resolved_precision
from metaxlm.finetune.tasks.base import Feature, Task
from metaxlm.finetune.used_rows import UsedRows
from metaxlm.models.new_parameters import new_parameter_names

SORT_WINDOW = 64  # batches per window of length-sorted features: similar lengths, still a random order


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def set_dropout(model, p: float) -> None:
    """Every dropout of `model` at rate `p` (HF modules read their rate at call time, attention's included), and
    its config (and an encoder-decoder's two sub-configs) saying so, so a saved model records it."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = p
    configs = [model.config, getattr(model.config, "encoder", None), getattr(model.config, "decoder", None)]
    for config in filter(None, configs):
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if hasattr(config, key):
                setattr(config, key, p)


def encode_items(task: Task, items: Sequence, *, train: bool) -> tuple[list[Feature], list[list[int]]]:
    """Features of all items, and for each item the indices of its features (items without features dropped)."""
    examples, owner = [], []
    for i, item in enumerate(items):
        for example in item if isinstance(item, tuple) else (item,):
            examples.append(example)
            owner.append(i)
    features = task.encode(examples, train=train)
    units: list[list[int]] = [[] for _ in items]
    for k, feature in enumerate(features):
        units[owner[feature["example"]]].append(k)
    return features, [u for u in units if u]


def length_grouped_batches(units: list[list[int]], lengths: Sequence[int], batch_size: int,
                           rng: random.Random, batch_tokens: int | None = None) -> list[list[int]]:
    """Batches of feature indices: units shuffled, sorted by length within windows, cut into batches of at least
    `batch_size` features — or, with `batch_tokens`, of as many units as keep the padded batch (features x the
    longest feature's `lengths`) within `batch_tokens` (a unit larger than that is a batch alone) — a unit is never
    split; batch order shuffled. With `batch_tokens` the window spans about SORT_WINDOW batches of `batch_size`."""
    order = list(range(len(units)))
    rng.shuffle(order)
    batches = []
    window = SORT_WINDOW * batch_size
    for w in range(0, len(order), window):
        chunk = sorted(order[w:w + window], key=lambda u: max(lengths[k] for k in units[u]))
        batch: list[int] = []
        longest = 0
        for u in chunk:
            if batch_tokens is not None:
                unit_longest = max(longest, *(lengths[k] for k in units[u]))
                if batch and (len(batch) + len(units[u])) * unit_longest > batch_tokens:
                    batches.append(batch)
                    batch, longest = [], 0
                batch.extend(units[u])
                longest = max(longest, *(lengths[k] for k in units[u]))
                continue
            batch.extend(units[u])
            if len(batch) >= batch_size:
                batches.append(batch)
                batch = []
        if batch:
            batches.append(batch)
    rng.shuffle(batches)
    return batches


def finetune(model, task: Task, train_items: Sequence, hp: Hyperparameters, *, seed: int, progress: bool = True,
             history: list[float] | None = None, desc: str = "fine-tune",
             on_step: Callable[[int, int], None] | None = None, checkpoints: Checkpoints | None = None,
             precisions: dict[str, str] | None = None):
    """Train `model` in place on `train_items` for hp.max_steps steps, else hp.epochs epochs; return it.
    `history`, when given, receives each step's loss. `on_step(step, total)`, when given, is called after each
    optimizer step (e.g. to score the model at chosen steps: it may switch to eval mode and run inference; the
    model is put back in train mode after it, and inference draws nothing from the seeded generators).
    `checkpoints`, when given: a checkpoint there every so many seconds of training, and a run that finds one of its
    own continues from it exactly (metaxlm.finetune.checkpoint; `history` and `checkpoints.extra` as they were), in
    the precision it began in. `precisions`, when given, receives the training's ("train"); with checkpoints it is
    `checkpoints.precision` whatever is passed."""
    from transformers import get_linear_schedule_with_warmup

    started = time.perf_counter()
    set_seed(seed)
    rng = random.Random(seed)
    device = compute_device()
    features, units = encode_items(task, train_items, train=True)
    if not units:
        raise MetaXLMError("fine-tuning: the training data gave no features")
    # with a token budget, what a feature costs (translation: source + target); else its input length, as always
    lengths = [task.feature_tokens(f) if hp.batch_tokens else len(f["input_ids"]) for f in features]
    epoch_batches = length_grouped_batches(units, lengths, hp.batch_size, rng, hp.batch_tokens)
    total = hp.max_steps or max(1, math.ceil(hp.epochs * len(epoch_batches)))
    if hp.dropout is not None:
        set_dropout(model, hp.dropout)
    model.to(device).train()
    # a checkpoint's whole weights, restored before the used rows are taken from them
    found = ckpt.load_weights(checkpoints, model) if checkpoints is not None else None
    pad_id = task.tokenizer.pad_token_id if task.tokenizer.pad_token_id is not None else 0
    # the embedding rows training reads (padding included); only they train with embedding_rows: used
    used = UsedRows(model, {i for f in features for i in f["input_ids"]} | {pad_id}
                    if hp.embedding_rows == "used" else None)
    # inside `used`, only the used embedding rows are parameters: the optimizer is built there
    with used, tqdm(total=total, desc=desc, unit="step", disable=not progress, leave=False) as bar:
        new = sorted(new_parameter_names(model) or ()) if hp.head_lr_scale != 1.0 else ()
        optimizer = adamw(model.named_parameters(), lr=hp.lr, weight_decay=hp.weight_decay,
                          lr_scales={name: hp.head_lr_scale for name in new})
        schedule = get_linear_schedule_with_warmup(optimizer, int(hp.warmup_ratio * total), total)
        params = [p for p in model.parameters() if p.requires_grad]
        if checkpoints is not None:  # restored from the checkpoint by load_weights: a resumed run keeps it
            precisions = checkpoints.precision
        precision = kept_precision(precisions, "train", resolved_precision(model, hp, device))
        fast_path = (lambda: training_fast_path(device)) if precision.precision == "fp32" else nullcontext
        step, position = 0, 0
        if found is not None:
            step, epoch_batches, position = ckpt.resume(*found, checkpoints, model=model, optimizer=optimizer,
                                                        scheduler=schedule, batch_order=rng, history=history)
            bar.initial = bar.n = bar.last_print_n = step  # the rate and ETA from this process's steps only
            bar.refresh()
        last_save = time.perf_counter()
        paced_at, paced_step = last_save, step  # the pace since the last checkpoint (or start), for the logged ETA
        while step < total:
            while position < len(epoch_batches):
                batch_indices = epoch_batches[position]
                position += 1
                batch = task.collate([features[k] for k in batch_indices], pad_id, train=True)
                with precision.autocast(device.type), fast_path():
                    loss = task.loss(model, {k: v.to(device) for k, v in batch.items()})
                if not torch.isfinite(loss):
                    raise MetaXLMError(f"fine-tuning: non-finite loss at step {step} (lower the learning rate)")
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, hp.clip)
                optimizer.step()
                schedule.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                if history is not None:
                    history.append(loss.item())
                bar.update(1)
                if step % 10 == 0:
                    bar.set_postfix(loss=f"{loss.item():.3f}")
                if on_step is not None:
                    with used.full():  # inference reads any row
                        on_step(step, total)
                    model.train()
                if step >= total:
                    break
                if checkpoints is not None and time.perf_counter() - last_save >= checkpoints.interval():
                    ckpt.save(checkpoints, step=step, model=model, optimizer=optimizer, scheduler=schedule, used=used,
                              batches=epoch_batches, position=position, batch_order=rng, history=history,
                              started=started)
                    last_save = time.perf_counter()
                    if not progress:  # a log has no bar: each checkpoint says how far the run has come
                        pace = (last_save - paced_at) / (step - paced_step)
                        print(f"{desc}: step {step} of {total}, checkpoint written; {pace:.2f} s/step, about "
                              f"{tqdm.format_interval(pace * (total - step))} to go", file=sys.stderr, flush=True)
                    paced_at, paced_step = last_save, step
            if step < total:
                epoch_batches = length_grouped_batches(units, lengths, hp.batch_size, rng, hp.batch_tokens)
                position = 0
    model.eval()
    return model


def predict(model, task: Task, examples: Sequence, hp: Hyperparameters, *, progress: bool = False,
            desc: str = "predict"):
    """Predictions for `examples` in the task's form (labels, tag lists, span sets, or {id: answer text})."""
    if not examples:
        return []
    return task.predict(model, examples, hp, progress=progress, desc=desc)
