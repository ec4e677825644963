"""Sentence vectors from token states: one mean pooling for the feature probes and the distillation objective."""

from __future__ import annotations

import torch

__all__ = ["cls_pool", "mean_pool"]


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(batch, hidden) mean of (batch, seq, hidden) states over the positions where `mask` (batch, seq) is
    nonzero: padding left out, special tokens in if the mask marks them. A row with no position gives zeros."""
    weights = mask.to(hidden.device, hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)


def cls_pool(hidden: torch.Tensor) -> torch.Tensor:
    """(batch, hidden) state of the first token (BERT's [CLS], XLM-R's <s>)."""
    return hidden[:, 0]
