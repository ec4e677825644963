"""Masked language modelling (BERT): dynamic masking, 15% of tokens, 80% [MASK] / 10% random / 10% kept.

The output layer (hidden → vocabulary logits) runs only at the masked positions: with a 32k vocabulary
and 15% masking that skips ~85% of the model's largest matmul, and gives exactly the loss the full
logits would (the other positions carry no loss).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import Field

from metaxlm.config import MASK_PROB
from metaxlm.data.padding import IGNORE
from metaxlm.models.arch import arch_of
from metaxlm.pretrain.objectives import ObjectiveOptions, Prepared, register
from metaxlm.pretrain.objectives.base import Objective
from metaxlm.pretrain.objectives.encoding import encode


def mask_tokens(input_ids: torch.Tensor, *, special_ids: torch.Tensor, mask_id: int, ordinary_ids: torch.Tensor,
                generator: torch.Generator, mask_prob: float = MASK_PROB, replace_prob: float = 0.8,
                random_prob: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (masked inputs, labels with -100 where no loss). Special tokens (incl. padding) are never chosen."""
    labels = input_ids.clone()
    candidates = ~torch.isin(input_ids, special_ids)
    chosen = (torch.rand(input_ids.shape, generator=generator) < mask_prob) & candidates
    labels[~chosen] = IGNORE
    roll = torch.rand(input_ids.shape, generator=generator)
    inputs = input_ids.clone()
    inputs[chosen & (roll < replace_prob)] = mask_id
    randomize = chosen & (roll >= replace_prob) & (roll < replace_prob + random_prob)
    # random replacements are drawn from ordinary pieces only (never <s>, <pad>, <mask>, ...)
    picks = torch.randint(len(ordinary_ids), input_ids.shape, generator=generator)
    inputs[randomize] = ordinary_ids[picks[randomize]]
    return inputs, labels


ROWS_MULTIPLE = 64


def masked_lm_loss_sum(model, inputs: torch.Tensor, labels: torch.Tensor, attention_mask: torch.Tensor | None = None,
                       *, rows_multiple: int = ROWS_MULTIPLE) -> torch.Tensor:
    """Summed cross-entropy over the masked positions, the output layer run only there. The masked rows are
    padded (with ignored dummy rows) to a multiple of `rows_multiple`, so the large (rows × vocabulary) tensors
    come in a few recurring sizes that the allocator reuses instead of fetching fresh memory every step."""
    hidden = encode(model, inputs, attention_mask).last_hidden_state
    return mlm_head_loss_sum(model, hidden, labels, rows_multiple=rows_multiple)


def mlm_head_loss_sum(model, hidden: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None = None, *,
                      rows_multiple: int = ROWS_MULTIPLE) -> torch.Tensor:
    """Summed cross-entropy of the model's MLM head on `hidden` (B, L, d) at the positions `labels` (B, L) marks
    (-100 = none), the head run only there (see `masked_lm_loss_sum`); `weights` (B, L): a weight per position."""
    flat = labels.reshape(-1)
    rows = (flat != IGNORE).nonzero().squeeze(1)
    n = len(rows)
    padded = -(-n // rows_multiple) * rows_multiple
    targets = flat[rows]
    if padded > n:
        rows = torch.cat([rows, rows.new_zeros(padded - n)])
        targets = torch.cat([targets, targets.new_full((padded - n,), IGNORE)])
    logits = arch_of(model).mlm_head(model)(hidden.reshape(-1, hidden.shape[-1])[rows])
    if weights is None:
        return F.cross_entropy(logits.float(), targets, reduction="sum")
    losses = F.cross_entropy(logits.float(), targets, reduction="none")  # 0 at the ignored dummy rows
    return (losses[:n] * weights.reshape(-1)[rows[:n]].float()).sum()


class MaskingOptions(ObjectiveOptions):
    mask_prob: float | None = Field(None, gt=0.0, lt=1.0)  # default: train.mask_prob


@register("mlm")
class MaskedLM(Objective):
    """MLM on packed monolingual text (`mono` batches: no padding)."""

    batch_kind = "mono"
    Options = MaskingOptions
    uses_mlm_head = True

    def __init__(self, options: MaskingOptions, context):
        super().__init__(options, context)
        tokenizer = context.tokenizer
        self.mask_prob = options.mask_prob if options.mask_prob is not None else context.mask_prob
        self.special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)
        self.mask_id = tokenizer.mask_token_id
        special = set(self.special_ids.tolist())
        self.ordinary_ids = torch.tensor([i for i in range(len(tokenizer)) if i not in special], dtype=torch.long)

    def mask(self, input_ids: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return mask_tokens(input_ids, special_ids=self.special_ids, mask_id=self.mask_id,
                           ordinary_ids=self.ordinary_ids, generator=generator, mask_prob=self.mask_prob)

    def prepare(self, batch, generator: torch.Generator) -> Prepared:
        inputs, labels = self.mask(batch.input_ids, generator)
        tensors = {"input_ids": inputs, "labels": labels}
        if "attention_mask" in batch.tensors:
            tensors["attention_mask"] = batch.tensors["attention_mask"]
        return Prepared(tensors, int((labels != IGNORE).sum()), list(batch.langs))

    def loss_sum(self, model, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        return masked_lm_loss_sum(model, tensors["input_ids"], tensors["labels"], tensors.get("attention_mask"))


@torch.no_grad()
def heldout_mlm_loss(model, eval_rows: dict[str, torch.Tensor], objective: MaskedLM, *, seed: int, autocast,
                     micro_batch: int = 16) -> dict[str, float]:
    """Mean MLM loss per masked token on fixed held-out sequences with fixed masks, per language: the number every
    pretraining run reports, whatever its objectives (the variants' comparison)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = {}
    for lang, rows in sorted(eval_rows.items()):
        gen = torch.Generator().manual_seed(seed)  # masks drawn on the CPU: the same on every device
        total, count = 0.0, 0
        for i in range(0, len(rows), micro_batch):
            inputs, labels = objective.mask(rows[i:i + micro_batch], gen)
            with autocast():
                total += float(masked_lm_loss_sum(model, inputs.to(device), labels.to(device)))
            count += int((labels != IGNORE).sum())
        out[lang] = total / max(count, 1)
    model.train(was_training)
    return out
