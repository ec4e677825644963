"""Sentence representations from token states."""

from __future__ import annotations

import torch


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of the hidden states over the positions where `mask` is 1 (B, L, H) → (B, H)."""
    mask = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
