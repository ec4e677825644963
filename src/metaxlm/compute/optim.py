"""AdamW with BERT's parameter grouping, for every training loop (pretraining, fine-tuning), and the linear
warm-up/decay schedule pretraining uses (with its held groups for a new-head warm-up); fine-tuning schedules with
transformers' `get_linear_schedule_with_warmup`, the same shape."""

from __future__ import annotations

from collections.abc import Collection, Iterable

import torch


def adamw(named_parameters: Iterable[tuple[str, torch.nn.Parameter]], *, lr: float, weight_decay: float,
          betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
          lr_scales: dict[str, float] | None = None, held: Collection[str] = ()) -> torch.optim.AdamW:
    """AdamW over the trainable parameters; biases and normalization weights (every 1-D parameter) are not decayed,
    as in BERT. Frozen parameters are not optimized at all. The fused kernel updates each parameter in one pass
    instead of ~10 elementwise ops (the same update rule).

    `lr_scales` maps a parameter-name prefix to a multiplier of `lr` (a new head learning faster than the pretrained
    body it sits on); the schedule scales every group alike.

    `held`: names of parameters that join training late (the pretrained body during a new-head warm-up): they get
    param groups of their own, first and marked `"held": True`, so that `linear_schedule` can start them later.
    Without them the groups are exactly those of a run without warm-up (old checkpoints' optimizer states fit)."""
    scales = lr_scales or {}
    groups: dict[tuple[bool, float, bool], list[torch.nn.Parameter]] = {(False, 1.0, False): [],
                                                                        (False, 1.0, True): []}
    for name, p in named_parameters:
        if p.requires_grad:
            scale = next((s for prefix, s in scales.items() if name.startswith(prefix)), 1.0)
            groups.setdefault((name in held, scale, p.ndim < 2), []).append(p)
    order = sorted(groups.items(), key=lambda kv: (not kv[0][0], kv[0][1] != 1.0, kv[0][1:]))
    param_groups = [{"params": params, "lr": lr * scale, "weight_decay": 0.0 if no_decay else weight_decay,
                     **({"held": True} if is_held else {})}
                    for (is_held, scale, no_decay), params in order]
    everything = [p for params in groups.values() for p in params]
    fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in everything)
    return torch.optim.AdamW(param_groups, lr=lr, betas=betas, eps=eps, fused=fused or None)


def linear_schedule(optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int, *,
                    held_steps: int = 0) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up from 0 over `warmup_steps`, then linear decay to 0 at `total_steps`: transformers'
    `get_linear_schedule_with_warmup`, the same numbers, for every group but the held ones (`adamw(held=...)`). A
    held group stays at 0 for `held_steps`, then gets a warm-up of its own (`warmup_steps` long) and decays over
    what is left: a pretrained body joining a run after a new-head warm-up does not jump to full lr."""

    def factor(start: int):
        def at(step: int) -> float:  # step: optimizer steps taken so far (LambdaLR's last_epoch)
            if step < start:
                return 0.0
            if step - start < warmup_steps:
                return float(step - start) / float(max(1, warmup_steps))
            return max(0.0, float(total_steps - step) / float(max(1, total_steps - start - warmup_steps)))
        return at

    starts = [held_steps if group.get("held") else 0 for group in optimizer.param_groups]
    return torch.optim.lr_scheduler.LambdaLR(optimizer, [factor(s) for s in starts])
