"""Where one model's evaluation in a comparison config spends its time (issue 26 §2).

Runs the evaluation of ONE model of a run config (default: `start` of configs/compare.yaml, the common start every
method continues; `--model veco` adds the two translation tasks) exactly as the evaluate stage runs it — same tasks,
seeds, test sizes — into a fresh directory (nothing reused), with every part of the work timed by section:
tokenization, fine-tuning steps, inference, translation generation, scoring, per-layer retrieval, word alignment,
model and data loading, fingerprints (hashing model files), writing results. Each second is counted once, in the
innermost section it is spent in (e.g. the tokenization a test does is tokenization, not inference); what no
section covers is "other". Writes runs/bench/evaluation_profile[_<label>].json (the CPU model, thread count, the
table) and the evaluation's results.json beside it (`.results.json`: a profile after a speed change must give
the same numbers), and prints the table as Markdown.

    python bench/evaluation_profile.py                         # start of configs/compare.yaml
    python bench/evaluation_profile.py --model veco --label veco
    python bench/evaluation_profile.py --config configs/compare.yaml 'evaluate.seeds=[0]'   # overrides

The run's vocabulary is made when missing (the vocab stage) and the start models written (as the pretrain stage
writes them); a variant's model needs its pretraining first
(`metaxlm run configs/compare.yaml 'stages=[vocab,prepare,stats,pretrain]'`).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class Sections:
    """Exclusive wall time per section: a stack of open sections, each interval charged to the innermost."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.stack: list[str] = ["other"]
        self.mark = time.perf_counter()

    def _charge(self) -> None:
        now = time.perf_counter()
        self.seconds[self.stack[-1]] = self.seconds.get(self.stack[-1], 0.0) + now - self.mark
        self.mark = now

    def wrap(self, section: str, func):
        @functools.wraps(func)
        def timed(*args, **kwargs):
            self._charge()
            self.stack.append(section)
            self.calls[section] = self.calls.get(section, 0) + 1
            try:
                return func(*args, **kwargs)
            finally:
                self._charge()
                self.stack.pop()
        return timed

    def patch(self, owner, name: str, section: str) -> None:
        setattr(owner, name, self.wrap(section, getattr(owner, name)))


def instrument(sections: Sections) -> None:
    """Wrap the functions each section is made of, where the evaluation code looks them up."""
    import metaxlm.data.benchmarks as benchmarks
    import metaxlm.evaluation.recipe as recipe
    import metaxlm.features.layers as layers
    import metaxlm.features.retrieval as retrieval
    import metaxlm.finetune.resume_key as resume_key
    import metaxlm.finetune.run_store as run_store
    import metaxlm.finetune.runner as runner
    import metaxlm.finetune.tasks.base as task_base
    import metaxlm.finetune.translate as translate
    import metaxlm.run.stamps as stamps
    from metaxlm.finetune.tasks import TASKS

    for name in TASKS.names():
        task = TASKS.get(name)
        for method, section in (("encode", "tokenization"), ("score", "scoring"), ("report", "scoring")):
            if method in vars(task):
                sections.patch(task, method, section)
    where = [  # (module the evaluation looks the function up in, function, section)
        (layers, "tokenize_texts", "tokenization"),
        (runner, "finetune", "fine-tuning steps"),
        (task_base, "predict_outputs", "inference (task tests)"),
        (translate, "generate_translations", "translation (generation)"),
        (retrieval, "retrieval_by_layer", "retrieval (per layer)"),
        (recipe, "evaluate_alignment", "word alignment (per layer)"),
        (runner, "load_model", "model loading"),
        (runner, "load_finetune_tokenizer", "model loading"),
        (layers, "load_encoder", "model loading"),
        (benchmarks, "load_examples", "data loading"),
        (benchmarks, "load_alignment", "data loading"),
        (recipe, "retrieval_pairs", "data loading"),
        (recipe, "model_fingerprint", "fingerprints (hashing model files)"),
        (resume_key, "model_fingerprint", "fingerprints (hashing model files)"),  # a task's own model files
        (stamps, "atomic_write_text", "writing results"),  # the stored parts (stamps.get_or_compute)
        (runner, "atomic_write_text", "writing results"),
        (run_store, "atomic_write_text", "writing results"),  # the finished-run records
    ]
    for module, name, section in where:
        sections.patch(module, name, section)

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(REPO / "configs/compare.yaml"))
    parser.add_argument("--model", default="start", help="a model name of the run's evaluation (default: start)")
    parser.add_argument("--label", default="", help="suffix of the JSON's name")
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the config")
    args = parser.parse_args()

    import torch

    import metaxlm.evaluation.recipe as recipe
    from metaxlm.compute.precision import cpu_model
    from metaxlm.config import load_config
    from metaxlm.io import json_safe
    from metaxlm.pipeline import stage_vocab
    from metaxlm.pretrain.variant import save_start_model
    from metaxlm.run.layout import RunDir

    cfg = load_config(args.config, args.overrides)
    if not (RunDir.of(cfg).vocab / "tokenizer_config.json").exists():  # what the start model is written with
        stage_vocab(cfg)
    for variant in cfg.start_models_evaluated():  # the pretrain stage exports them; reused while unchanged
        save_start_model(cfg, variant, progress=False)
    sections = Sections()
    instrument(sections)
    targets = {t.name: t for t in recipe.models_to_evaluate(cfg.model_copy(
        update={"evaluate": cfg.evaluate.model_copy(update={"variants": [], "checkpoints": False})}))} \
        if args.model in cfg.evaluate.models else {t.name: t for t in recipe.models_to_evaluate(cfg)}
    if args.model not in targets:
        print(f"no model {args.model!r} in the run's evaluation (models: {', '.join(targets)})", file=sys.stderr)
        return 2
    cfg = cfg.model_copy(update={"evaluate": cfg.evaluate.model_copy(update={"finished_runs": None})})
    with tempfile.TemporaryDirectory(prefix="evaluation-profile-") as tmp:
        recipe.eval_dir = lambda _cfg: Path(tmp)  # a fresh directory: nothing is reused
        sections.seconds.clear()
        sections.mark = began = time.perf_counter()
        results = recipe.evaluate_model(cfg, targets[args.model], progress=False)
        sections._charge()
        total = time.perf_counter() - began
    table = sorted(({"section": name, "seconds": round(sec, 1), "share": round(sec / total, 3),
                     "calls": sections.calls.get(name, 0)} for name, sec in sections.seconds.items()),
                   key=lambda row: -row["seconds"])
    record = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "cpu": cpu_model(),
              "threads": torch.get_num_threads(), "python": platform.python_version(), "torch": torch.__version__,
              "config": str(Path(args.config).resolve().relative_to(REPO)) if Path(args.config).resolve()
              .is_relative_to(REPO) else args.config, "overrides": args.overrides, "model": args.model,
              "total_seconds": round(total, 1), "sections": table}
    out = REPO / "runs/bench" / f"evaluation_profile{'_' + args.label if args.label else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    # the evaluation's results beside it: two profiles of the same computation must give the same numbers
    out.with_suffix(".results.json").write_text(json.dumps(json_safe(results), indent=1) + "\n")
    print(f"\none model's evaluation ({args.model}, {record['config']}): {total:.0f} s on {record['cpu']}, "
          f"{record['threads']} threads\n")
    print("| section | seconds | share | calls |\n|---|---:|---:|---:|")
    for row in table:
        print(f"| {row['section']} | {row['seconds']:.1f} | {100 * row['share']:.1f}% | {row['calls']} |")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
