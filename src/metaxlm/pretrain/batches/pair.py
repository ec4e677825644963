"""Kind "pair": one translation pair per row, `<s> src </s> tgt </s>`, with the side of every token known.

This is what translation language modelling sees, as in XLM (Conneau & Lample 2019) and PPA: a masked word can be
predicted from its translation because the whole translation is in the same row. A pair is never split across
rows (the packed stream did that before issue 8: half the rows began inside a target sentence). A pair longer
than seq_len is truncated, each side cut in proportion to its length and keeping at least one token per side
(the start of each side is kept), and counted in `stats["truncated_pairs"]`; a pair with an empty side is
skipped and counted in `stats["skipped_empty_side"]`. Pairs are α-sampled by language pair (N = pairs).

Rows are padded at the end to the longest row of the batch rounded up to a multiple of 8 (at most seq_len).
Tensors (B, L): input_ids; attention_mask (1 = real token); side (0 = source token, 1 = target token,
-1 = <s>, </s> or padding); and (B,) swap: a seeded coin per pair for objectives that put the two sides in a random
order (PPA's random input shuffling: `swap_pair_order`, MoCo's query/key sides). The coin is a function of the
seed and the pair's index in the stream, so kinds "pair" and "pair_sides" (same seeds, same pairs) agree on it, and
a resumed run draws the same coins.
"""

from __future__ import annotations

import numpy as np
import torch

from metaxlm.pretrain.batches.base import (
    BATCH_SOURCES,
    PARALLEL_SEED_OFFSET,
    Batch,
    BatchSource,
    fit_pair,
    pad_rows,
)
from metaxlm.pretrain.batches.streams import PairStream

SOURCE_SIDE, TARGET_SIDE, NO_SIDE = 0, 1, -1


def order_coins(stream_seed: int, first: int, n: int) -> torch.Tensor:
    """(n,) bool: the order coins of rows first..first+n-1 of a source's stream. A function of the seed and the rows'
    indices only: no state of its own to save (a resumed run draws the same coins), nothing shared with the
    sampling streams (adding coins changes no text drawn)."""
    rng = np.random.default_rng([stream_seed, 11, first])
    return torch.from_numpy(rng.random(n) < 0.5)


@BATCH_SOURCES.register("pair")
class PairSource(BatchSource):
    data = "parallel"
    seed_offset = PARALLEL_SEED_OFFSET
    specials_per_row = 3  # <s> src </s> tgt </s>

    def __init__(self, datasets: dict, *, seq_len: int, alpha: float, seed: int, tokenizer):
        super().__init__(datasets, seq_len=seq_len, alpha=alpha, seed=seed, tokenizer=tokenizer)
        self.need_padding()
        self.streams = {k: PairStream(ds, k, self.stream_seed) for k, ds in self.datasets.items()}
        # pairs with an empty side are never drawn, so they do not count towards a language pair's weight
        self.sampler = self.make_sampler({k: s.usable for k, s in self.streams.items()}, alpha)
        self.rows_built = self.truncated_pairs = 0

    def next_pairs(self, batch_size: int) -> tuple[list[str], list[tuple[list[int], list[int]]]]:
        langs = self.sampler.sample(batch_size)
        self.rows_built += batch_size
        return langs, [self.streams[k].next_pair() for k in langs]

    def swap_coins(self, batch_size: int) -> torch.Tensor:
        """(B,) bool: the order coins of the pairs just drawn (call after `next_pairs`)."""
        return order_coins(self.stream_seed, self.rows_built - batch_size, batch_size)

    def next_batch(self, batch_size: int) -> Batch:
        langs, pairs = self.next_pairs(batch_size)
        rows, sides = [], []
        for src, tgt in pairs:
            keep_src, keep_tgt = fit_pair(len(src), len(tgt), self.seq_len - self.specials_per_row)
            self.truncated_pairs += (keep_src, keep_tgt) != (len(src), len(tgt))
            rows.append([self.bos, *src[:keep_src], self.eos, *tgt[:keep_tgt], self.eos])
            sides.append([NO_SIDE] + [SOURCE_SIDE] * keep_src + [NO_SIDE] + [TARGET_SIDE] * keep_tgt + [NO_SIDE])
        input_ids, attention_mask = pad_rows(rows, self.pad, self.seq_len)
        side = torch.full_like(input_ids, NO_SIDE)
        for i, s in enumerate(sides):
            side[i, :len(s)] = torch.tensor(s, dtype=torch.long)
        return Batch(self.kind, langs, {"input_ids": input_ids, "attention_mask": attention_mask, "side": side,
                                        "swap": self.swap_coins(batch_size)})

    @property
    def stats(self) -> dict[str, int]:
        return {"rows": self.rows_built, "truncated_pairs": self.truncated_pairs,
                "skipped_empty_side": sum(s.skipped_empty_side for s in self.streams.values())}

    def state_dict(self) -> dict:
        return {"sampler": self.sampler.state_dict(), "streams": {k: s.state_dict() for k, s in self.streams.items()},
                "rows": self.rows_built, "truncated_pairs": self.truncated_pairs}

    def load_state_dict(self, state: dict) -> None:
        self.sampler.load_state_dict(state["sampler"])
        for k, s in self.streams.items():
            s.load_state_dict(state["streams"][k])
        self.rows_built, self.truncated_pairs = state["rows"], state["truncated_pairs"]


def swap_pair_order(batch: Batch) -> Batch:
    """The batch with the sides of the pairs whose `swap` coin is set in the other order: `<s> tgt </s> src </s>`
    (PPA's TLM: "the order ... is determined by the random input shuffling"). `side` moves with the tokens, so
    side 0 still marks the source language (English), now second; positions are not reset."""
    t = batch.tensors
    ids, side = t["input_ids"].clone(), t["side"].clone()
    for i in t["swap"].nonzero().flatten().tolist():
        row, row_side = t["input_ids"][i], t["side"][i]
        src, tgt = row[row_side == SOURCE_SIDE], row[row_side == TARGET_SIDE]
        bos, eos = row[0], row[1 + len(src)]
        n = len(src) + len(tgt) + 3
        ids[i, :n] = torch.cat([bos.view(1), tgt, eos.view(1), src, eos.view(1)])
        side[i, :n] = torch.tensor([NO_SIDE] + [TARGET_SIDE] * len(tgt) + [NO_SIDE] + [SOURCE_SIDE] * len(src)
                                   + [NO_SIDE])
    return Batch(batch.kind, batch.langs, {**t, "input_ids": ids, "side": side})
