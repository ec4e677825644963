"""Kind "mono": packed monolingual text, every row exactly `seq_len` tokens of ONE language, no padding.

RoBERTa's FULL-SENTENCES packing: <s> text </s> text </s> ..., a long text continuing into the next row of the
same language. Which language fills each row is drawn with p_i ∝ N_i^α (N_i = texts). The batches are bit-identical
to the packer used before issue 8 (same seeds, same draws): MetaXLM's numbers depend on it.
Tensors: input_ids (B, seq_len).
"""

from __future__ import annotations

import torch

from metaxlm.pretrain.batches.base import BATCH_SOURCES, Batch, BatchSource
from metaxlm.pretrain.batches.streams import TextStream


def pack_sequence(stream, seq_len: int, bos: int, eos: int) -> list[int]:
    """One row of `seq_len` tokens from `stream` (anything with `next_text()` and `leftover`), starting with bos."""
    seq = [bos]
    while len(seq) < seq_len:
        if not stream.leftover:
            ids = stream.next_text()
            if not ids:
                continue
            stream.leftover = ids + [eos]
        take = seq_len - len(seq)
        seq.extend(stream.leftover[:take])
        stream.leftover = stream.leftover[take:]
    return seq


@BATCH_SOURCES.register("mono")
class MonoSource(BatchSource):
    data = "mono"

    def __init__(self, datasets: dict, *, seq_len: int, alpha: float, seed: int, tokenizer):
        super().__init__(datasets, seq_len=seq_len, alpha=alpha, seed=seed, tokenizer=tokenizer)
        self.streams = {k: TextStream(ds, k, self.stream_seed) for k, ds in self.datasets.items()}
        self.sampler = self.make_sampler({k: len(ds) for k, ds in self.datasets.items()}, alpha)

    def next_batch(self, batch_size: int) -> Batch:
        langs = self.sampler.sample(batch_size)
        rows = [pack_sequence(self.streams[k], self.seq_len, self.bos, self.eos) for k in langs]
        return Batch(self.kind, langs, {"input_ids": torch.tensor(rows, dtype=torch.long)})

    def state_dict(self) -> dict:
        return {"sampler": self.sampler.state_dict(), "streams": {k: s.state_dict() for k, s in self.streams.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.sampler.load_state_dict(state["sampler"])
        for k, s in self.streams.items():
            s.load_state_dict(state["streams"][k])
