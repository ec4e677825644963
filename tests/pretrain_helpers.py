"""Helpers shared by the pretraining tests: a tiny model, a run config on the prepared test data, and readers."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import warm_cli
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
    """`metaxlm ARGS` in a process of its own, output captured (forked from a warm process: see warm_cli, whose
    `zygote` and `cold` it takes)."""
    return warm_cli.run(list(args), env={**os.environ, **(env or {})}, **kw)


def final_weights(run_dir: Path) -> dict:
    return load_file(str(run_dir / "final" / "model.safetensors"))


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def latest_step(ckpt_dir: Path) -> int:
    return int((ckpt_dir / "latest").read_text().strip().split("_")[1])


def kill_after_checkpoint(cfg: Path, ckpt_dir: Path, at_step: int, *args: str, timeout: float = 180) -> int:
    """Start `metaxlm pretrain cfg *args`, SIGKILL it once a checkpoint of step >= at_step exists, and return the
    step of the latest checkpoint left behind (the run must not have ended on its own)."""
    import signal
    import time

    proc = warm_cli.popen(["pretrain", str(cfg), "--no-progress", *args], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if (ckpt_dir / "latest").exists() and latest_step(ckpt_dir) >= at_step:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    return latest_step(ckpt_dir)


def assert_runs_identical(ref: Path, run_dir: Path, step: int, files=("model.safetensors", "objectives.safetensors")):
    """The same log lines (but the timings) and bit-identical checkpoint files at `step`: an interrupted and
    resumed run equals the uninterrupted one."""
    import torch

    a, b = metrics(ref), metrics(run_dir)
    assert [r["step"] for r in a] == [r["step"] for r in b]  # no duplicated or missing log lines
    for ra, rb in zip(a, b, strict=True):
        assert {k: v for k, v in ra.items() if k != "tokens_per_s"} == \
            {k: v for k, v in rb.items() if k != "tokens_per_s"}, ra["step"]
    for name in files:
        sa = load_file(str(ref / "ckpt" / f"step_{step:08d}" / name))
        sb = load_file(str(run_dir / "ckpt" / f"step_{step:08d}" / name))
        assert sa.keys() == sb.keys(), name
        for k in sa:
            assert torch.equal(sa[k], sb[k]), (name, k)  # bit-exact


def assert_same_losses_and_weights(one: Path, two: Path, names: tuple[str, ...], steps: int = 3) -> list[dict]:
    import pytest
    import torch

    ra, rb = metrics(one), metrics(two)
    for name in names:
        la, lb = [r[name] for r in ra if name in r], [r[name] for r in rb if name in r]
        assert len(la) == steps and la == pytest.approx(lb, rel=1e-5), name
    wa, wb = final_weights(one), final_weights(two)
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=1e-5)
    return ra


def check_resume_after_sigkill(template: Path, tmp_path: Path, *args: str, steps: int, save_every: int,
                               kill_at: int, eval_every: int,
                               files=("model.safetensors", "objectives.safetensors")) -> Path:
    """An uninterrupted run, and the same run SIGKILLed after its checkpoint of step >= kill_at then resumed with
    --resume: identical logs and bit-identical checkpoints at the end. Returns the resumed run's ckpt dir."""
    cfg = make_config(template, tmp_path, steps=steps, save_every=save_every, eval_every=eval_every,
                      keep_checkpoints=50)
    shutil.copytree(template, tmp_path / "ref", dirs_exist_ok=True)
    ref = cli("pretrain", str(cfg), "--no-progress", *args, f"output_dir={tmp_path / 'ref'}")
    assert ref.returncode == 0, ref.stderr[-2000:]
    ckpt = tmp_path / "run" / "pretrain" / "xlm" / "ckpt"
    assert kill_after_checkpoint(cfg, ckpt, kill_at, *args) < steps
    # resumed with another hash seed than the reference's (see warm_cli)
    resumed = cli("pretrain", str(cfg), "--no-progress", "--resume", *args, zygote=1)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert_runs_identical(tmp_path / "ref" / "pretrain" / "xlm", tmp_path / "run" / "pretrain" / "xlm", steps, files)
    return ckpt
