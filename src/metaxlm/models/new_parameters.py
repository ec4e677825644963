"""Which parameters of a module are new: drawn fresh rather than loaded from the checkpoint it was made of (a task
head, a start model's missing MLM head, VECO's cross-attention, an objective's pointer head). Whoever makes the
module marks them here; the trainers read them here — pretraining's new-head warm-up
(`train.head_warmup_steps`) trains them alone first, fine-tuning gives them `hyperparameters.head_lr_scale`.

The mark lives on the module itself (not saved: a module reloaded from its own checkpoint has nothing new). An
unmarked module was not made from a checkpoint that could tell (built from scratch: every parameter is new)."""

from __future__ import annotations

from collections.abc import Iterable

# the attribute holding the mark, a frozenset of names as in the module's `named_parameters()`
MARK = "metaxlm_new_parameters"


def mark_new(module, names: Iterable[str]) -> None:
    """Add `names` to the parameters `module` starts without; `mark_new(module, ())` says it lacked nothing."""
    setattr(module, MARK, (new_parameter_names(module) or frozenset()) | frozenset(names))


def new_parameter_names(module) -> frozenset[str] | None:
    """The names of the parameters marked new in `module`; None: unmarked (not made from a checkpoint)."""
    return getattr(module, MARK, None)
