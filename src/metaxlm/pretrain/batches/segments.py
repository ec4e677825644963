"""Kind "segments": two adjacent segments of one monolingual text per row, as separate tensors (VECO's x and y).

What "adjacent" can honestly mean here follows from how `data prepare` stores monolingual data: one row per text,
where a text is one line (CorpusSpec unit=line, the default) or one document (unit=document), and rows are NOT
in file order (prepare tokenizes a corpus in interleaved parts: with num_proc > 1, rows i and i+1 come from lines
num_proc apart), nor does the prepared data record which lines formed a document. So two consecutive rows are not
two consecutive sentences, and the only adjacency the data guarantees is inside one text. A row is therefore one
text cut in two at a random point near its middle (in its middle half, each part at least one token):
src = the earlier part, tgt = the part that follows. With unit=line that means the two halves of a line (usually a
sentence); with unit=document, two consecutive spans of a document. A text longer than 2·(seq_len − 2) tokens
is cut into consecutive windows of (nearly) equal length, each split in two, one window per row, continuing
in the next row of the same language (as kind "mono" continues a long text), so nothing is thrown away.
Texts of fewer than 2 tokens cannot be split: they are skipped and counted in `stats["skipped_short_texts"]`.

Each part is `<s> x </s>` padded at the end, separately, like kind "pair_sides". Languages are α-sampled
(N = texts of at least 2 tokens) from their own seeds (seed + 3_333_333), so this kind does not replay the mono
batches' texts in the same order. Tensors: src_ids, src_mask, tgt_ids, tgt_mask; swap (B,): a seeded coin per
row, as kind "pair" draws them (`order_coins`: a function of the seed and the row's index in the stream, so a resumed
run draws the same coins), for objectives that flip the order of the two segments at random (VECO's option).
"""

from __future__ import annotations

import numpy as np

from metaxlm.errors import DataError
from metaxlm.pretrain.batches.base import BATCH_SOURCES, Batch, BatchSource
from metaxlm.pretrain.batches.pair import order_coins
from metaxlm.pretrain.batches.pair_sides import two_sides
from metaxlm.pretrain.batches.streams import TextStream, dataset_path


def split_point(length: int, cap: int, rng: np.random.Generator) -> int:
    """A random cut of a window of `length` (2 ≤ length ≤ 2·cap) tokens: in its middle half, both parts ≤ cap."""
    lo = max(1, length - cap, length // 4)
    hi = min(length - 1, cap, length - length // 4)
    return int(rng.integers(lo, hi + 1))


@BATCH_SOURCES.register("segments")
class SegmentsSource(BatchSource):
    data = "mono"
    seed_offset = 3_333_333

    def __init__(self, datasets: dict, *, seq_len: int, alpha: float, seed: int, tokenizer):
        super().__init__(datasets, seq_len=seq_len, alpha=alpha, seed=seed, tokenizer=tokenizer)
        self.need_padding()
        self.cap = seq_len - 2  # tokens of one part between <s> and </s>
        self.streams = {k: TextStream(ds, k, self.stream_seed) for k, ds in self.datasets.items()}
        splittable = {k: int((s.ids.lengths() >= 2).sum()) for k, s in self.streams.items()}
        for k, n in splittable.items():
            if not n:
                raise DataError(dataset_path(self.datasets[k], k), None,
                                f"monolingual data {k}: no text has the 2 tokens needed to form two segments")
        self.sampler = self.make_sampler(splittable, alpha)
        self.split_rng = np.random.default_rng([self.stream_seed, 2])
        self.rows_built = self.skipped_short_texts = 0

    def _next_window(self, stream: TextStream) -> list[int]:
        while not stream.leftover:
            text = stream.next_text()
            if len(text) >= 2:
                stream.leftover = text
            else:
                self.skipped_short_texts += 1
        n = len(stream.leftover)
        windows = -(-n // (2 * self.cap))
        take = -(-n // windows)  # equal windows: no 1-token tail that could not be split
        window, stream.leftover = stream.leftover[:take], stream.leftover[take:]
        return window

    def next_batch(self, batch_size: int) -> Batch:
        langs = self.sampler.sample(batch_size)
        pairs = []
        for k in langs:
            window = self._next_window(self.streams[k])
            cut = split_point(len(window), self.cap, self.split_rng)
            pairs.append((window[:cut], window[cut:]))
        first = self.rows_built
        self.rows_built += batch_size
        tensors, _ = two_sides(pairs, bos=self.bos, eos=self.eos, pad=self.pad, seq_len=self.seq_len)
        return Batch(self.kind, langs, {**tensors, "swap": order_coins(self.stream_seed, first, batch_size)})

    @property
    def stats(self) -> dict[str, int]:
        return {"rows": self.rows_built, "skipped_short_texts": self.skipped_short_texts}

    def state_dict(self) -> dict:
        return {"sampler": self.sampler.state_dict(), "streams": {k: s.state_dict() for k, s in self.streams.items()},
                "split_rng": self.split_rng.bit_generator.state, **self.stats}

    def load_state_dict(self, state: dict) -> None:
        self.sampler.load_state_dict(state["sampler"])
        for k, s in self.streams.items():
            s.load_state_dict(state["streams"][k])
        self.split_rng.bit_generator.state = state["split_rng"]
        self.rows_built, self.skipped_short_texts = state["rows"], state["skipped_short_texts"]
