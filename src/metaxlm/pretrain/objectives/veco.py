"""VECO's pretraining objectives (Luo et al. §2.2): IS-MLM and CS-MLM on pairs (x, y), for `model.arch: veco`.

Per row (x, y), both BERT-masked once (x̃, ŷ; 15% / 80-10-10, `mask_tokens`):
  IS-MLM(x)     x̃ through self-attention (bidirectional) + FFN of every layer, cross-attention skipped (the model's
                IS mode); predict the masked tokens of x from X(N), the last layer's states. The same for y.
  CS-MLM(x, y)  ŷ through self-attention with a triangular (causal) mask, then cross-attention to X(N) DETACHED from
                the graph (no gradient from the "virtual decoder" into the "virtual encoder"), then FFN (the model's
                CS mode); predict the masked tokens of y. And CS-MLM(y, x) the other way round.
  loss = is_x · IS(x) + is_y · IS(y) + cs_xy · CS(x, y) + cs_yx · CS(y, x), the four weights options (default 1),
  summed over the masked tokens and divided, as for every objective, by the global number of masked tokens of x
  and y: so the logged loss per target is IS + CS cross-entropy per masked token.
The IS pass's final states are reused as X(N) / Y(N) for CS ("we reuse their hidden states from the last layer to
perform CS-MLM", §3) — one IS pass of x̃ and ŷ (stacked as 2B rows) and one CS pass for both directions (2B rows).
The CS pass predicts the same masked positions of ŷ as IS-MLM(y) (one masking per step, as the paper's (x̃, ŷ)).

Data — two registered names, one class, so that a config trains on both kinds at once:
  veco           `pair_sides` batches: translation pairs from data.parallel; x = the source side, y = the target.
  veco_segments  `segments` batches: two adjacent segments of one monolingual text (x = the earlier part).
  e.g. `train.objectives: {veco: 1.0, veco_segments: 1.0}`; α-sampling applies within each kind (by language pair,
  by language). `shuffle: true` flips x and y per row by the batch's seeded order coin (`swap`, the coin kind "pair"
  draws: reproducible and exact on resume).

Departures from the paper, and options:
  * The paper ALTERNATES a monolingual and a bilingual batch per iteration; the engine gives every objective a batch
    each step, so with both names each step has one batch of each kind (the sum of the two losses).
  * With equal weights the loss is symmetric in x and y (both directions of CS are summed: the paper's "exchanging
    x and ŷ", which it motivates as flipping the monolingual segment order, footnote 4), so `shuffle` changes the
    loss only when cs_xy ≠ cs_yx or is_x ≠ is_y (e.g. CS only from the earlier segment to the later: cs_yx: 0, and
    flip the order at random). Default false.
  * `detach: true` is the paper's stop-gradient; `detach: false` lets CS-MLM's gradient reach the IS pass (an
    ablation, not the paper).
  * The paper also trains TLM on the bilingual batches and first trains only the cross-attention with the body
    frozen; neither is part of this objective: add `tlm` (on `pair` batches) beside it, and run a short first variant
    with the other objectives' weights as you see fit.
  * A layer listed without cross-attention (`model.options.cross_attention_layers`) runs causal self-attention +
    FFN in the CS pass.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import Field

from metaxlm.data.padding import IGNORE
from metaxlm.errors import ConfigError
from metaxlm.models.arch import arch_of
from metaxlm.pretrain.objectives import Prepared, register
from metaxlm.pretrain.objectives.encoding import encode
from metaxlm.pretrain.objectives.mlm import MaskedLM, MaskingOptions, mlm_head_loss_sum


class VecoObjectiveOptions(MaskingOptions):
    is_x: float = Field(1.0, ge=0.0)    # IS-MLM(x)
    is_y: float = Field(1.0, ge=0.0)    # IS-MLM(y)
    cs_xy: float = Field(1.0, ge=0.0)   # CS-MLM(x, y): predict ŷ's masked tokens from x
    cs_yx: float = Field(1.0, ge=0.0)   # CS-MLM(y, x)
    shuffle: bool = False               # flip x and y per row by the batch's seeded order coin
    detach: bool = True                 # the paper's stop-gradient of X(N) in CS-MLM


def cs_mlm_loss_sum(model, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor, memory: torch.Tensor,
                    memory_mask: torch.Tensor, weights: torch.Tensor | None = None, *,
                    detach: bool = True) -> torch.Tensor:
    """CS-MLM: the masked sequence `ids` through the model's CS mode (causal self-attention, cross-attention to
    `memory` = X(N) with its padding mask, FFN), summed cross-entropy at the `labels` positions. `memory` is detached
    (the paper's stop-gradient) unless `detach=False`."""
    memory = memory.detach() if detach else memory
    hidden = arch_of(model).encoder(model)(input_ids=ids, attention_mask=mask, encoder_hidden_states=memory,
                                           encoder_attention_mask=memory_mask).last_hidden_state
    return mlm_head_loss_sum(model, hidden, labels, weights)


def _padded(ids: torch.Tensor, mask: torch.Tensor, width: int, pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    extra = width - ids.shape[1]
    if extra <= 0:
        return ids[:, :width], mask[:, :width]
    return F.pad(ids, (0, extra), value=pad), F.pad(mask, (0, extra), value=0)


@register("veco")
class VecoMLM(MaskedLM):
    """IS-MLM + CS-MLM on translation pairs (`pair_sides`); `veco_segments` is the same on `segments` batches."""

    batch_kind = "pair_sides"
    Options = VecoObjectiveOptions

    def __init__(self, options: VecoObjectiveOptions, context):
        super().__init__(options, context)
        where = f"train.objectives.{self.name}"
        model_type = getattr(context.model_config, "model_type", None)
        if context.model_config is None or model_type != "veco":
            raise ConfigError(f"{where}: IS/CS-MLM needs a VECO model (model.arch: veco, or start_from a VECO "
                              f"model); the model is of type {model_type!r}")
        o = options
        if not any((o.is_x, o.is_y, o.cs_xy, o.cs_yx)):
            raise ConfigError(f"{where}: is_x, is_y, cs_xy and cs_yx are all 0: nothing to train")
        if (o.cs_xy or o.cs_yx) and not context.model_config.cross_attention_layers:
            raise ConfigError(f"{where}: CS-MLM (cs_xy, cs_yx) needs cross-attention, and the model has none "
                              f"(model.options.cross_attention_layers is empty)")
        self.pad = self.tokenizer.pad_token_id
        # IS-MLM and CS-MLM loss sums and (weighted) target counts of this process's training rows since the last
        # evaluation: the two terms logged apart (eval/<name>/is_mlm, cs_mlm), so CS-MLM's own fall can be seen
        self.register_buffer("term_stats", torch.zeros(4, dtype=torch.float64))

    # -- inputs: the global batch, identically on every process ------------------------------------------------------
    def prepare(self, batch, generator: torch.Generator) -> Prepared:
        t = batch.tensors
        width = max(t["src_ids"].shape[1], t["tgt_ids"].shape[1])
        x_ids, x_mask = _padded(t["src_ids"], t["src_mask"], width, self.pad)
        y_ids, y_mask = _padded(t["tgt_ids"], t["tgt_mask"], width, self.pad)
        if self.options.shuffle:
            flip = t["swap"].view(-1, 1)
            x_ids, y_ids = torch.where(flip, y_ids, x_ids), torch.where(flip, x_ids, y_ids)
            x_mask, y_mask = torch.where(flip, y_mask, x_mask), torch.where(flip, x_mask, y_mask)
        x_in, x_labels = self.mask(x_ids, generator)
        y_in, y_labels = self.mask(y_ids, generator)
        # one label tensor for both sequences (the engine counts a row slice's targets from it); loss_sum splits it
        labels = torch.cat([x_labels, y_labels], dim=1)
        tensors = {"x_ids": x_in, "x_mask": x_mask, "y_ids": y_in, "y_mask": y_mask, "labels": labels}
        return Prepared(tensors, int((labels != IGNORE).sum()), list(batch.langs))

    # -- the loss: one IS pass of x̃ and ŷ, one CS pass for both directions --------------------------------------------
    def loss_sum(self, model, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        o = self.options
        x_mask, y_mask = tensors["x_mask"], tensors["y_mask"]
        n = len(x_mask)
        if n == 0:  # an empty row slice (the engine never makes one: micro-batches are multiples of the processes)
            return torch.zeros((), device=x_mask.device)
        # drop the padding columns no row of this slice uses (rows were padded for the whole global batch)
        width = max(int(torch.cat([x_mask, y_mask]).sum(1).max()), 1)
        x_ids, y_ids = tensors["x_ids"][:, :width], tensors["y_ids"][:, :width]
        x_mask, y_mask = x_mask[:, :width], y_mask[:, :width]
        full = tensors["x_ids"].shape[1]
        x_labels, y_labels = tensors["labels"][:, :width], tensors["labels"][:, full:full + width]

        ids, mask = torch.cat([x_ids, y_ids]), torch.cat([x_mask, y_mask])
        train_is = bool(o.is_x or o.is_y) or not o.detach
        with torch.enable_grad() if train_is else torch.no_grad():  # X(N) alone needs no graph when detached
            hidden = encode(model, ids, mask).last_hidden_state
        total = hidden.new_zeros((), dtype=torch.float32)
        # summed on the device, added to the buffer without a host sync in the training step
        stats = [hidden.new_zeros((), dtype=torch.float64)] * 4
        if o.is_x or o.is_y:
            weights = torch.cat([torch.full(x_labels.shape, float(o.is_x)), torch.full(y_labels.shape, float(o.is_y))])
            labels = torch.cat([x_labels, y_labels])
            term = mlm_head_loss_sum(model, hidden, labels, weights.to(hidden.device))
            stats[0:2] = term.detach().double(), (weights.to(labels.device) * (labels != IGNORE)).sum().double()
            total = total + term
        if o.cs_xy or o.cs_yx:
            # rows 0..n-1: ŷ attends to X(N) (CS(x, y)); rows n..2n-1: x̃ attends to Y(N) (CS(y, x))
            parts = [(y_ids, y_mask, y_labels, hidden[:n], x_mask, o.cs_xy),
                     (x_ids, x_mask, x_labels, hidden[n:], y_mask, o.cs_yx)]
            parts = [p for p in parts if p[-1]]  # a direction of weight 0 is not computed at all
            weights = torch.cat([torch.full(p[2].shape, float(p[-1])) for p in parts])
            labels = torch.cat([p[2] for p in parts])
            term = cs_mlm_loss_sum(
                model, torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts]), labels,
                torch.cat([p[3] for p in parts]), torch.cat([p[4] for p in parts]), weights.to(hidden.device),
                detach=o.detach)
            stats[2:4] = term.detach().double(), (weights.to(labels.device) * (labels != IGNORE)).sum().double()
            total = total + term
        if model.training:
            self.term_stats += torch.stack(stats).to(self.term_stats.device)
        return total

    def evaluate(self, model, autocast) -> dict[str, float]:
        """Mean IS-MLM and CS-MLM loss per (weighted) target over the training rows since the last evaluation."""
        is_sum, is_n, cs_sum, cs_n = self.term_stats.tolist()
        self.term_stats.zero_()
        out = {}
        if is_n:
            out["is_mlm"] = is_sum / is_n
        if cs_n:
            out["cs_mlm"] = cs_sum / cs_n
        return out

    def load_checkpoint_state(self, state: dict[str, torch.Tensor], source: str) -> None:
        # checkpoints written before the two terms were logged apart lack `term_stats`: they resume with it at 0
        if "term_stats" not in state:
            state = {**state, "term_stats": torch.zeros(4, dtype=torch.float64)}
        super().load_checkpoint_state(state, source)


@register("veco_segments")
class VecoMLMOnSegments(VecoMLM):
    """IS-MLM + CS-MLM on two adjacent segments of one monolingual text (`segments` batches)."""

    batch_kind = "segments"
