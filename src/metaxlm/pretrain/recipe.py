"""Recipe: pretrain one variant of a run (`metaxlm pretrain CONFIG --variant NAME [--resume]`).

Reads the run's vocabulary and prepared data, builds the model (from scratch, or initialized from the
meta-pretrained English model through vocabulary matching), and hands it to the engine. Output:
`<output_dir>/pretrain/<variant>/` with ckpt/, metrics.jsonl, tb/, final/ and summary.json.
"""

from __future__ import annotations

from pathlib import Path

import torch

from metaxlm.config import ModelConfig, RunConfig
from metaxlm.errors import MetaXLMError
from metaxlm.pretrain.batches import load_prepared
from metaxlm.pretrain.engine import PretrainResult, pretrain


def build_mlm(cfg: ModelConfig, tokenizer, seed: int = 0):
    """A fresh BertForMaskedLM for `tokenizer` (decoder tied to the word embeddings, as HF declares)."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden, num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads, intermediate_size=cfg.ffn, max_position_embeddings=cfg.max_positions,
        hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.attention_dropout,
        layer_norm_eps=cfg.layer_norm_eps, pad_token_id=tokenizer.pad_token_id, type_vocab_size=2,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return BertForMaskedLM(config)


def variant_dir(cfg: RunConfig, variant: str) -> Path:
    return Path(cfg.output_dir) / "pretrain" / variant


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
    if transfer.init != "none" or transfer.freeze_body or transfer.distill:
        raise MetaXLMError(f"variant {variant!r}: initialization from the meta-pretrained model is not wired yet")
    return pretrain(model=model, tokenizer=tokenizer, train_data=train_data, heldout_data=heldout, cfg=cfg.train,
                    alpha=cfg.data.alpha, seed=cfg.seed, out_dir=variant_dir(cfg, variant), resume=resume,
                    progress=progress)
