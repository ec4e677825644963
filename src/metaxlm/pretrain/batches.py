"""Packed, α-sampled training batches from prepared Arrow data, with a resumable position.

Every sequence is filled to exactly `seq_len` tokens from ONE language (RoBERTa's FULL-SENTENCES
packing): <s> text </s> text </s> ..., continuing a long text into the next sequence of the same
language, so no position is padding. Which language fills each sequence is drawn with p_i ∝ N_i^α.
Everything that decides the next batch (sampler RNG, per-language epoch / position / leftover tokens)
is in `state_dict()`, so a resumed run builds exactly the batches an uninterrupted one would.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch

from metaxlm.data.sampling import LanguageSampler


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, L) long
    langs: list[str]         # language (or pair) of each row
    kind: str = "mono"       # "mono" | "parallel"


def _lang_seed(seed: int, key: str) -> int:
    return seed * 1_000_003 + sum((i + 1) * ord(c) for i, c in enumerate(key))


class _ListColumn:
    """Random access to row i of a list<int> column straight from the Arrow buffers (memory-mapped, zero-copy):
    ~10x cheaper than `dataset[i][column]`, which formats a whole row through `datasets`."""

    def __init__(self, dataset, column: str):
        chunks = dataset.data.column(column).chunks
        self.offsets = [c.offsets.to_numpy() for c in chunks]  # absolute positions in each chunk's values
        self.values = [c.values.to_numpy(zero_copy_only=True) for c in chunks]
        self.starts = np.cumsum([0] + [len(c) for c in chunks[:-1]])

    @classmethod
    def of(cls, dataset, column: str) -> _ListColumn | None:
        """None when the dataset is not a plain Arrow table with a non-null integer-list column."""
        try:
            if getattr(dataset, "_indices", None) is not None:  # a select()/shuffle() view: rows are remapped
                return None
            col = dataset.data.column(column)
            if col.null_count or not all(pa.types.is_list(c.type) or pa.types.is_large_list(c.type)
                                         for c in col.chunks) or not pa.types.is_integer(col.type.value_type):
                return None
            return cls(dataset, column)
        except (AttributeError, KeyError, TypeError, ValueError, pa.ArrowException):
            return None

    def row(self, i: int) -> list[int]:
        k = int(np.searchsorted(self.starts, i, side="right")) - 1
        offsets, j = self.offsets[k], i - int(self.starts[k])
        return self.values[k][offsets[j]:offsets[j + 1]].tolist()


class TextStream:
    """Endless stream of token-id lists from one Arrow dataset, reshuffled every epoch (seeded).

    A parallel dataset (columns src_ids, tgt_ids) yields `src </s> tgt`: the translation pair as one
    text, which is what translation language modelling (TLM) masks."""

    def __init__(self, dataset, key: str, seed: int, column: str = "input_ids", joiner: int | None = None):
        self.ds, self.key, self.seed, self.column = dataset, key, seed, column
        self.epoch, self.pos, self.leftover = 0, 0, []
        self._order = None
        self.pair = "src_ids" in dataset.column_names
        self.joiner = joiner
        self._fast = None if self.pair else _ListColumn.of(dataset, column)
        self._fast_pair = (_ListColumn.of(dataset, "src_ids"), _ListColumn.of(dataset, "tgt_ids")) if self.pair else None

    def _perm(self) -> np.ndarray:
        if self._order is None or self._order[0] != self.epoch:
            rng = np.random.default_rng([_lang_seed(self.seed, self.key), self.epoch])
            self._order = (self.epoch, rng.permutation(len(self.ds)))
        return self._order[1]

    def next_text(self) -> list[int]:
        if self.pos >= len(self.ds):
            self.epoch, self.pos = self.epoch + 1, 0
        i = int(self._perm()[self.pos])
        self.pos += 1
        if self.pair:
            src, tgt = self._fast_pair
            if src is not None and tgt is not None:
                return src.row(i) + [self.joiner] + tgt.row(i)
            row = self.ds[i]
            return list(row["src_ids"]) + [self.joiner] + list(row["tgt_ids"])
        return self._fast.row(i) if self._fast is not None else list(self.ds[i][self.column])

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos, "leftover": list(self.leftover)}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.pos, self.leftover = state["epoch"], state["pos"], list(state["leftover"])


class PackedBatches:
    """Builds (B, seq_len) batches of packed sequences with α-sampled languages (or language pairs, for
    parallel data: kind="parallel", each text being `src </s> tgt`)."""

    def __init__(self, datasets: dict, *, seq_len: int, alpha: float, seed: int, bos_id: int, eos_id: int,
                 kind: str = "mono"):
        if seq_len < 8:
            raise ValueError("seq_len must be at least 8")
        sizes = {k: len(ds) for k, ds in datasets.items() if len(ds)}
        if not sizes:
            raise ValueError(f"no {kind} training data")
        # parallel streams get their own seeds, so adding parallel data never changes the mono batches
        stream_seed = seed if kind == "mono" else seed + 7_777_777
        self.streams = {k: TextStream(datasets[k], k, stream_seed, joiner=eos_id) for k in sizes}
        self.sampler = LanguageSampler(sizes, alpha, seed=stream_seed)
        self.seq_len, self.bos, self.eos, self.kind = seq_len, bos_id, eos_id, kind

    def _sequence(self, key: str) -> list[int]:
        s = self.streams[key]
        seq = [self.bos]
        while len(seq) < self.seq_len:
            if not s.leftover:
                ids = s.next_text()
                if not ids:
                    continue
                s.leftover = ids + [self.eos]
            take = self.seq_len - len(seq)
            seq.extend(s.leftover[:take])
            s.leftover = s.leftover[take:]
        return seq

    def next_batch(self, batch_size: int) -> Batch:
        langs = self.sampler.sample(batch_size)
        rows = [self._sequence(k) for k in langs]
        return Batch(torch.tensor(rows, dtype=torch.long), langs, self.kind)

    def state_dict(self) -> dict:
        return {"sampler": self.sampler.state_dict(), "streams": {k: s.state_dict() for k, s in self.streams.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.sampler.load_state_dict(state["sampler"])
        for k, s in self.streams.items():
            s.load_state_dict(state["streams"][k])


def load_prepared(prepared_dir: str | Path, kind: str = "mono", keys: list[str] | None = None) -> dict:
    import datasets

    root = Path(prepared_dir) / kind
    if not root.is_dir():
        return {}
    names = sorted(p.name for p in root.iterdir() if p.is_dir())
    return {k: datasets.load_from_disk(str(root / k)) for k in names if keys is None or k in keys}


def fixed_eval_batches(dataset, *, seq_len: int, max_sequences: int, bos_id: int, eos_id: int) -> torch.Tensor:
    """Held-out text packed in file order (no sampling): the same sequences at every evaluation."""
    rows, seq = [], [bos_id]
    for ids in dataset["input_ids"]:
        buf = list(ids) + [eos_id]
        while buf:
            take = seq_len - len(seq)
            seq.extend(buf[:take])
            buf = buf[take:]
            if len(seq) == seq_len:
                rows.append(seq)
                seq = [bos_id]
                if len(rows) == max_sequences:
                    return torch.tensor(rows, dtype=torch.long)
    return torch.tensor(rows, dtype=torch.long).reshape(-1, seq_len)
