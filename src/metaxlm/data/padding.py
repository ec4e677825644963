"""Rows of token ids → padded model inputs: one padding routine for the batch sources and the feature probes."""

from __future__ import annotations

from collections.abc import Sequence

import torch

IGNORE = -100  # the label of a position no loss counts (torch's cross_entropy ignore_index): padding, unmasked tokens


def pad_right(rows: Sequence[Sequence[int]], pad_id: int,
              width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask) of rows padded at the end to `width` (default: the longest row); mask 1 = real
    token."""
    width = max(len(row) for row in rows) if width is None else width
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, row in enumerate(rows):
        input_ids[k, :len(row)] = torch.tensor(row, dtype=torch.long)
        attention_mask[k, :len(row)] = 1
    return input_ids, attention_mask


def length_sorted_batches(lengths: Sequence[int], batch_size: int, max_tokens: int | None = None) -> list[list[int]]:
    """Indices grouped into batches of similar length (shortest first), to keep padding small: at most `batch_size`
    items, and with `max_tokens` at most that many padded tokens (items x the batch's longest; an item longer than
    that is a batch alone)."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    batch: list[int] = []
    for i in order:  # shortest first: the item joining a batch is its longest
        if batch and (len(batch) >= batch_size
                      or (max_tokens is not None and (len(batch) + 1) * lengths[i] > max_tokens)):
            batches.append(batch)
            batch = []
        batch.append(i)
    if batch:
        batches.append(batch)
    return batches
