"""AdamW with BERT's parameter grouping, for every training loop (pretraining, fine-tuning)."""

from __future__ import annotations

from collections.abc import Iterable

import torch


def adamw(named_parameters: Iterable[tuple[str, torch.nn.Parameter]], *, lr: float, weight_decay: float,
          betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
          lr_scales: dict[str, float] | None = None) -> torch.optim.AdamW:
    """AdamW over the trainable parameters; biases and normalization weights (every 1-D parameter) are not decayed,
    as in BERT. Frozen parameters are not optimized at all. The fused kernel updates each parameter in one pass
    instead of ~10 elementwise ops (the same update rule).

    `lr_scales` maps a parameter-name prefix to a multiplier of `lr` (a new head learning faster than the pretrained
    body it sits on); the schedule scales every group alike."""
    scales = lr_scales or {}
    groups: dict[tuple[float, bool], list[torch.nn.Parameter]] = {(1.0, False): [], (1.0, True): []}
    for name, p in named_parameters:
        if p.requires_grad:
            scale = next((s for prefix, s in scales.items() if name.startswith(prefix)), 1.0)
            groups.setdefault((scale, p.ndim < 2), []).append(p)
    param_groups = [{"params": params, "lr": lr * scale, "weight_decay": 0.0 if no_decay else weight_decay}
                    for (scale, no_decay), params in sorted(groups.items(), key=lambda kv: (kv[0][0] != 1.0, kv[0]))]
    everything = [p for params in groups.values() for p in params]
    fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in everything)
    return torch.optim.AdamW(param_groups, lr=lr, betas=betas, eps=eps, fused=fused or None)
