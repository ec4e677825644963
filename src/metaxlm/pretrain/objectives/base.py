"""What an objective is: its options, what it may own, and the hooks the engine calls.

Per optimizer step the engine calls, for every objective:
  prepare(batch, generator)   on the whole GLOBAL batch of its `batch_kind`, identically on every process: cheap,
                              seeded work (masking) whose random draws must not depend on the process count;
                              an objective that reads another's inputs (`shares_inputs_with`) gets
                              prepare_shared(batch, generator, provided) after that one instead;
  label(model, part)          on this process's rows only, no gradient: work that needs the current weights
                              (self-labelled alignments) or is per row (a teacher's tokenization); the number of
                              targets may only be known after it — the engine all-reduces the counts before the
                              forward, so the gradient is still that of one big batch;
  loss_sum(model, tensors)    inside the one forward of the wrapped module per micro-batch: the SUM of the
                              per-target losses (the engine divides by the global target count); objectives
                              encoding the same inputs share one encoder pass (`encoding.encode`);
  after_step(model)           after the optimizer step (an EMA update, enqueueing keys);
  evaluate(model, autocast)   at every evaluation: the objective's own held-out numbers.

An objective is a torch Module: trainable submodules (a pointer head, a projection head) are optimized and
synchronized by DDP with the model; frozen submodules (a teacher, an EMA copy) and buffers (a queue) live here too.
Everything in its `state_dict()` is checkpointed (safetensors) and restored on --resume, except the submodules named
in `constant_modules`, which are rebuilt from the config (a frozen teacher loaded from disk). Its trainable modules
are new to the start model (`build_objectives` marks them: `metaxlm.models.new_parameters`, warmed up first with
`train.head_warmup_steps`) unless an option loaded them from a given state: such an objective lists them in
`loaded_parameters`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from pydantic import Field

from metaxlm.config import MASK_PROB, Strict
from metaxlm.data.padding import IGNORE


class ObjectiveOptions(Strict):
    """Options every objective has; an objective with its own options subclasses this as its `Options`."""

    weight: float = Field(1.0, ge=0.0)  # the loss is Σ weight · (summed loss / global target count)
    # multiplier of train.lr for the objective's OWN trainable modules (a new pointer or projection head), not the
    # model: a head starting from random weights on a pretrained body learns at the body's small lr only slowly
    lr_scale: float = Field(1.0, gt=0.0)


@dataclass
class ObjectiveContext:
    """What objectives may need from the run besides their options."""

    tokenizer: Any
    model_config: Any = None          # the HF config of the model being trained (hidden size for a head, ...)
    model: Any = None                 # the model itself, with its starting weights (a momentum encoder copies it)
    mask_prob: float = MASK_PROB      # train.mask_prob: the default of objectives that mask
    pivot: str = "en"                 # data.pivot
    seed: int = 0
    # "meta" (the run's meta-pretrained model), a variant name or an HF model directory → a model directory
    resolve_model: Callable[[str], Path] = field(default=lambda ref: Path(ref))


@dataclass
class Prepared:
    """An objective's inputs and targets for some rows; `rows()` slices them per process / micro-batch."""

    tensors: dict[str, torch.Tensor]
    num_targets: int
    langs: list[str] = field(default_factory=list)
    # the tensor whose entries say which positions carry loss (-100 = none) or which rows do (a bool row mask)
    target_key: str = "labels"

    def rows(self, idx: slice | torch.Tensor) -> Prepared:
        index = range(len(self.langs))[idx] if isinstance(idx, slice) else idx.tolist()
        sub = {k: v[idx] for k, v in self.tensors.items()}
        return Prepared(sub, count_targets(sub[self.target_key]), [self.langs[i] for i in index], self.target_key)


def exported_state(path: str | Path, objective: str, key: str) -> tuple[Path, dict[str, torch.Tensor]]:
    """An objective's saved state (its names without the `objective.` prefix) from a run's `final/` directory or
    its objectives.safetensors; `key` (e.g. `train.objectives.dwa.head`) names the option in the error."""
    from safetensors.torch import load_file

    from metaxlm.errors import ConfigError

    path = Path(path)
    file = path / "objectives.safetensors" if path.is_dir() else path
    if not file.is_file():
        raise ConfigError(f"{key}: {file} does not exist (give a final/ directory of a run with {objective}, or its "
                          f"objectives.safetensors)")
    prefix = f"{objective}."
    return file, {k.removeprefix(prefix): v for k, v in load_file(str(file)).items() if k.startswith(prefix)}


def count_targets(targets: torch.Tensor) -> int:
    return int(targets.sum()) if targets.dtype == torch.bool else int((targets != IGNORE).sum())


class Objective(torch.nn.Module):
    name = "base"
    batch_kind = "mono"  # which batch source feeds it (metaxlm.pretrain.batches: mono, pair, pair_sides, segments)
    Options: type[ObjectiveOptions] = ObjectiveOptions
    constant_modules: tuple[str, ...] = ()  # submodules rebuilt from the config, not checkpointed
    # whether the loss goes through the model's MLM head: a run whose objectives all leave it out has trainable
    # parameters without gradients, which DDP must be told about (pretrain/engine.py)
    uses_mlm_head = False

    def __init__(self, options: ObjectiveOptions, context: ObjectiveContext):
        super().__init__()
        self.options, self.context, self.tokenizer = options, context, context.tokenizer
        # names of the parameters an option loaded from a given state (`dwa: {head: ...}`): not new (see below)
        self.loaded_parameters: set[str] = set()

    @property
    def weight(self) -> float:
        return self.options.weight

    def prepare(self, batch, generator: torch.Generator) -> Prepared:
        raise NotImplementedError

    def shares_inputs_with(self, names: list[str]) -> str | None:
        """The name of another objective of the run (same batch kind) whose prepared inputs this one reads, or
        None: then `prepare_shared` replaces `prepare`, and both objectives' losses come from one encoder pass."""
        return None

    def prepare_shared(self, batch, generator: torch.Generator, provided: Prepared) -> Prepared:
        raise NotImplementedError

    def label(self, model, part: Prepared) -> Prepared:
        return part

    def loss_sum(self, model, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """Sum (not mean) of the per-target losses, in fp32, for one row slice of a prepared batch."""
        raise NotImplementedError

    def after_step(self, model) -> None:
        pass

    def evaluate(self, model, autocast) -> dict[str, float]:
        return {}

    def checkpoint_state(self) -> dict[str, torch.Tensor]:
        skip = tuple(f"{m}." for m in self.constant_modules)
        return {k: v for k, v in self.state_dict().items() if not k.startswith(skip)}

    def load_checkpoint_state(self, state: dict[str, torch.Tensor], source: str) -> None:
        expected = set(self.checkpoint_state())
        if set(state) != expected:
            raise RuntimeError(f"{source}: objective {self.name!r} state does not fit (missing "
                               f"{sorted(expected - set(state))}, unexpected {sorted(set(state) - expected)})")
        self.load_state_dict(state, strict=False)
