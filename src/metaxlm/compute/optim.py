"""AdamW with BERT's parameter grouping, for every training loop (pretraining, fine-tuning)."""

from __future__ import annotations

from collections.abc import Iterable

import torch


def adamw(named_parameters: Iterable[tuple[str, torch.nn.Parameter]], *, lr: float, weight_decay: float,
          betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> torch.optim.AdamW:
    """AdamW over the trainable parameters; biases and normalization weights (every 1-D parameter) are not decayed,
    as in BERT. Frozen parameters are not optimized at all. The fused kernel updates each parameter in one pass
    instead of ~10 elementwise ops (the same update rule)."""
    decay, no_decay = [], []
    for _, p in named_parameters:
        if p.requires_grad:
            (no_decay if p.ndim < 2 else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in decay + no_decay)
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=fused or None)
