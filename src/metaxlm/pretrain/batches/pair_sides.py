"""Kind "pair_sides": one translation pair per row, the two sides as separate tensors.

For objectives that encode each side on its own (e.g. PPA's contrastive post-pretraining, or an encoder-decoder
reading the source and predicting the target). Each side is `<s> x </s>`, cut to at most seq_len tokens (the start
is kept; a pair with a cut side is counted in `stats["truncated_pairs"]`), and padded at the end, separately per
side, to the side's longest row rounded up to a multiple of 8 (at most seq_len). A pair with an empty side is
skipped and counted, as for kind "pair"; pairs are α-sampled by language pair, with the same seeds as "pair".
Tensors: src_ids, src_mask (B, Ls) and tgt_ids, tgt_mask (B, Lt); mask 1 = real token; swap (B,) the order coins
of kind "pair" (the same coin for the same pair).
"""

from __future__ import annotations

import torch

from metaxlm.pretrain.batches.base import BATCH_SOURCES, Batch, pad_rows
from metaxlm.pretrain.batches.pair import PairSource


def two_sides(pairs: list[tuple[list[int], list[int]]], *, bos: int, eos: int, pad: int,
              seq_len: int) -> tuple[dict[str, torch.Tensor], int]:
    """The four side tensors of `pairs`, and how many pairs had a side cut to fit seq_len."""
    keep = seq_len - 2
    cut = sum(len(src) > keep or len(tgt) > keep for src, tgt in pairs)
    src_ids, src_mask = pad_rows([[bos, *src[:keep], eos] for src, _ in pairs], pad, seq_len)
    tgt_ids, tgt_mask = pad_rows([[bos, *tgt[:keep], eos] for _, tgt in pairs], pad, seq_len)
    return {"src_ids": src_ids, "src_mask": src_mask, "tgt_ids": tgt_ids, "tgt_mask": tgt_mask}, cut


@BATCH_SOURCES.register("pair_sides")
class PairSidesSource(PairSource):
    def next_batch(self, batch_size: int) -> Batch:
        langs, pairs = self.next_pairs(batch_size)
        tensors, cut = two_sides(pairs, bos=self.bos, eos=self.eos, pad=self.pad, seq_len=self.seq_len)
        self.truncated_pairs += cut
        return Batch(self.kind, langs, {**tensors, "swap": self.swap_coins(batch_size)})
