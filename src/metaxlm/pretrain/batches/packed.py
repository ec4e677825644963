"""`PackedBatches`: the pre-issue-8 interface, kept only until the engine builds sources from BATCH_SOURCES.

kind="mono" is `MonoSource` (same batches). kind="parallel" is the OLD packing of translation pairs as texts
`src </s> tgt`, several to a row and split across rows: the defect issue 8 fixes with kind "pair". Delete this
file when engine.py and bench/pretrain_throughput.py no longer import it.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from metaxlm.pretrain.batches.base import PARALLEL_SEED_OFFSET, Batch
from metaxlm.pretrain.batches.mono import MonoSource, pack_sequence
from metaxlm.pretrain.batches.streams import IdColumn, ShuffledOrder


class _JoinedPairs:
    """A parallel dataset read as texts `src </s> tgt` (the old TLM input), with TextStream's state."""

    def __init__(self, dataset, key: str, seed: int, joiner: int):
        self.order = ShuffledOrder(len(dataset), key, seed)
        self.src, self.tgt, self.joiner = IdColumn(dataset, "src_ids"), IdColumn(dataset, "tgt_ids"), joiner
        self.leftover: list[int] = []

    def next_text(self) -> list[int]:
        i = self.order.next_index()
        return self.src.row(i) + [self.joiner] + self.tgt.row(i)

    def state_dict(self) -> dict:
        return {"epoch": self.order.epoch, "pos": self.order.pos, "leftover": list(self.leftover)}

    def load_state_dict(self, state: dict) -> None:
        self.order.epoch, self.order.pos, self.leftover = state["epoch"], state["pos"], list(state["leftover"])


class PackedBatches(MonoSource):
    def __init__(self, datasets: dict, *, seq_len: int, alpha: float, seed: int, bos_id: int, eos_id: int,
                 kind: str = "mono"):
        tokenizer = SimpleNamespace(cls_token_id=bos_id, sep_token_id=eos_id, pad_token_id=None)
        if kind == "parallel":
            self.seed_offset = PARALLEL_SEED_OFFSET
        super().__init__(datasets, seq_len=seq_len, alpha=alpha, seed=seed, tokenizer=tokenizer)
        if kind == "parallel":
            self.streams = {k: _JoinedPairs(ds, k, self.stream_seed, eos_id) for k, ds in self.datasets.items()}
        self.legacy_kind = kind

    def next_batch(self, batch_size: int) -> Batch:
        langs = self.sampler.sample(batch_size)
        rows = [pack_sequence(self.streams[k], self.seq_len, self.bos, self.eos) for k in langs]
        return Batch(self.legacy_kind, langs, {"input_ids": torch.tensor(rows, dtype=torch.long)})
