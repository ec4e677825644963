"""What every batch source gives the engine (`Batch`), what it implements (`BatchSource`), and the registry of kinds.

A source kind is one file in this package: subclass `BatchSource`, decorate with `@BATCH_SOURCES.register("kind")`,
set `data` ("mono" or "parallel": which prepared data it reads); an objective names the kind it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from metaxlm.data.padding import pad_right
from metaxlm.data.sampling import LanguageSampler
from metaxlm.errors import ConfigError
from metaxlm.registry import Registry

# Parallel sources draw from seed + this offset, so adding parallel data (or a parallel objective) never changes
# the monolingual batches; the offset is the one the packed parallel stream used before issue 8.
PARALLEL_SEED_OFFSET = 7_777_777


@dataclass
class Batch:
    """One global batch: rows first in every tensor, `langs[i]` = the language (or "src-tgt" pair) of row i."""

    kind: str                          # the source kind that built it
    langs: list[str]
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self):
        self.langs = list(self.langs)
        bad = {k: tuple(v.shape) for k, v in self.tensors.items() if v.ndim == 0 or len(v) != len(self.langs)}
        if bad:
            raise ValueError(f"batch of {len(self.langs)} rows has tensors of other row counts: {bad}")

    @property
    def input_ids(self) -> torch.Tensor:
        return self.tensors["input_ids"]

    def __len__(self) -> int:
        return len(self.langs)

    @property
    def num_tokens(self) -> int:
        """Real (non-padding) tokens: what tokens/s should count."""
        masks = [v for k, v in self.tensors.items() if k.endswith("mask")]  # attention_mask, src_mask, tgt_mask
        if masks:
            return int(sum(int(m.sum()) for m in masks))
        return self.input_ids.numel()

    def rows(self, idx: slice | torch.Tensor | list[int]) -> Batch:
        """The rows `idx` (a slice or row indices) of every tensor, e.g. one process's share of a global batch."""
        if isinstance(idx, slice):
            langs = self.langs[idx]
        else:
            idx = torch.as_tensor(idx, dtype=torch.long)
            langs = [self.langs[i] for i in idx.tolist()]
        return Batch(self.kind, langs, {k: v[idx] for k, v in self.tensors.items()})


class BatchSource:
    """Builds α-sampled, seeded, exactly resumable batches of one kind from prepared datasets (key → Dataset).

    Languages (or pairs) are drawn per row with p_i ∝ N_i^α (`LanguageSampler`); `state_dict()` holds everything
    that decides the next batch, so a source restored from it continues with the batches an uninterrupted one
    would build. `stats` counts what the source had to change or drop (truncations, skipped rows) for the log."""

    name = "base"       # the registered kind; set by BATCH_SOURCES.register
    data = "mono"       # which prepared data it reads: "mono" or "parallel"
    seed_offset = 0     # added to the run's seed for this source's streams and sampler

    def __init__(self, datasets: dict, *, seq_len: int, alpha: float, seed: int, tokenizer):
        if seq_len < 8:
            raise ConfigError(f"train.seq_len must be at least 8, got {seq_len}")
        self.seq_len = seq_len
        self.bos, self.eos, self.pad = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
        if self.bos is None or self.eos is None:
            raise ConfigError(f"batch kind {self.kind!r}: the tokenizer has no cls/sep tokens to frame a sequence")
        self.datasets = {k: ds for k, ds in datasets.items() if len(ds)}
        if not self.datasets:
            raise ConfigError(f"batch kind {self.kind!r} needs {self.data} training data; the prepared data has none")
        self.stream_seed = seed + self.seed_offset

    @property
    def kind(self) -> str:
        return self.name

    def make_sampler(self, sizes: dict[str, int], alpha: float) -> LanguageSampler:
        return LanguageSampler(sizes, alpha, seed=self.stream_seed)

    def need_padding(self) -> None:
        if self.pad is None:
            raise ConfigError(f"batch kind {self.kind!r} pads rows, but the tokenizer has no pad token")

    def next_batch(self, batch_size: int) -> Batch:
        raise NotImplementedError

    @property
    def stats(self) -> dict[str, int]:
        return {}

    def state_dict(self) -> dict:
        raise NotImplementedError

    def load_state_dict(self, state: dict) -> None:
        raise NotImplementedError


BATCH_SOURCES: Registry[type[BatchSource]] = Registry("batch kind", package="metaxlm.pretrain.batches")


def padded_length(longest: int, seq_len: int) -> int:
    """Rows are padded to the batch's longest row rounded up to a multiple of 8 (friendlier matmul shapes),
    never beyond seq_len."""
    return min(seq_len, -(-longest // 8) * 8)


def pad_rows(rows: list[list[int]], pad_id: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention_mask) of rows padded at the end to `padded_length`; mask 1 = real token."""
    return pad_right(rows, pad_id, padded_length(max(len(r) for r in rows), seq_len))


def fit_pair(src_len: int, tgt_len: int, budget: int) -> tuple[int, int]:
    """How many tokens of each non-empty side fit in `budget` tokens: all when they fit, else each side cut in
    proportion to its length, keeping at least one token per side (budget >= 2)."""
    if src_len + tgt_len <= budget:
        return src_len, tgt_len
    keep_src = min(src_len, max(1, budget * src_len // (src_len + tgt_len)))
    keep_tgt = min(tgt_len, budget - keep_src)
    return min(src_len, budget - keep_tgt), keep_tgt
