"""Objective registry: an objective turns a batch into a summed loss and the number of targets.

A new objective is one new file here: subclass `Objective`, decorate with `@register("name")`, and
import it below. The engine normalizes by the global number of targets, so micro-batches, gradient
accumulation and several processes all give the same gradient as one big batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

OBJECTIVES: dict[str, type[Objective]] = {}


def register(name: str):
    def deco(cls):
        if name in OBJECTIVES:
            raise ValueError(f"objective {name!r} registered twice")
        cls.name = name
        OBJECTIVES[name] = cls
        return cls

    return deco


@dataclass
class Prepared:
    """An objective's inputs and targets for a whole (global) batch; rows can be sliced per process."""

    tensors: dict[str, torch.Tensor]
    num_targets: int
    langs: list[str] = field(default_factory=list)
    targets: str = "labels"  # the tensor that says which entries carry loss (-100 = none, or a bool row mask)

    def rows(self, idx: slice | torch.Tensor) -> Prepared:
        langs = [self.langs[i] for i in range(len(self.langs))[idx]] if isinstance(idx, slice) else \
            [self.langs[i] for i in idx.tolist()]
        sub = {k: v[idx] for k, v in self.tensors.items()}
        t = sub[self.targets]
        count = int(t.sum()) if t.dtype == torch.bool else int((t != -100).sum())
        return Prepared(sub, count, langs, self.targets)


class Objective:
    name = "base"
    batch_kind = "mono"  # which data the engine feeds it: "mono" or "parallel"

    def __init__(self, tokenizer, **options):
        self.tokenizer = tokenizer

    def prepare(self, batch, generator: torch.Generator) -> Prepared:
        raise NotImplementedError

    def loss_sum(self, model, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """Sum (not mean) of the per-target losses, in fp32, for one row slice of a prepared batch."""
        raise NotImplementedError


def build_objective(name: str, tokenizer, **options) -> Objective:
    if name not in OBJECTIVES:
        raise KeyError(f"unknown objective {name!r} (registered: {', '.join(sorted(OBJECTIVES))})")
    return OBJECTIVES[name](tokenizer, **options)


from metaxlm.pretrain.objectives import distill, mlm, tlm  # noqa: E402,F401  (registers)
