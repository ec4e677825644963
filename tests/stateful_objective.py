"""A small stateful objective for the engine's tests (loaded as a config plugin): it owns a trainable projection
head, a frozen EMA copy of it updated after every optimizer step, and a queue of past keys (a buffer with a write
pointer) — the kinds of state MoCo and XLM-Align need. Loss per row: InfoNCE of the head's projection of the
mean-pooled sequence against its EMA key (positive) and the queue (negatives)."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from pydantic import Field

from metaxlm.models.arch import arch_of
from metaxlm.models.pooling import mean_pool
from metaxlm.pretrain.objectives import ObjectiveOptions, Prepared, register
from metaxlm.pretrain.objectives.base import Objective


class ToyOptions(ObjectiveOptions):
    queue: int = Field(16, ge=1)
    dim: int = Field(8, ge=1)
    momentum: float = Field(0.9, ge=0.0, le=1.0)


@register("toy_stateful")
class ToyStateful(Objective):
    batch_kind = "mono"
    Options = ToyOptions

    def __init__(self, options: ToyOptions, context):
        super().__init__(options, context)
        self.head = torch.nn.Linear(context.model_config.hidden_size, options.dim)
        self.ema = copy.deepcopy(self.head).requires_grad_(False)
        self.register_buffer("queue", F.normalize(torch.randn(options.queue, options.dim), dim=-1))
        self.register_buffer("queue_ptr", torch.zeros((), dtype=torch.long))
        self._new_keys: list[torch.Tensor] = []

    def prepare(self, batch, generator: torch.Generator) -> Prepared:
        rows = torch.ones(len(batch.langs), dtype=torch.bool)
        return Prepared({"input_ids": batch.input_ids, "rows": rows}, len(batch.langs), list(batch.langs),
                        target_key="rows")

    def loss_sum(self, model, tensors):
        ids = tensors["input_ids"]
        pooled = mean_pool(arch_of(model).encoder(model)(input_ids=ids).last_hidden_state, torch.ones_like(ids))
        q = F.normalize(self.head(pooled).float(), dim=-1)
        with torch.no_grad():
            k = F.normalize(self.ema(pooled.detach()).float(), dim=-1)
        self._new_keys.append(k)
        logits = torch.cat([(q * k).sum(-1, keepdim=True), q @ self.queue.t()], dim=1) / 0.1
        return F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long, device=logits.device),
                               reduction="sum")

    @torch.no_grad()
    def after_step(self, model) -> None:
        m = self.options.momentum
        for pe, ph in zip(self.ema.parameters(), self.head.parameters(), strict=True):
            pe.mul_(m).add_(ph.detach(), alpha=1 - m)
        for k in torch.cat(self._new_keys):
            self.queue[self.queue_ptr] = k
            self.queue_ptr.copy_((self.queue_ptr + 1) % len(self.queue))
        self._new_keys.clear()

    def evaluate(self, model, autocast) -> dict[str, float]:
        return {"queue_norm": float(self.queue.norm())}
