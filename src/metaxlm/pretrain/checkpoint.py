"""Atomic training checkpoints: model (safetensors), optimizer, scheduler, data position, step.

A checkpoint is written into a hidden temporary directory and renamed into place, then the `latest`
pointer file is replaced atomically: a crash at any moment leaves the previous checkpoint intact and
`latest` pointing at a complete one. Optimizer/scheduler states are loaded with weights_only=True.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

from metaxlm.io import atomic_write_json, atomic_write_text


def save_checkpoint(ckpt_root: Path, step: int, *, model, optimizer, scheduler, state: dict, keep: int,
                    weights: dict | None = None) -> Path:
    """`weights`: gathered full weights when the model is sharded (FSDP/DeepSpeed); else the model's own."""
    ckpt_root.mkdir(parents=True, exist_ok=True)
    final = ckpt_root / f"step_{step:08d}"
    tmp = ckpt_root / f".tmp-step_{step:08d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    model.save_pretrained(str(tmp), state_dict=weights)  # safetensors
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    atomic_write_json(tmp / "trainer_state.json", {"step": step, **state})
    for f in tmp.iterdir():  # make the files durable before the rename publishes them
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    atomic_write_text(ckpt_root / "latest", final.name + "\n")
    for old in sorted(ckpt_root.glob("step_*"))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(ckpt_root: Path) -> Path | None:
    pointer = ckpt_root / "latest"
    if not pointer.exists():
        return None
    path = ckpt_root / pointer.read_text().strip()
    return path if (path / "trainer_state.json").exists() else None


def load_checkpoint(path: Path, *, model, optimizer, scheduler) -> dict:
    from safetensors.torch import load_file

    weights = load_file(str(path / "model.safetensors"))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # the tied decoder weight is not stored separately; anything else missing is an error
    missing = [k for k in missing if not k.endswith(("decoder.weight", "decoder.bias"))]
    if missing or unexpected:
        raise RuntimeError(f"{path}: checkpoint does not fit the model (missing {missing}, unexpected {unexpected})")
    model.tie_weights()
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=True))
    return json.loads((path / "trainer_state.json").read_text())
