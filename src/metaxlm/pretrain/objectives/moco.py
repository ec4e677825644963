"""Contrastive sentence alignment with a momentum encoder (MoCo; He et al. 2020), as PPA uses it (Pan et al. 2021).

Per translation pair (the `pair_sides` batch: each side encoded alone), one side goes to the query encoder f_q (the
model being trained) and the other to the key encoder f_k, an exponential moving average of f_q that gets no
gradient: θ_k ← m θ_k + (1 − m) θ_q (Eq. 1, m = 0.999), one fused pass over all parameters after each optimizer step.
Random input shuffling (`shuffle: true`, the paper's "crucial step"): which side is the query is the pair's seeded
coin (`swap` of the pair batch, the same coin that orders the pair for TLM with `order: shuffled`), so the query
encoder sees English and the other languages alike; with `shuffle: false` the query is always the English side.

Sentence representation: the final [CLS] hidden state (`pooling: mean`: the mean over real tokens, the paper's
footnote 1), L2-normalized, then the projection head z = W2 ReLU(W1 h) (Eq. 2; W1 d×d, W2 d_k×d, d_k = 300). The key
encoder has its own EMA copy of the head. InfoNCE (Eq. 3) with dot products and temperature τ = 0.05: the positive
is the pair's other side, the negatives the queue of the last K keys (K = 32,000); after each step this step's keys
(gathered from every process, in the global batch's row order) are enqueued, the oldest out, wrapping around when K
is not a multiple of the batch.

Departure from the paper (option): PPA normalizes h before the head and says nothing of z; metaxlm also
L2-normalizes z_q and z_k (`normalize_projection: true`), as MoCo (which PPA says it implements) does: with
τ = 0.05 unbounded dot products let the loss fall by growing norms. `normalize_projection: false` is Eq. 2–3 as
printed. The key encoder runs with dropout off (eval mode), so a key is a function of the weights only.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field

from metaxlm.errors import ConfigError
from metaxlm.models.arch import arch_of
from metaxlm.models.pooling import mean_pool
from metaxlm.pretrain.objectives import ObjectiveOptions, Prepared, register
from metaxlm.pretrain.objectives.base import Objective, exported_state
from metaxlm.pretrain.objectives.encoding import encode


class MoCoOptions(ObjectiveOptions):
    momentum: float = Field(0.999, ge=0.0, le=1.0)       # m of Eq. 1
    queue_size: int = Field(32_000, ge=1)                 # K
    temperature: float = Field(0.05, gt=0.0)              # τ
    projection_dim: int = Field(300, ge=1)                # d_k
    pooling: Literal["cls", "mean"] = "cls"
    shuffle: bool = True                                  # random input shuffling
    normalize_projection: bool = True                     # false: Eq. 2-3 as printed (see the module docstring)
    # continue the heads, key encoder and queue of a final/ dir (or its objectives.safetensors)
    state: str | None = None


def projection_head(hidden: int, out: int) -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, out))


def info_nce_sum(query: torch.Tensor, positive: torch.Tensor, queue: torch.Tensor, temperature: float) -> torch.Tensor:
    """Σ_rows −log exp(q·k+/τ) / (exp(q·k+/τ) + Σ_queue exp(q·k/τ)) in fp32: (B, d), (B, d), (K, d)."""
    query, positive, queue = query.float(), positive.float(), queue.float()
    logits = torch.cat([(query * positive).sum(1, keepdim=True), query @ queue.T], dim=1) / temperature
    return F.cross_entropy(logits, torch.zeros(len(query), dtype=torch.long, device=logits.device), reduction="sum")


@register("moco")
class MoCo(Objective):
    batch_kind = "pair_sides"
    Options = MoCoOptions

    def __init__(self, options: MoCoOptions, context):
        super().__init__(options, context)
        if context.model is None:
            raise ConfigError("train.objectives.moco: the objective copies the model into its momentum encoder, so it "
                              "needs the model (ObjectiveContext.model)")
        hidden = int(context.model_config.hidden_size)
        self.query_head = projection_head(hidden, options.projection_dim)
        # f_k: a copy of the query encoder (and head) with the model's starting weights; never optimized
        self.key_encoder = copy.deepcopy(arch_of(context.model).encoder(context.model)).requires_grad_(False).eval()
        self.key_head = copy.deepcopy(self.query_head).requires_grad_(False)
        queue = F.normalize(torch.randn(options.queue_size, options.projection_dim), dim=1)  # random, as MoCo
        self.register_buffer("queue", queue)
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))
        self.register_buffer("queued", torch.zeros(1, dtype=torch.long))  # keys enqueued so far (for the log)
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []       # (global row indices, keys) of this step
        self._ema_pairs: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None
        if options.state:
            self.load_state(options.state)

    def train(self, mode: bool = True):  # the key encoder always runs without dropout
        super().train(mode)
        self.key_encoder.eval()
        return self

    # -- inputs ------------------------------------------------------------------------------------------------------
    def prepare(self, batch, generator: torch.Generator) -> Prepared:
        t = batch.tensors
        # the query gets the translation where the pair's coin says swap, else the English side; the key the other
        swap = t["swap"] if self.options.shuffle else torch.zeros(len(batch), dtype=torch.bool)
        src, tgt = _common_width(t, "src", "tgt", pad=self.tokenizer.pad_token_id)
        pick = swap.view(-1, 1)
        tensors = {"q_ids": torch.where(pick, tgt[0], src[0]), "q_mask": torch.where(pick, tgt[1], src[1]),
                   "k_ids": torch.where(pick, src[0], tgt[0]), "k_mask": torch.where(pick, src[1], tgt[1]),
                   "row": torch.arange(len(batch)), "is_row": torch.ones(len(batch), dtype=torch.bool)}
        return Prepared(tensors, len(batch), list(batch.langs), target_key="is_row")

    def sentence(self, hidden: torch.Tensor, mask: torch.Tensor, head: torch.nn.Module) -> torch.Tensor:
        h = hidden[:, 0] if self.options.pooling == "cls" else mean_pool(hidden, mask)
        z = head(F.normalize(h.float(), dim=-1).to(hidden.dtype))
        return F.normalize(z.float(), dim=-1) if self.options.normalize_projection else z.float()

    # -- keys: the momentum encoder, no autograd, this process's rows ------------------------------------------------
    @torch.no_grad()
    def label(self, model, part: Prepared) -> Prepared:
        t = part.tensors
        ids, mask = _trim(t["k_ids"], t["k_mask"])
        keys = self.sentence(self.key_encoder(input_ids=ids, attention_mask=mask).last_hidden_state, mask,
                             self.key_head)
        self._pending.append((t["row"], keys))
        return Prepared({**t, "keys": keys}, part.num_targets, part.langs, part.target_key)

    # -- queries and the loss ----------------------------------------------------------------------------------------
    def loss_sum(self, model, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        ids, mask = _trim(tensors["q_ids"], tensors["q_mask"])
        queries = self.sentence(encode(model, ids, mask).last_hidden_state, mask, self.query_head)
        return info_nce_sum(queries, tensors["keys"], self.queue, self.options.temperature)

    # -- after the optimizer step: EMA, then enqueue -------------------------------------------------------------------
    @torch.no_grad()
    def after_step(self, model) -> None:
        self.momentum_update(model)
        if not self._pending:
            return
        rows = torch.cat([r for r, _ in self._pending])
        keys = torch.cat([k for _, k in self._pending])
        self._pending.clear()
        rows, keys = _gather_from_processes(rows, keys)
        self.enqueue(keys[torch.argsort(rows)])  # in the global batch's row order, whatever the process count

    @torch.no_grad()
    def momentum_update(self, model) -> None:
        """θ_k ← m θ_k + (1 − m) θ_q over the encoder and the head: one multi-tensor lerp over every parameter."""
        if self._ema_pairs is None:
            query = [*arch_of(model).encoder(model).parameters(), *self.query_head.parameters()]
            key = [*self.key_encoder.parameters(), *self.key_head.parameters()]
            if [p.shape for p in query] != [p.shape for p in key]:
                raise RuntimeError("moco: the momentum encoder no longer matches the model's parameters")
            self._ema_pairs = (key, query)
        key, query = self._ema_pairs
        torch._foreach_lerp_(key, [q.detach() for q in query], 1.0 - self.options.momentum)

    def enqueue(self, keys: torch.Tensor) -> None:
        """Write `keys` (oldest first) at the queue pointer, wrapping around; more keys than K keep the last K."""
        size = self.queue.shape[0]
        keys = keys[-size:].to(self.queue.dtype)
        ptr = int(self.queue_ptr)
        index = (ptr + torch.arange(len(keys), device=self.queue.device)) % size
        self.queue[index] = keys
        self.queue_ptr.fill_((ptr + len(keys)) % size)
        self.queued += len(keys)

    def evaluate(self, model, autocast) -> dict[str, float]:
        return {"queue_filled": min(1.0, float(self.queued) / self.queue.shape[0])}

    # -- continuing from an exported run ------------------------------------------------------------------------------
    def load_state(self, path: str | Path) -> None:
        file, state = exported_state(path, "moco", "train.objectives.moco.state")
        try:
            self.load_checkpoint_state(state, str(file))
        except RuntimeError as err:
            raise ConfigError(f"train.objectives.moco.state: {err}") from None
        self.loaded_parameters |= {n for n, _ in self.named_parameters()}


def _common_width(t: dict[str, torch.Tensor], *names: str, pad: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(ids, mask) of each side, padded at the end to the widest of them."""
    width = max(t[f"{n}_ids"].shape[1] for n in names)
    return [(F.pad(t[f"{n}_ids"], (0, width - t[f"{n}_ids"].shape[1]), value=pad),
             F.pad(t[f"{n}_mask"], (0, width - t[f"{n}_mask"].shape[1]), value=0)) for n in names]


def _trim(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop the padding columns no row of this slice uses (rows were padded for the whole global batch)."""
    width = max(int(mask.sum(1).max()), 1) if len(mask) else 1
    return ids[:, :width], mask[:, :width]


def _gather_from_processes(rows: torch.Tensor, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return rows, keys
    world = dist.get_world_size()
    all_rows = [torch.empty_like(rows) for _ in range(world)]
    all_keys = [torch.empty_like(keys) for _ in range(world)]
    dist.all_gather(all_rows, rows.contiguous())
    dist.all_gather(all_keys, keys.contiguous())
    return torch.cat(all_rows), torch.cat(all_keys)
