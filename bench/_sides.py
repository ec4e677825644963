"""Shared by the objective-cost benchmarks: time pretraining variants side by side on the same batches.

Each side is the engine (`run_pretrain`) on one variant of a config, in a fresh process; the sides alternate
(A B B A ...), and each side is reported by its fastest run (the machine is noisy; the fastest run is the one least
disturbed). A step is timed by the engine from batch building to the optimizer step (its `tokens_per_s`), over the
steps after the warm-up steps. Not a benchmark itself (run_all.py skips files starting with `_`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timing_arguments(description: str, *, sides, batch_size: int, batch_help: str, cache: str, out: str):
    """The command line both objective-cost benchmarks take; returns the parsed arguments."""
    import argparse

    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8, help="timed steps (after the warm-up steps)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=batch_size, help=batch_help)
    ap.add_argument("--repeats", type=int, default=2, help="runs of each side, alternating")
    ap.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--cache", default=str(REPO / ".cache" / cache))
    ap.add_argument("--out", default=str(REPO / "runs" / "bench" / out))
    ap.add_argument("--child", choices=list(sides), help=argparse.SUPPRESS)
    return ap.parse_args()


def child_argv(args) -> list[str]:
    """The arguments a side's child process gets."""
    return [f"--steps={args.steps}", f"--warmup={args.warmup}", f"--batch-size={args.batch_size}",
            f"--precision={args.precision}", f"--threads={args.threads}", f"--cache={args.cache}"]


def timing_overrides(*, cache: str, steps: int, warmup: int, batch_size: int, precision: str) -> list[str]:
    return [f"output_dir={cache}", f"train.steps={warmup + steps}", f"train.batch_size={batch_size}",
            "train.log_every=1", "train.eval_every=1000000", "train.save_every=1000000", "train.eval_sequences=1",
            f"train.precision={precision}", "prepare.heldout_texts=20"]


def prepare_run(config: Path, overrides: list[str]) -> None:
    """The vocab and prepare stages of the config, once (cached under its output_dir)."""
    from metaxlm.config import load_config
    from metaxlm.pipeline import stage_prepare, stage_vocab
    from metaxlm.run.layout import RunDir

    cfg = load_config(config, overrides)
    run = RunDir.of(cfg)
    if not (run.vocab / "tokenizer_config.json").exists() and not (run.vocab / "trim_map.json").exists():
        stage_vocab(cfg)
    if not (run.prepared / "meta.json").exists():
        stage_prepare(cfg)


def time_variant(config: Path, variant: str, overrides: list[str], *, warmup: int, threads: int,
                 extra=None) -> None:
    """In the child process: run the variant, print `RESULT {json}` with its per-step seconds (and what
    `extra(cfg, variant_dir)` measures after the run, a dict, when given)."""
    import torch

    from metaxlm.config import load_config
    from metaxlm.pretrain.variant import run_pretrain
    from metaxlm.run.layout import RunDir

    torch.set_num_threads(threads)
    cfg = load_config(config, overrides)
    out = RunDir.of(cfg).variant(variant).root
    shutil.rmtree(out, ignore_errors=True)
    run_pretrain(cfg, variant, progress=False)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "tokens_per_s" in r]  # log_every 1: one record per step, tokens cumulative
    seconds, tokens, previous = [], 0, 0
    for r in steps:
        tokens, previous = r["tokens"] - previous, r["tokens"]
        if r["step"] > warmup:
            seconds.append(tokens / r["tokens_per_s"])
    timed = [r for r in steps if r["step"] > warmup]
    summary = json.loads((out / "summary.json").read_text())
    print("RESULT " + json.dumps({"step_seconds": seconds, "tokens_per_step": tokens,
                                  "tokens_per_s": sum(r["tokens_per_s"] for r in timed) / len(timed),
                                  "losses": {k: v for k, v in timed[-1].items() if k.startswith("loss")},
                                  "precision": summary["precision"], "threads": torch.get_num_threads(),
                                  **(extra(cfg, out) if extra else {})}), flush=True)


def run_side(script: str, side: str, argv: list[str]) -> dict:
    proc = subprocess.run([sys.executable, script, "--child", side, *argv], capture_output=True, text=True,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"{side} run failed (exit {proc.returncode})")
    return json.loads(next(ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("RESULT "))[7:])


def alternate(script: str, sides: tuple[str, ...], argv: list[str], repeats: int) -> tuple[list[str], dict, dict]:
    """Run the sides `repeats` times each, alternating (A B C, C B A, ...); (order, runs per side, best seconds per
    step)."""
    order = [s for k in range(repeats) for s in (sides if k % 2 == 0 else sides[::-1])]
    runs: dict[str, list[dict]] = {s: [] for s in sides}
    for side in order:
        result = run_side(script, side, argv)
        per_step = sum(result["step_seconds"]) / len(result["step_seconds"])
        print(f"{side}: {per_step:.2f} s/step, {result['tokens_per_s']:.0f} tokens/s "
              f"({result['precision']['precision']})", flush=True)
        runs[side].append(result)
    best = {s: min(sum(r["step_seconds"]) / len(r["step_seconds"]) for r in rs) for s, rs in runs.items()}
    return order, runs, best
