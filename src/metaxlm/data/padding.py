"""Rows of token ids → padded model inputs: one padding routine for the batch sources and the feature probes."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def pad_right(rows: Sequence[Sequence[int]], pad_id: int, width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask) of rows padded at the end to `width` (default: the longest row); mask 1 = real
    token."""
    width = max(len(row) for row in rows) if width is None else width
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, row in enumerate(rows):
        input_ids[k, :len(row)] = torch.tensor(row, dtype=torch.long)
        attention_mask[k, :len(row)] = 1
    return input_ids, attention_mask
