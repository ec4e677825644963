"""Atomic, verified training checkpoints: everything a run needs to continue exactly (pretraining's, and a long
fine-tuning run's: metaxlm.finetune.checkpoint).

    ckpt/step_00000200/
      model.safetensors, config.json   the model (HF format: loads with AutoModelForMaskedLM.from_pretrained)
      objectives.safetensors           the objectives' own modules and buffers (heads, EMA copies, queues)
      optimizer.pt, scheduler.pt       loaded with torch.load(weights_only=True); the optimizer's state keyed by
                                       parameter name, whole even when training sharded it (compute/sharding.py)
      trainer_state.json               step, data positions, tokens
      checksums.json                   sha256 of every file above, written last
    ckpt/latest                        the name of the newest complete checkpoint

A checkpoint is written into a hidden temporary directory, made durable and renamed into place, then `latest` is
replaced atomically: a crash at any moment leaves the previous checkpoint intact and `latest` pointing at a complete
one. On resume every file is checked against its sha256: a truncated or corrupted checkpoint is an error naming the
file, which offers the newest earlier checkpoint that verifies.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from pathlib import Path

import torch

from metaxlm.compute.devices import to_device
from metaxlm.compute.sharding import load_optimizer_state
from metaxlm.errors import MetaXLMError
from metaxlm.io import (
    LATEST_POINTER,
    atomic_write_json,
    atomic_write_text,
    disk_full_guard,
    latest_checkpoint,  # noqa: F401  (also imported from here: engine, pipeline, tests)
)
from metaxlm.models.loading import quiet_transformers

CHECKSUMS = "checksums.json"
OBJECTIVES_FILE = "objectives.safetensors"


class CorruptCheckpoint(MetaXLMError):
    """A checkpoint file is missing, truncated or does not match its recorded sha256."""


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def save_checkpoint(ckpt_root: Path, step: int, *, model, optimizer_state: dict, scheduler, state: dict, keep: int,
                    objectives_state: dict[str, torch.Tensor] | None = None, weights: dict | None = None) -> Path:
    """`weights`: the gathered whole weights when the model is sharded; else the model's own. `optimizer_state`:
    `compute.sharding.optimizer_state` of the run.

    A full disk at any point is a DiskFull naming the checkpoint and the file that failed; the partial checkpoint is
    removed (so the freed space is real) and the previous one, still named by `latest`, is untouched."""
    from safetensors.torch import save_file

    final = ckpt_root / f"step_{step:08d}"
    tmp = ckpt_root / f".tmp-step_{step:08d}"
    previous = latest_checkpoint(ckpt_root)
    recovery = ({"kept": f"The last good checkpoint {previous} is intact.", "rerun": "then rerun with --resume"}
                if previous else {"kept": "No earlier checkpoint was written.",
                                  "rerun": "then run the same command again (without --resume)"})

    def writing(part: str):
        return disk_full_guard(final, what="checkpoint", part=part, **recovery)

    with disk_full_guard(final, what="checkpoint", cleanup=lambda: shutil.rmtree(tmp, ignore_errors=True),
                         **recovery):
        ckpt_root.mkdir(parents=True, exist_ok=True)
        for stale in ckpt_root.glob(".tmp-step_*"):  # left by an interrupted save: never read, and it holds space
            shutil.rmtree(stale, ignore_errors=True)
        tmp.mkdir()
        # quiet: transformers draws a progress bar per save, two stderr lines per checkpoint in the run's log
        with writing("model.safetensors"), quiet_transformers():
            model.save_pretrained(str(tmp), state_dict=weights)  # safetensors
        if objectives_state:
            with writing(OBJECTIVES_FILE):
                save_file({k: v.detach().cpu().contiguous() for k, v in objectives_state.items()},
                          str(tmp / OBJECTIVES_FILE))
        with writing("optimizer.pt"):
            _torch_save(optimizer_state, tmp / "optimizer.pt")
        with writing("scheduler.pt"):
            _torch_save(scheduler.state_dict(), tmp / "scheduler.pt")
        atomic_write_json(tmp / "trainer_state.json", {"step": step, **state})
        atomic_write_json(tmp / CHECKSUMS, {f.name: sha256_file(f) for f in sorted(tmp.iterdir())})
        for f in tmp.iterdir():  # make the files durable before the rename publishes them
            with writing(f.name), open(f, "rb") as fh:
                os.fsync(fh.fileno())
        if final.exists():  # the same step written before (a rerun from an earlier checkpoint): swap, then delete
            old = ckpt_root / f".old-step_{step:08d}"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)

    def unpublish() -> None:  # a checkpoint `latest` does not name is never resumed from: give its space back
        pointer = ckpt_root / LATEST_POINTER
        if not (pointer.exists() and pointer.read_text().strip() == final.name):
            shutil.rmtree(final, ignore_errors=True)

    with disk_full_guard(ckpt_root / LATEST_POINTER, what="the checkpoint pointer", part=f"to {final.name}",
                         cleanup=unpublish, **recovery):
        atomic_write_text(ckpt_root / LATEST_POINTER, final.name + "\n")
    for old in sorted(ckpt_root.glob("step_*"))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _torch_save(obj, file: Path) -> None:
    # torch.save(obj, path) fails on a full disk with a RuntimeError ("unexpected pos") that has lost the errno;
    # through a Python file object, the OSError(ENOSPC) of the failed write stays in the exception chain
    # written from the host: a checkpoint of a GPU run loads on a machine without one (and resumes on any device)
    with open(file, "wb") as f:
        torch.save(to_device(obj, "cpu"), f)


def corruption(path: Path) -> str | None:
    """None when every file of the checkpoint matches its recorded sha256; else what is wrong, naming the file."""
    sums_path = path / CHECKSUMS
    try:
        sums = json.loads(sums_path.read_text())
    except (OSError, ValueError) as err:
        return f"{sums_path}: unreadable ({err})"
    for name, expected in sums.items():
        f = path / name
        if not f.is_file():
            return f"{f}: missing"
        if sha256_file(f) != expected:
            return f"{f}: sha256 does not match the one recorded when it was written (truncated or corrupted)"
    return None


def verify_checkpoint(path: Path) -> None:
    problem = corruption(path)
    if problem is None:
        return
    earlier = [p for p in sorted(path.parent.glob("step_*"), reverse=True) if p.name < path.name and not corruption(p)]
    offer = (f" The previous good checkpoint is {earlier[0]}: continue from it with --resume-from {earlier[0]}."
             if earlier else " No earlier checkpoint verifies; start the run again without --resume.")
    raise CorruptCheckpoint(f"cannot resume from {path}: {problem}.{offer}")


def load_training_state(file: Path) -> dict:
    """An optimizer or scheduler state: tensors, numbers and strings only. weights_only=True refuses any other
    object, so a pickle that would run code on loading (a tampered file whose checksums were rewritten) never runs:
    it is a CorruptCheckpoint naming the file."""
    try:
        return torch.load(file, weights_only=True, map_location="cpu")  # the optimizer moves it to its parameters
    except (pickle.UnpicklingError, RuntimeError, EOFError) as err:
        lines = [line for line in str(err).splitlines() if line.strip()] or [type(err).__name__]
        # torch's first line of a refused pickle is generic advice; the next names the object it refused
        reason = lines[1] if isinstance(err, pickle.UnpicklingError) and len(lines) > 1 else lines[0]
        raise CorruptCheckpoint(f"{file}: not a plain training state, refused by torch.load(weights_only=True): "
                                f"{reason.rstrip('.')}. Do not load it with weights_only=False (that would run "
                                f"its code): start the run again without --resume, or resume from a checkpoint "
                                f"you wrote") from None


def load_checkpoint(path: Path, *, model, objectives=None) -> dict:
    """Verify, then restore the model and the objectives' state; return trainer_state. The optimizer and schedule
    follow with `load_optimizer_states` once the optimizer exists (under sharding: once the model is sharded)."""
    from safetensors.torch import load_file

    verify_checkpoint(path)
    weights = load_file(str(path / "model.safetensors"))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # a tied weight is stored once, under one of its names (the MLM decoder's, an encoder-decoder's shared embedding):
    # a missing name is fine when its tensor is one that was loaded; anything else missing is an error
    state = model.state_dict()
    loaded = {t.data_ptr() for k, t in state.items() if k in weights}
    missing = [k for k in missing if state[k].data_ptr() not in loaded]
    if missing or unexpected:
        raise CorruptCheckpoint(f"{path}: checkpoint does not fit the model "
                                f"(missing {missing}, unexpected {unexpected})")
    model.tie_weights()
    saved = load_file(str(path / OBJECTIVES_FILE)) if (path / OBJECTIVES_FILE).exists() else {}
    for name, objective in (objectives or {}).items():
        prefix = f"{name}."
        objective.load_checkpoint_state({k[len(prefix):]: v for k, v in saved.items() if k.startswith(prefix)},
                                        str(path / OBJECTIVES_FILE))
    return json.loads((path / "trainer_state.json").read_text())


def load_optimizer_states(path: Path, *, module, optimizer, scheduler) -> None:
    """Restore the optimizer (its state keyed by parameter names of `module`, the objectives' module unwrapped;
    sharded or not) and the schedule of the verified checkpoint `path`."""
    load_optimizer_state(module, optimizer, load_training_state(path / "optimizer.pt"))
    scheduler.load_state_dict(load_training_state(path / "scheduler.pt"))
