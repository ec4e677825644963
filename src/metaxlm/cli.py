"""The `metaxlm` command line. Every subcommand has --help; config-driven ones take `key.sub=value` overrides."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import nullcontext
from pathlib import Path

from metaxlm import __version__
from metaxlm.errors import ConfigError, MetaXLMError, SkipReport
from metaxlm.run.processes import (
    RunStopped,
    Terminated,
    exit_stopped,
    is_main,
    label,
    quiet_other_ranks,
    sigterm_raises,
    world_size,
)

CHECK_FORMATS = ("text", "documents", "jsonl", "parallel", "muse", "freedict", "conllu")


def _add_config_args(p: argparse.ArgumentParser) -> None:
    # optional for argparse: without it, _load says what to pass instead of a bare usage error
    p.add_argument("config", nargs="?", help="a YAML config file, or the name of a packaged config (metaxlm "
                                             "configs list)")
    p.add_argument("overrides", nargs="*", metavar="key.sub=value", help="override any config field")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(config_command=p.prog)


def _load(args):
    from metaxlm.config import load_config
    from metaxlm.packaged import find_config

    args.config = _config_arg(args)
    return load_config(find_config(args.config), args.overrides)


def _config_arg(args) -> str:
    """The command's config (a file or a packaged name); with none (or an override in its place), what to pass."""
    if args.config is not None and ("=" not in args.config or Path(args.config).is_file()):
        return args.config
    from metaxlm.packaged import names

    raise MetaXLMError(f"{args.config_command.removeprefix('metaxlm ')} needs a config: a YAML file or a packaged "
                       f"name ({', '.join(names('run'))}), then key.sub=value overrides if any, e.g. "
                       f"`{args.config_command} quickstart train.steps=10`; `metaxlm configs list` describes the "
                       "packaged configs")


def cmd_run(args) -> None:
    from metaxlm.run.lock import run_dir_held

    cfg = _load(args)
    with run_dir_held(cfg.output_dir, "metaxlm run", cfg.stages):  # shared by evaluations alone
        from metaxlm.pipeline import run  # after the lock: a refused run answers at once

        run(cfg, progress=not args.no_progress, recompute=args.recompute)


def cmd_pretrain(args) -> None:
    from metaxlm.compute.precision import run_precision
    from metaxlm.pretrain.variant import check_pretraining_config, export_for_evaluation, run_pretrain
    from metaxlm.run.info import recorded_invocation
    from metaxlm.run.layout import RunDir
    from metaxlm.run.lock import run_dir_held

    cfg = _load(args)
    check_pretraining_config(cfg)
    variant = args.variant or next(iter(cfg.variants))
    # one writer of run_info.json when launched with torchrun / accelerate
    root = RunDir.of(cfg).variant(variant).root
    recorded = recorded_invocation(root, cfg, "pretrain") if is_main() else nullcontext()
    with run_dir_held(cfg.output_dir, "metaxlm pretrain"):  # the lock: rank 0's, for the launch
        if args.resume:  # a checkpoint of other settings is refused before this command writes its config.yaml
            from metaxlm.pipeline import check_reuse

            check_reuse(cfg.model_copy(update={"stages": ["pretrain"], "run_variants": [variant]}))
        with recorded:
            if is_main():  # the run's decision (its output_dir's); the other processes train in rank 0's
                run_precision(cfg.output_dir)
            result = run_pretrain(cfg, variant, resume=args.resume, resume_from=args.resume_from,
                                  progress=not args.no_progress)
            if is_main():
                export_for_evaluation(cfg, variant, progress=not args.no_progress)  # what `metaxlm evaluate` reads
                print(f"pretrained {variant}: {result.final_dir} (loads with AutoModelForMaskedLM.from_pretrained)")


def cmd_prepare(args) -> None:
    from metaxlm.data.inputs import check_inputs
    from metaxlm.pipeline import stage_prepare
    from metaxlm.run.info import recorded_invocation
    from metaxlm.run.layout import RunDir
    from metaxlm.run.lock import run_dir_held

    cfg = _load(args)
    vocab = RunDir.of(cfg).vocab
    if not (vocab / "tokenizer_config.json").exists():
        raise MetaXLMError(f"no vocabulary at {vocab}: run `metaxlm vocab train {args.config}` first")
    check_inputs(cfg, dictionaries=False)
    with run_dir_held(cfg.output_dir, "metaxlm data prepare"), recorded_invocation(cfg.output_dir, cfg, "prepare"):
        stage_prepare(cfg, progress=not args.no_progress)


def cmd_stats(args) -> None:
    from metaxlm.pipeline import stage_stats
    from metaxlm.run.lock import run_dir_held

    cfg = _load(args)
    with run_dir_held(cfg.output_dir, "metaxlm data stats"):
        stage_stats(cfg)


def cmd_vocab_train(args) -> None:
    from metaxlm.data.inputs import check_inputs
    from metaxlm.pipeline import stage_vocab
    from metaxlm.run.info import recorded_invocation
    from metaxlm.run.lock import run_dir_held

    cfg = _load(args)
    if cfg.vocab.mode == "train" or cfg.vocab.trim:
        check_inputs(cfg, parallel=False, dictionaries=False)
    with run_dir_held(cfg.output_dir, "metaxlm vocab train"), recorded_invocation(cfg.output_dir, cfg, "vocab"):
        stage_vocab(cfg, progress=not args.no_progress)


def cmd_vocab_trim(args) -> None:
    from metaxlm.config import CorpusSpec
    from metaxlm.data.corpus import iter_texts
    from metaxlm.vocab import trim_vocab

    report = SkipReport()
    texts = (t for c in args.corpus for t in iter_texts(CorpusSpec(path=c), skip_bad=args.skip_bad, report=report))
    info = trim_vocab(args.tokenizer, texts, args.out, min_count=args.min_count)
    print(f"trimmed {info['old_vocab_size']:,} -> {info['new_vocab_size']:,} pieces: {args.out}")
    if report.skipped:
        print(report.summary())


def cmd_check(args) -> None:
    from metaxlm.data import readers

    report = SkipReport()
    kw = {"skip_bad": args.skip_bad, "report": report}
    f = args.format
    if f == "text":
        items = readers.read_text(args.path, **kw)
    elif f == "documents":
        items = readers.read_text(args.path, unit="document", **kw)
    elif f == "jsonl":
        items = readers.read_jsonl(args.path, text_field=args.text_field, **kw)
    elif f == "parallel":
        items = readers.read_parallel(args.path, args.tgt, **kw)
    elif f == "muse":
        items = readers.read_muse_dict(args.path, **kw)
    elif f == "freedict":
        if not args.tgt:
            raise MetaXLMError("--format freedict needs the .index file as PATH and the .dict.dz as --tgt")
        items = readers.read_freedict(args.path, args.tgt, **kw)
    else:
        items = readers.read_conllu(args.path, **kw)
    n = sum(1 for _ in items)
    print(f"{args.path}: {n:,} {f} items OK; {report.summary()}")


def cmd_evaluate(args) -> None:
    from metaxlm.compute.precision import run_precision
    from metaxlm.pipeline import check_reuse, stage_evaluate
    from metaxlm.records import RESULTS_FILE
    from metaxlm.run.info import recorded_invocation
    from metaxlm.run.lock import run_dir_held

    cfg = _load(args)
    # shared with other evaluations of the run (an evaluation split over invocations side by side)
    with run_dir_held(cfg.output_dir, "metaxlm evaluate", ["evaluate"]):
        check_reuse(cfg.model_copy(update={"stages": ["evaluate"]}))  # models of other settings: nothing written
        with recorded_invocation(cfg.output_dir, cfg, "evaluate"):
            run_precision(cfg.output_dir)
            stage_evaluate(cfg, progress=not args.no_progress)
    print(f"results: {Path(cfg.output_dir) / 'eval'}/*/{RESULTS_FILE} (report: metaxlm report {cfg.output_dir})")


def cmd_finetune(args) -> None:
    from metaxlm.finetune.resume_key import run_fingerprint
    from metaxlm.finetune.runner import run_task
    from metaxlm.finetune.spec import load_task_spec
    from metaxlm.finetune.task_data import check_source_data
    from metaxlm.finetune.tasks import get_task
    from metaxlm.languages import check_language
    from metaxlm.records import RESULTS_FILE, write_results

    spec = load_task_spec(args.task, args.overrides)
    for code in args.languages or ():
        check_language(code, "--languages")
        if code not in spec.languages:
            raise ConfigError(f"--languages: task {spec.name} has no data for {code!r} (its languages: "
                              f"{', '.join(spec.languages)}; where its files hold {code} too, add it: "
                              f"languages=[{','.join([*spec.languages, code])}])")
    languages = args.languages or spec.languages
    scenario = args.scenario or get_task(spec.type).scenarios[0]  # zero_shot; translation: supervised
    check_source_data(spec, scenario, languages)  # no benchmark data: said before the model is read
    tokenizer_dir = Path(args.tokenizer or args.model)
    # a rerun into the same --out reuses the (language, seed) runs that finished with these settings and weights
    result = run_task(spec, Path(args.model), Path(args.out), scenario=scenario, seeds=args.seeds,
                      languages=languages, tokenizer_dir=tokenizer_dir, progress=not args.no_progress,
                      save_models=Path(args.out) / "models" if args.save_models else None,
                      resume_key=run_fingerprint(spec, scenario, Path(args.model), tokenizer_dir))
    name = Path(args.model).name
    write_results(Path(args.out) / RESULTS_FILE, {"model_name": name, "model_dir": args.model,
                                                  "tasks" if scenario != "transfer_matrix"
                                                  else "transfer_matrix": {spec.name: result}})
    from metaxlm.report.evaluation import format_task_table

    print(format_task_table(spec.name, {name: result}))


def cmd_translate(args) -> None:
    from metaxlm.finetune.translate import STDIO, corpus_scores, read_sentences, translate_file

    # with the translations on stdout, everything else goes to stderr
    status = sys.stderr if args.out == STDIO else sys.stdout
    if args.ref:  # a mismatched reference fails before any generation
        if args.src == STDIO:
            raise MetaXLMError("--ref needs --src FILE (standard input is read once, by the translation)")
        refs = read_sentences(args.ref)
        n_src = len(read_sentences(args.src))
        if len(refs) != n_src:
            raise MetaXLMError(f"{args.ref}: {len(refs)} lines, but {args.src} has {n_src} (one reference per line)")
    result = translate_file(args.model, args.src, args.out, tokenizer_dir=args.tokenizer, num_beams=args.beam,
                            batch_size=args.batch_size, max_new_tokens=args.max_new_tokens,
                            length_penalty=args.length_penalty, no_repeat_ngram_size=args.no_repeat_ngram_size,
                            max_source_len=args.max_source_len, progress=not args.no_progress)
    if result["truncated"]:
        print(f"metaxlm: warning: {result['truncated']:,} of {result['lines']:,} lines are longer than "
              f"{result['max_source_len']} source tokens (the model's maximum or --max-source-len) and were "
              f"truncated", file=sys.stderr, flush=True)
    rate = result["tokens"] / result["seconds"] if result["seconds"] else 0.0
    where = "standard output" if args.out == STDIO else args.out
    print(f"translated {result['lines']:,} lines -> {where} ({result['tokens']:,} tokens generated, "
          f"{rate:.0f} tokens/s, beam {result['decoding']['num_beams']})", file=status)
    if args.ref:
        scores = corpus_scores(result["hypotheses"], refs, target_lang=args.target_lang, tokenize=args.tokenize)
        print(f"BLEU {scores['bleu']:.2f}  {scores['signatures']['bleu']}", file=status)
        print(f"chrF {scores['chrf']:.2f}  {scores['signatures']['chrf']}", file=status)


LAYER_ON_DEV = "dev"


def _layer_arg(text: str) -> int | str:
    """`--layer`: a layer number, or "dev" (chosen on the dev set given by --dev-src/--dev-gold)."""
    if text == LAYER_ON_DEV:
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a layer number or '{LAYER_ON_DEV}', got {text!r}") from None


def cmd_align(args) -> None:
    from metaxlm.data.benchmarks import load_alignment
    from metaxlm.features.alignment import align_file

    on_dev = args.layer == LAYER_ON_DEV
    if on_dev and not (args.dev_src and args.dev_gold):
        raise ConfigError("align --layer dev needs the dev set: --dev-src (and --dev-tgt for two line-aligned files) "
                          "and --dev-gold")
    if not on_dev and (args.dev_src or args.dev_tgt or args.dev_gold):
        raise ConfigError("align: --dev-src/--dev-tgt/--dev-gold choose the layer with --layer dev; give it, or "
                          "leave them out")
    layer = args.layer
    if layer is None:  # the layer the model's run chose on dev, when its directory records one
        from metaxlm.models.encoder_card import ENCODER_INFO, read_encoder_info

        recorded = (read_encoder_info(args.model) or {}).get("alignment_layer")
        if isinstance(recorded, int):
            layer = recorded
            print(f"align: layer {layer} (recorded in {Path(args.model) / ENCODER_INFO}, chosen on dev)", flush=True)
    gold_options = {"fmt": args.gold_format, "src_base": args.gold_word_base, "sid_base": args.gold_sid_base}
    # both gold sets are read (and checked, naming file and line) before the model loads
    dev = load_alignment(args.dev_src, args.dev_tgt, args.dev_gold, **gold_options) if on_dev else None
    gold = load_alignment(args.src, args.tgt, args.gold, **gold_options) if args.gold else None
    done = align_file(args.model, args.src, args.tgt, args.out, layer=None if on_dev else layer, dev=dev,
                      gold=gold, method=args.method, batch_size=args.batch_size, tokenizer_dir=args.tokenizer,
                      progress=not args.no_progress)
    print(f"aligned {done.pairs:,} sentence pairs at layer {done.layer} -> {args.out} (Pharaoh i-j, 0-based)")
    if done.scores is not None:
        s = done.scores
        print(f"against {args.gold}: AER {100 * s['aer']:.1f}%, precision {100 * s['precision']:.1f}%, "
              f"recall {100 * s['recall']:.1f}%, F1 {100 * s['f1']:.1f}%")


def cmd_report(args) -> None:
    from metaxlm.report.evaluation import write_report
    from metaxlm.run.lock import run_dir_held

    if args.finished_runs is not None:
        _report_finished_runs(args)
        return
    if args.records:
        raise MetaXLMError("report: --records goes with --finished-runs CONFIG (it adds record directories)")
    if not args.run_dirs:
        raise MetaXLMError("report: give one or more run directories (or --finished-runs CONFIG --out DIR)")
    if missing := [d for d in args.run_dirs if not Path(d).is_dir()]:
        raise MetaXLMError(f"report: no run directory {missing[0]}")
    # the folder it writes: <first run>/report is the run directory's (not while a run or evaluation writes it)
    with run_dir_held(args.out or args.run_dirs[0], "metaxlm report",
                      hint="wait for it, or write the report elsewhere meanwhile (--out DIR)"):
        written = write_report([Path(d) for d in args.run_dirs], Path(args.out) if args.out else None)
    print(f"report: {written['html']} (and {written['markdown']})")


def _report_finished_runs(args) -> None:
    """`metaxlm report --finished-runs CONFIG [key=value ...] --out DIR` (metaxlm.report.finished_runs)."""
    from metaxlm.config import load_config
    from metaxlm.packaged import find_config
    from metaxlm.report.finished_runs import report_finished_runs
    from metaxlm.run.lock import run_dir_held

    if args.out is None:
        raise MetaXLMError("report --finished-runs: give --out DIR (the assembled results and the report go there)")
    if paths := [a for a in args.run_dirs if "=" not in a]:
        raise MetaXLMError(f"report --finished-runs: {paths[0]!r} is not a key=value override (a report from "
                           "finished runs reads no run directory)")
    with run_dir_held(args.out, "metaxlm report --finished-runs"):
        written, to_come = report_finished_runs(load_config(find_config(args.finished_runs), args.run_dirs),
                                                Path(args.out), tuple(Path(d) for d in args.records))
    print(f"report: {written['html']} (and {written['markdown']})")
    for task, runs in to_come.items():
        print(f"to come, {task}: {', '.join(runs)}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="metaxlm", description=__doc__)
    parser.add_argument("--version", action="version", version=f"metaxlm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run the pipeline described by a config (a file, or a packaged name: quickstart)",
                       description="Run the config's stages. A rerun reuses what is made (vocabulary and data while "
                                   "their inputs are unchanged; finished variants) and resumes what was interrupted; "
                                   "a variant pretrained or begun under other settings than the config's is refused, "
                                   "each difference named, before anything is written.")
    _add_config_args(p)
    p.add_argument("--recompute", action="append", default=[], metavar="VARIANT",
                   help="pretrain VARIANT again from the start under the config's settings, removing what it had "
                        "pretrained (repeatable; a variant that starts from it must be recomputed too)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("pretrain", help="pretrain one variant of a config (multi-process: torchrun/accelerate launch)")
    _add_config_args(p)
    p.add_argument("--variant", help="which entry of `variants` (default: the first)")
    p.add_argument("--resume", action="store_true", help="continue exactly from the latest checkpoint")
    p.add_argument("--resume-from", metavar="CKPT_DIR", help="continue exactly from this checkpoint (ckpt/step_N)")
    p.set_defaults(func=cmd_pretrain)

    p = sub.add_parser("evaluate", help="evaluate a config's models: fine-tuning scenarios, retrieval, word alignment")
    _add_config_args(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("finetune", help="fine-tune and test one task on any HF model dir (a packaged task or a file)")
    p.add_argument("task", help="a task YAML file, or a packaged task's name (e.g. sib200; metaxlm configs list)")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="override any task field (e.g. hyperparameters.lr=3e-5)")
    p.add_argument("--model", required=True, help="HF model dir (AutoModel)")
    p.add_argument("--tokenizer", help="tokenizer dir (default: the model dir)")
    p.add_argument("--out", required=True, help="output dir (fine-tuned models, predictions, results.json)")
    p.add_argument("--scenario", choices=("zero_shot", "supervised", "translate_train", "transfer_matrix"),
                   help="default: the task type's (zero_shot; translation: supervised)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--languages", nargs="+", help="test languages (default: the task's)")
    p.add_argument("--save-models", action="store_true",
                   help="write each fine-tuned model with its tokenizer to OUT/models/<language>-seed<seed>/ (a "
                        "translation model is then ready for `metaxlm translate --model`)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_finetune)

    p = sub.add_parser("translate", help="translate a text file with a seq2seq model dir (batched beam search)")
    p.add_argument("--model", required=True, help="HF sequence-to-sequence model dir (AutoModelForSeq2SeqLM)")
    p.add_argument("--tokenizer", help="tokenizer dir (default: the model dir)")
    p.add_argument("--src", default="-", help="one sentence per line (.gz/.xz too; default -: standard input); "
                                               "a blank line stays blank")
    p.add_argument("--out", default="-", help="translations, one line per input line, in input order (default -: "
                                             "standard output; status lines then go to standard error)")
    p.add_argument("--beam", type=int, help="beam size (1: greedy; default: the model's, as fine-tuning scored it, "
                                            "else 4)")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per generate() call")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--length-penalty", type=float, help="default: the model's, else 1.0")
    p.add_argument("--no-repeat-ngram-size", type=int,
                   help="no n-gram of this size twice in one output (default: the model's, else 0: off)")
    p.add_argument("--max-source-len", type=int, help="source tokens kept (default: the encoder's maximum)")
    p.add_argument("--ref", help="reference translations (line-aligned): print sacreBLEU BLEU and chrF")
    p.add_argument("--target-lang", help="with --ref: the target language, which picks BLEU's tokenizer "
                                         "(zh: zh; ja, ko: char; else 13a)")
    p.add_argument("--tokenize", help="with --ref: sacreBLEU's BLEU tokenizer, overriding --target-lang's")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("align", help="word-align sentence pairs with an encoder (writes Pharaoh i-j lines)")
    p.add_argument("--model", required=True, help="HF encoder dir (AutoModel)")
    p.add_argument("--tokenizer", help="tokenizer dir (default: the model dir)")
    p.add_argument("--src", required=True, help="'src ||| tgt' lines, or the source side of two line-aligned files")
    p.add_argument("--tgt", help="target side (line-aligned with --src)")
    p.add_argument("--out", required=True)
    p.add_argument("--layer", type=_layer_arg, default=None,
                   help="encoder layer, or 'dev': the layer of lowest AER on the dev set (--dev-src, --dev-gold; "
                        "ties: the shallower layer). Default: the alignment layer the model directory records "
                        "(metaxlm_encoder.json: chosen on dev by the run that made it), else the aligner's default")
    p.add_argument("--method", choices=("ot", "argmax", "itermax"), default="ot")
    p.add_argument("--dev-src", help="with --layer dev: 'src ||| tgt' lines, or the source side of a dev set")
    p.add_argument("--dev-tgt", help="with --layer dev: the dev set's target side (line-aligned with --dev-src)")
    p.add_argument("--dev-gold", help="with --layer dev: the dev set's gold links (see --gold-format)")
    p.add_argument("--gold", help="gold links for the input pairs: print the AER, precision, recall and F1 of the "
                                  "written links")
    p.add_argument("--gold-format", choices=("pharaoh", "sid"), default="pharaoh",
                   help="gold files: 'i-j'/'ipj' per line (pharaoh) or 'sid i j [S|P]' lines (sid)")
    p.add_argument("--gold-word-base", type=int, choices=(0, 1), default=0, help="word indices of the gold files")
    p.add_argument("--gold-sid-base", type=int, choices=(0, 1), default=0,
                   help="sid format: the sentence id of the first line")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_align)

    p = sub.add_parser("report", help="Markdown + self-contained HTML report of one or more runs' evaluations")
    p.add_argument("run_dirs", nargs="*", help="run output dirs (each with eval/*/results.json); with "
                                               "--finished-runs: key.sub=value overrides of its config")
    p.add_argument("--out", help="output dir (default: <first run>/report; with --finished-runs: required, it gets "
                                 "config.yaml, eval/<model>/results.json and report/)")
    p.add_argument("--finished-runs", metavar="CONFIG",
                   help="report a comparison under way from the finished-run records of CONFIG's "
                        "evaluate.finished_runs (no model is read; each task says which runs are still to come)")
    p.add_argument("--records", action="append", default=[], metavar="DIR",
                   help="with --finished-runs: another series' record directory (repeatable); each model's records "
                        "come whole from the first directory that has any for it, evaluate.finished_runs first")
    p.set_defaults(func=cmd_report)

    data = sub.add_parser("data", help="data: check files, prepare Arrow, stats")
    dsub = data.add_subparsers(dest="data_command", required=True)
    p = dsub.add_parser("prepare", help="tokenize a config's corpora into sharded Arrow datasets")
    _add_config_args(p)
    p.set_defaults(func=cmd_prepare)
    p = dsub.add_parser("stats", help="per-language sizes and alpha-sampling probabilities")
    _add_config_args(p)
    p.set_defaults(func=cmd_stats)
    p = dsub.add_parser("check", help="validate one input file and count its items")
    p.add_argument("path")
    p.add_argument("--format", choices=CHECK_FORMATS, required=True)
    p.add_argument("--tgt", help="target side of a line-aligned parallel pair, or the .dict.dz of a FreeDict")
    p.add_argument("--text-field", default="text")
    p.add_argument("--skip-bad", action="store_true", help="skip (and count) bad lines instead of stopping")
    p.set_defaults(func=cmd_check)

    from metaxlm.cli_models import register as register_models

    register_models(sub)

    from metaxlm.cli_configs import register as register_configs

    register_configs(sub)

    from metaxlm.cli_plan import register as register_plan

    register_plan(sub, _add_config_args, _load)

    vocab = sub.add_parser("vocab", help="shared vocabulary: train, trim")
    vsub = vocab.add_subparsers(dest="vocab_command", required=True)
    p = vsub.add_parser("train", help="train (or load, with vocab.mode=load) the shared vocabulary of a config")
    _add_config_args(p)
    p.set_defaults(func=cmd_vocab_train)
    p = vsub.add_parser("trim", help="keep only the pieces a corpus uses (writes trim_map.json: new id -> old id, "
                                     "and the source tokenizer in untrimmed/)")
    p.add_argument("--tokenizer", required=True, help="HF tokenizer dir with sentencepiece.bpe.model")
    p.add_argument("--corpus", nargs="+", required=True, help="text/JSONL files, dirs or Arrow dirs")
    p.add_argument("--out", required=True)
    p.add_argument("--min-count", type=int, default=1)
    p.add_argument("--skip-bad", action="store_true")
    p.set_defaults(func=cmd_vocab_trim)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    # overrides may also come after options (`run cfg.yaml --no-progress vocab.size=8000`)
    if rest and hasattr(args, "overrides") and all("=" in r and not r.startswith("-") for r in rest):
        args.overrides = [*args.overrides, *rest]
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    # an option taking several values (`--languages en de`) also takes the overrides after it: `key=value` is an
    # override, never a language
    if getattr(args, "languages", None) and hasattr(args, "overrides"):
        args.overrides = [*args.overrides, *(v for v in args.languages if "=" in v)]
        args.languages = [v for v in args.languages if "=" not in v] or None
    try:
        with sigterm_raises():
            _one_voice(args)
            args.func(args)
    except RunStopped as err:  # the process group is broken: print the line and exit now
        exit_stopped(str(err))
    except MetaXLMError as err:
        print(f"metaxlm: error: {label(str(err))}", file=sys.stderr, flush=True)
        return 2
    except BrokenPipeError:  # `metaxlm configs list | head`: the reader has gone, so nothing is left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nor at exit, when Python flushes stdout
        return 141  # 128 + SIGPIPE, what the shell reports for a writer whose pipe closed
    except KeyboardInterrupt:
        print(f"metaxlm: {label(_stopped('interrupted', args))}", file=sys.stderr, flush=True)
        return 130
    except Terminated:
        print(f"metaxlm: {label(_stopped('terminated (SIGTERM)', args))}", file=sys.stderr, flush=True)
        return 143  # 128 + SIGTERM, what the shell reports for a process SIGTERM ended
    return 0


def _stopped(what: str, args) -> str:
    """One line: how the command stopped and, where a rerun resumes its work, how (metaxlm.run.resume)."""
    from metaxlm.run.resume import how_to_resume

    hint = how_to_resume(args)
    return f"{what}; {hint}" if hint else what


def _one_voice(args) -> None:
    """Under torchrun / accelerate launch only rank 0 prints, shows progress and warns; an error on any rank is
    still printed, labelled with its rank (see metaxlm.run.processes)."""
    if world_size() == 1:
        return
    quiet_other_ranks()
    if not is_main() and hasattr(args, "no_progress"):
        args.no_progress = True
    default_hook = sys.excepthook

    def labelled(kind, value, tb):  # an unexpected error: say which rank before the traceback
        print(f"metaxlm: {label('unexpected error')}:", file=sys.stderr, flush=True)
        default_hook(kind, value, tb)

    sys.excepthook = labelled


if __name__ == "__main__":
    sys.exit(main())
