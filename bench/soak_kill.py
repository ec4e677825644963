"""Kill soak (issue 13): SIGKILL a pretraining run and an evaluation run at random moments, resume each time, and
check that they end exactly where an uninterrupted run of the same config ends.

Pretraining: a tiny model (2 layers, hidden 32) on text from data/demo (en, de, fr and the en-de, en-fr pairs) with
mixed objectives MLM + TLM + DWA (XLM-Align) + MoCo (PPA), a checkpoint every few steps. The reference runs once,
uninterrupted, through the plain CLI. Then `metaxlm pretrain CONFIG --resume` (no --resume while no checkpoint exists)
is run again and again, each run SIGKILLed as planned (see bench/_killsoak.py): half-way through writing a
checkpoint's optimizer.pt, after a checkpoint is renamed into place but before `latest` moves to it, inside the
in-training evaluation, at random moments of training and of start-up, and finally inside the final export (after
the last checkpoint). At the end: model weights, the objectives' state (MoCo queue and key encoder, DWA pointer
head), optimizer and scheduler state of every kept checkpoint and the final model bit-identical; metrics.jsonl and
summary.json identical but for timings.

Evaluation: `metaxlm evaluate` of the reference's final model (two fine-tuning tasks from data/demo with two seeds
each, retrieval and word-alignment probes) killed as often, half the kills inside fine-tuning, rerun each time; the
final results.json must equal the uninterrupted one.

Writes runs/bench/soak_kill.json (atomically; machine, torch version, seeds, every attempt: its plan, where the kill
landed, exit code) and runs/bench/soak_kill.png. Exit status 1 when a soak did not finish or did not end identical.
"""

from __future__ import annotations

import argparse
import lzma
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _killsoak as ks  # noqa: E402  (the bench's own helper, beside this file)
from disk_full import machine  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo"
TINY = {"layers": 2, "hidden": 32, "heads": 2, "ffn": 64, "max_positions": 64}
LANGUAGES = ["en", "de", "fr"]
OBJECTIVES = {"mlm": 1.0, "tlm": {"weight": 1.0, "order": "shuffled"}, "dwa": 1.0,
              "moco": {"weight": 1.0, "queue_size": 32, "lr_scale": 10.0}}


def build_template(work: Path, *, mono_lines: int = 3000, pair_lines: int = 1500) -> tuple[Path, dict]:
    """Plain-text corpora cut from data/demo, a vocabulary and prepared/ (every run copies them), and the data
    section of the config."""
    from metaxlm.config import CorpusSpec, ParallelSpec, PrepareConfig, VocabConfig
    from metaxlm.data.prepare import prepare_corpora
    from metaxlm.vocab import train_vocab

    corpora = work / "corpora"
    corpora.mkdir(parents=True, exist_ok=True)
    for lang in LANGUAGES:
        with lzma.open(DEMO / "mono" / f"{lang}.txt.xz", "rt", encoding="utf-8") as f:
            (corpora / f"{lang}.txt").write_text("".join(line for _, line in zip(range(mono_lines), f, strict=False)))
        if lang != "en":
            with lzma.open(DEMO / "parallel" / f"en-{lang}.tsv.xz", "rt", encoding="utf-8") as f:
                (corpora / f"en-{lang}.tsv").write_text(
                    "".join(ln for _, ln in zip(range(pair_lines), f, strict=False)))
    mono = {lang: CorpusSpec(path=str(corpora / f"{lang}.txt")) for lang in LANGUAGES}
    parallel = {f"en-{lang}": ParallelSpec(path=str(corpora / f"en-{lang}.tsv")) for lang in LANGUAGES if lang != "en"}
    template = work / "template"
    train_vocab(mono, VocabConfig(size=1000, sample_sentences=20000), template / "vocab", alpha=0.7, progress=False)
    prepare_corpora(mono, parallel, template / "vocab", template / "prepared",
                    PrepareConfig(num_proc=1, heldout_texts=20), progress=False)
    data = {"languages": LANGUAGES, "mono": str(corpora / "{lang}.txt"), "parallel": str(corpora / "en-{lang}.tsv")}
    return template, data


def pretrain_config(data: dict, *, steps: int, save_every: int, eval_every: int) -> dict:
    return {"output_dir": "unused", "seed": 0, "data": data, "prepare": {"num_proc": 1, "heldout_texts": 20},
            "model": TINY,
            "train": {"steps": steps, "batch_size": 8, "seq_len": 32, "warmup_steps": 2, "lr": 1e-3, "log_every": 1,
                      "eval_every": eval_every, "save_every": save_every, "keep_checkpoints": 3,
                      "eval_sequences": 2, "precision": "fp32", "objectives": OBJECTIVES}}


def evaluation_config(model: Path, out: Path, *, steps: int, tasks: tuple[str, ...] = ("demo_module", "demo_spans"),
                      seeds: tuple[int, ...] = (0, 1)) -> dict:
    hp = {"max_steps": steps, "batch_size": 16, "max_seq_len": 48, "eval_batch_size": 64, "lr": 5e-4}
    return {"output_dir": str(out), "seed": 0, "data": {"languages": LANGUAGES}, "variants": {"xlm": {}},
            "evaluate": {
                "variants": [], "models": {"tiny": str(model)}, "precision": "fp32", "seeds": list(seeds),
                "tasks": {t.removeprefix("demo_"): {"task": t, "languages": LANGUAGES, "max_train_items": 160,
                                                    "max_test_items": 40, "hyperparameters": hp} for t in tasks},
                "retrieval": {"demo": {"path": str(DEMO / "retrieval" / "en-{lang}.tsv.xz"), "max_pairs": 60}},
                "alignment": {"grc-en": {"src": str(DEMO / "alignment" / "grc-en" / "test.grc"),
                                         "tgt": str(DEMO / "alignment" / "grc-en" / "test.en"),
                                         "gold": str(DEMO / "alignment" / "grc-en" / "gold.txt"),
                                         "format": "pharaoh", "word_base": 0}}}}


def expected_parts(cfg: dict) -> dict[str, dict]:
    """The parts the evaluation stores, with the fine-tuning steps each takes."""
    eval_cfg = cfg["evaluate"]
    parts = {f"task-{name}": {"finetune": t["hyperparameters"]["max_steps"] * len(eval_cfg["seeds"])}
             for name, t in eval_cfg["tasks"].items()}
    parts.update({f"retrieval-{name}": {"finetune": 0} for name in eval_cfg.get("retrieval", {})})
    parts.update({f"alignment-{name}": {"finetune": 0} for name in eval_cfg.get("alignment", {})})
    return parts


def metaxlm(*args: str) -> subprocess.CompletedProcess:
    """`metaxlm *args`, plain (no probes): the uninterrupted reference runs."""
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "metaxlm.cli", *args], capture_output=True, text=True,
                          env=ks.child_env())
    done.seconds = time.perf_counter() - began
    if done.returncode:
        sys.exit(f"metaxlm {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done


def write_yaml(path: Path, cfg: dict) -> Path:
    import yaml

    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def soak_pretraining(work: Path, template: Path, data: dict, args, say) -> dict:
    cfg = pretrain_config(data, steps=args.steps, save_every=args.save_every, eval_every=args.eval_every)
    config = write_yaml(work / "pretrain.yaml", cfg)
    ref_run, soak_run = work / "pretrain-reference", work / "pretrain-soak"
    for run in (ref_run, soak_run):
        shutil.copytree(template, run)
    say(f"pretraining reference: {args.steps} steps, uninterrupted")
    ref = metaxlm("pretrain", str(config), f"output_dir={ref_run}", "--no-progress")
    say(f"  {ref.seconds:.1f}s")
    say(f"pretraining soak: {args.kills} kills (seed {args.seed})")
    soak = ks.pretrain_soak(config, soak_run, "xlm", steps=args.steps, save_every=args.save_every,
                            eval_every=args.eval_every, kills=args.kills, seed=args.seed, work=work, say=say)
    comparison = ks.compare_pretraining(ref_run / "pretrain" / "xlm", soak_run / "pretrain" / "xlm") \
        if soak["finished"] else {"identical": False, "why": "the soaked run did not finish"}
    say(f"  identical to the uninterrupted run: {comparison['identical']}")
    return {"config": cfg["train"] | {"model": TINY}, "reference_seconds": round(ref.seconds, 1), "soak": soak,
            "kills_by_phase": ks.kills_by_phase(soak), "comparison": comparison,
            "final_model": str(ref_run / "pretrain" / "xlm" / "final")}


def soak_evaluation(work: Path, model: Path, args, say) -> dict:
    ref_out, soak_out = work / "eval-reference", work / "eval-soak"
    ref_cfg = evaluation_config(model, ref_out, steps=args.finetune_steps)
    soak_cfg = evaluation_config(model, soak_out, steps=args.finetune_steps)
    ref_config = write_yaml(work / "eval-reference.yaml", ref_cfg)
    soak_config = write_yaml(work / "eval.yaml", soak_cfg)
    say("evaluation reference: uninterrupted")
    ref = metaxlm("evaluate", str(ref_config), "--no-progress")
    say(f"  {ref.seconds:.1f}s")
    say(f"evaluation soak: {args.eval_kills} kills (seed {args.seed})")
    parts = expected_parts(soak_cfg)
    soak = ks.evaluation_soak(soak_config, parts_dir=soak_out / "eval" / "tiny" / "parts", parts=parts,
                              reference_seconds=ref.seconds, kills=args.eval_kills, seed=args.seed + 1, work=work,
                              say=say)
    comparison = ks.compare_results(ref_out / "eval" / "tiny" / "results.json",
                                    soak_out / "eval" / "tiny" / "results.json")
    say(f"  identical to the uninterrupted run: {comparison['identical']}")
    return {"config": soak_cfg["evaluate"] | {"models": {"tiny": "the pretraining reference's final model"}},
            "reference_seconds": round(ref.seconds, 1), "soak": soak, "kills_by_phase": ks.kills_by_phase(soak),
            "comparison": comparison}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=30, help="SIGKILLs of the pretraining run (default 30)")
    ap.add_argument("--eval-kills", type=int, default=12, help="SIGKILLs of the evaluation run (default 12)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill plans (when and where to kill)")
    ap.add_argument("--steps", type=int, default=120, help="pretraining steps (default 120)")
    ap.add_argument("--save-every", type=int, default=4)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--finetune-steps", type=int, default=40, help="fine-tuning steps per task and seed")
    ap.add_argument("--work", help="working directory (default: a temporary one, removed afterwards)")
    ap.add_argument("--out", default=str(REPO / "runs" / "bench" / "soak_kill.json"))
    args = ap.parse_args()

    from metaxlm.io import atomic_write_json

    started = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.0f}s] {msg}", flush=True)

    result: dict = {"bench": "soak_kill", "machine": machine(), "seed": args.seed,
                    "command": " ".join(sys.argv)}
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(args.work or scratch)
        work.mkdir(parents=True, exist_ok=True)
        say("corpora, vocabulary and prepared data from data/demo")
        template, data = build_template(work)
        result["pretraining"] = soak_pretraining(work, template, data, args, say)
        model = Path(result["pretraining"].pop("final_model"))
        result["evaluation"] = soak_evaluation(work, model, args, say)
    result["all_identical"] = all(result[k]["soak"]["finished"] and result[k]["comparison"]["identical"]
                                  for k in ("pretraining", "evaluation"))
    result["seconds"] = round(time.perf_counter() - started, 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, result)
    ks.figure(result, out.with_suffix(".png"))
    for name in ("pretraining", "evaluation"):
        r = result[name]
        print(f"{name}: {r['soak']['kills']} kills survived "
              f"({', '.join(f'{k} {v}' for k, v in r['kills_by_phase'].items())}); "
              f"identical: {r['comparison']['identical']}")
    print(f"all identical: {result['all_identical']} in {result['seconds']:.0f}s ({out}, {out.with_suffix('.png')})")
    return 0 if result["all_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
