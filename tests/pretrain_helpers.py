"""Helpers shared by the pretraining tests: a tiny model, a run config on the prepared test data, and readers."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from safetensors.torch import load_file

TINY = {"layers": 2, "hidden": 32, "heads": 2, "ffn": 64, "max_positions": 64}


def make_config(run_template, tmp_path, **train) -> Path:
    run = tmp_path / "run"
    if not run.exists():
        shutil.copytree(run_template, run)
    cfg = {"output_dir": str(run), "data": {"languages": ["en", "de", "ru", "zh"], "mono": "unused/{lang}"},
           "model": TINY,
           "train": {"steps": 6, "batch_size": 8, "seq_len": 32, "warmup_steps": 2, "lr": 1e-3, "log_every": 1,
                     "eval_every": 3, "save_every": 3, "eval_sequences": 2, **train}}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def cli(*args, env=None, **kw):
    return subprocess.run([sys.executable, "-m", "metaxlm.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, **kw)


def final_weights(run_dir: Path) -> dict:
    return load_file(str(run_dir / "final" / "model.safetensors"))


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
