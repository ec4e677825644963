"""Masked language modelling (BERT): dynamic masking, 15% of tokens, 80% [MASK] / 10% random / 10% kept.

The output layer (hidden → vocabulary logits) runs only at the masked positions: with a 32k vocabulary
and 15% masking that skips ~85% of the model's largest matmul, and gives exactly the loss the full
logits would (the other positions carry no loss).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from metaxlm.pretrain.objectives import Objective, Prepared, register


def mask_tokens(input_ids: torch.Tensor, *, special_ids: torch.Tensor, mask_id: int, ordinary_ids: torch.Tensor,
                generator: torch.Generator, mask_prob: float = 0.15, replace_prob: float = 0.8,
                random_prob: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (masked inputs, labels with -100 where no loss)."""
    labels = input_ids.clone()
    candidates = ~torch.isin(input_ids, special_ids)
    chosen = (torch.rand(input_ids.shape, generator=generator) < mask_prob) & candidates
    labels[~chosen] = -100
    roll = torch.rand(input_ids.shape, generator=generator)
    inputs = input_ids.clone()
    inputs[chosen & (roll < replace_prob)] = mask_id
    randomize = chosen & (roll >= replace_prob) & (roll < replace_prob + random_prob)
    # random replacements are drawn from ordinary pieces only (never <s>, <pad>, <mask>, ...)
    picks = torch.randint(len(ordinary_ids), input_ids.shape, generator=generator)
    inputs[randomize] = ordinary_ids[picks[randomize]]
    return inputs, labels


def mlm_head(model):
    """The module mapping hidden states to vocabulary logits (BERT: cls; RoBERTa family: lm_head)."""
    return model.cls if hasattr(model, "cls") else model.lm_head


def encoder(model):
    return model.base_model


ROWS_MULTIPLE = 64


def masked_lm_loss_sum(model, inputs: torch.Tensor, labels: torch.Tensor, *,
                       rows_multiple: int = ROWS_MULTIPLE) -> torch.Tensor:
    """Summed cross-entropy over the masked positions, the output layer run only there. The masked rows are
    padded (with ignored dummy rows) to a multiple of `rows_multiple`, so the large (rows × vocabulary) tensors
    come in a few recurring sizes that the allocator reuses instead of fetching fresh memory every step."""
    hidden = encoder(model)(input_ids=inputs).last_hidden_state
    flat = labels.reshape(-1)
    rows = (flat != -100).nonzero().squeeze(1)
    n = len(rows)
    padded = -(-n // rows_multiple) * rows_multiple
    targets = flat[rows]
    if padded > n:
        rows = torch.cat([rows, rows.new_zeros(padded - n)])
        targets = torch.cat([targets, targets.new_full((padded - n,), -100)])
    logits = mlm_head(model)(hidden.reshape(-1, hidden.shape[-1])[rows])
    return F.cross_entropy(logits.float(), targets, reduction="sum")


@register("mlm")
class MaskedLM(Objective):
    batch_kind = "mono"

    def __init__(self, tokenizer, mask_prob: float = 0.15):
        super().__init__(tokenizer)
        self.mask_prob = mask_prob
        self.special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)
        self.mask_id = tokenizer.mask_token_id
        special = set(self.special_ids.tolist())
        self.ordinary_ids = torch.tensor([i for i in range(len(tokenizer)) if i not in special], dtype=torch.long)

    def prepare(self, batch, generator: torch.Generator) -> Prepared:
        inputs, labels = mask_tokens(batch.input_ids, special_ids=self.special_ids, mask_id=self.mask_id,
                                     ordinary_ids=self.ordinary_ids, generator=generator, mask_prob=self.mask_prob)
        return Prepared({"input_ids": inputs, "labels": labels}, int((labels != -100).sum()), list(batch.langs))

    def loss_sum(self, model, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        return masked_lm_loss_sum(model, tensors["input_ids"], tensors["labels"])
