"""Objectives by name (`train.objectives`): one file each in this folder, a subclass of `Objective` decorated with
`@OBJECTIVES.register("name")`; every module here is imported on first look-up (fairseq's convention).

Config: `train.objectives: {mlm: 1.0, tlm: {weight: 0.5, mask_prob: 0.2}}` — a number is the weight, a mapping
gives the weight and the objective's own options (its `Options` model: unknown or mistyped keys are errors naming
the key, e.g. `train.objectives.tlm.mask_prob`).
"""

from __future__ import annotations

from metaxlm.config import objective_options
from metaxlm.errors import ConfigError
from metaxlm.models.new_parameters import mark_new
from metaxlm.pretrain.objectives.base import (
    Objective,
    ObjectiveContext,
    ObjectiveOptions,
    Prepared,
    count_targets,
)
from metaxlm.registry import OBJECTIVES
from metaxlm.seeds import derive_seed

OBJECTIVES.require(Objective)
register = OBJECTIVES.register


def parse_objectives(spec: dict, where: str = "train.objectives") -> dict[str, ObjectiveOptions]:
    """Validate every objective's options (the short form `name: weight` is `name: {weight: weight}`)."""
    if not spec:
        raise ConfigError(f"{where}: at least one objective is needed (registered: {', '.join(OBJECTIVES.names())})")
    return {name: objective_options(name, options, where) for name, options in spec.items()}


def build_objectives(spec: dict, context: ObjectiveContext, where: str = "train.objectives") -> dict[str, Objective]:
    """Each objective is built under its own seed (from the run's seed and its name), so the initial weights of its
    heads and buffers are a function of the config, and the caller's RNG stream is left untouched. Its trainable
    parameters are marked new (`metaxlm.models.new_parameters`) but for those an option loaded from a given state
    (`loaded_parameters`)."""

    import torch

    objectives = {}
    for name, options in parse_objectives(spec, where).items():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(context.seed, name))
            objective = OBJECTIVES.get(name)(options, context)
        mark_new(objective, {n for n, p in objective.named_parameters()
                             if p.requires_grad and n not in objective.loaded_parameters})
        objectives[name] = objective
    return objectives


__all__ = ["OBJECTIVES", "Objective", "ObjectiveContext", "ObjectiveOptions", "Prepared", "build_objectives",
           "count_targets", "parse_objectives", "register"]
