"""Checkpoints of a long fine-tuning run: after an interruption it continues from its last checkpoint exactly — the
same weights, losses and curve as a run that was never interrupted.

A translation model's 2,000 fine-tuning steps take hours on a 2-core CPU, longer than a session may last. A run that
has a place for them (the evaluate stage, `metaxlm finetune --out`: `<scenario>-runs/<label>-seed<seed>.ckpt/` beside
its finished-run records) writes a checkpoint after each FINETUNE_CHECKPOINT_SECONDS of training, so a run of a few
minutes writes none. The format is the pretraining's (metaxlm.models.checkpoint: written atomically, every file
verified by its sha256 on resume): the weights (whole, also while only the used embedding rows train), the optimizer
and schedule, and in trainer_state.json the step, the current epoch's batches and the position in them, the state of
every random generator (python's, numpy's, torch's — dropout masks are drawn from it — and the batch order's), the
losses so far, the precision training and testing run in (kept on resume, also on a CPU whose `auto` would choose
another), and the caller's own state (the curve's points). The resume key of the run (what it is computed
from: task settings, model weights, scenario — metaxlm.finetune.resume_key, the key of its finished-run record too)
is stored too: a checkpoint of other settings is discarded with a line saying so, never resumed. Once the run is
finished and recorded its checkpoints are removed.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from metaxlm.compute.sharding import optimizer_state
from metaxlm.config import FINETUNE_CHECKPOINT_SECONDS
from metaxlm.models.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    load_optimizer_states,
    save_checkpoint,
    verify_checkpoint,
)


@dataclass
class Checkpoints:
    """Where a fine-tuning run keeps its checkpoints, and what else they hold.

    `extra`: the caller's JSON-able state, saved with each checkpoint and, on resume, replaced by the saved one
    (read it from here after training). `seconds_before` (restored on resume): the training seconds the run had spent
    up to its last checkpoint, so a resumed run reports the time of the pieces that count; `resumed_at`: the step each
    resume continued from; `precision` (restored with the weights): the precision of each part of the run ("train",
    "test": metaxlm.finetune.inference.kept_precision), which a resumed run keeps whatever this CPU's `auto` says."""

    directory: Path
    key: str  # the run's resume key (metaxlm.finetune.resume_key.run_fingerprint)
    every_seconds: float | None = None  # None: FINETUNE_CHECKPOINT_SECONDS (read at use, so a test may change it)
    extra: dict = field(default_factory=dict)
    seconds_before: float = 0.0
    resumed_at: list[int] = field(default_factory=list)
    precision: dict[str, str] = field(default_factory=dict)

    def interval(self) -> float:
        return FINETUNE_CHECKPOINT_SECONDS if self.every_seconds is None else self.every_seconds

    def latest(self) -> Path | None:
        """The newest complete checkpoint of this run's key; one of another key is removed (it cannot be resumed)."""
        path = latest_checkpoint(self.directory)
        if path is None:
            return None
        try:
            key = json.loads((path / "trainer_state.json").read_text(encoding="utf-8")).get("key")
        except (OSError, ValueError):
            verify_checkpoint(path)  # names the damaged file
            raise
        if key != self.key:
            print(f"fine-tuning: {self.directory} holds a checkpoint of other settings or weights; starting again",
                  file=sys.stderr, flush=True)
            self.remove()
            return None
        return path

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def random_states(batch_order: random.Random) -> dict:
    """Every generator a fine-tuning step draws from, as JSON."""
    np_name, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    states = {"batch_order": _python_state(batch_order.getstate()), "python": _python_state(random.getstate()),
              "numpy": [np_name, np_keys.tolist(), int(np_pos), int(np_has_gauss), float(np_gauss)],
              "torch": torch.get_rng_state().tolist()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return states


def restore_random_states(states: dict, batch_order: random.Random) -> None:
    batch_order.setstate(_python_tuple(states["batch_order"]))
    random.setstate(_python_tuple(states["python"]))
    name, keys, pos, has_gauss, gauss = states["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(torch.tensor(states["torch"], dtype=torch.uint8))
    if "cuda" in states:
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in states["cuda"]])


def _python_state(state: tuple) -> list:
    version, mt, gauss = state
    return [version, list(mt), gauss]


def _python_tuple(state: list) -> tuple:
    version, mt, gauss = state
    return version, tuple(mt), gauss


def save(checkpoints: Checkpoints, *, step: int, model, optimizer, scheduler, used, batches: list[list[int]],
         position: int, batch_order: random.Random, history: list[float] | None, started: float) -> None:
    """A checkpoint after `step`: the whole model (the used rows written back), and everything the loop resumes."""
    state = optimizer_state(model, optimizer)  # keyed by the names the optimizer trains (the compact embedding's)
    trainer_state = {"key": checkpoints.key, "batches": batches, "position": position,
                     "random": random_states(batch_order), "history": history, "extra": checkpoints.extra,
                     "seconds": checkpoints.seconds_before + time.perf_counter() - started,
                     "resumed_at": checkpoints.resumed_at, "precision": checkpoints.precision}
    with used.full():
        save_checkpoint(checkpoints.directory, step, model=model, optimizer_state=state, scheduler=scheduler,
                        state=trainer_state, keep=1)


def load_weights(checkpoints: Checkpoints, model) -> tuple[Path, dict] | None:
    """The run's latest checkpoint (its path and trainer state) with its weights restored into `model` — before the
    optimizer exists, and before the used embedding rows are taken from the whole matrix —; None: start afresh."""
    path = checkpoints.latest()
    if path is None:
        return None
    trainer_state = load_checkpoint(path, model=model)
    checkpoints.precision.clear()  # checkpoints written before precisions were kept have none: decided anew
    checkpoints.precision.update(trainer_state.get("precision") or {})
    return path, trainer_state


def resume(path: Path, trainer_state: dict, checkpoints: Checkpoints, *, model, optimizer, scheduler,
           batch_order: random.Random, history: list[float] | None) -> tuple[int, list[list[int]], int]:
    """Restore the optimizer, schedule, generators, losses and the caller's state; return (step, batches, position)."""
    load_optimizer_states(path, module=model, optimizer=optimizer, scheduler=scheduler)
    restore_random_states(trainer_state["random"], batch_order)
    if history is not None:
        history[:] = trainer_state["history"] or []
    checkpoints.extra.clear()
    checkpoints.extra.update(trainer_state["extra"])
    checkpoints.seconds_before = trainer_state["seconds"]
    step = trainer_state["step"]
    checkpoints.resumed_at = [*trainer_state["resumed_at"], step]
    print(f"resuming fine-tuning from step {step} (checkpoint {path})", file=sys.stderr, flush=True)
    return step, trainer_state["batches"], trainer_state["position"]
