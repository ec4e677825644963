"""The one model architecture metaxlm trains: BERT with a masked-LM head, sized by a `ModelConfig`.

Every stage (meta-pretraining, transfer, evaluation) builds its model here, so checkpoints stay
interchangeable: `BertForMaskedLM`, decoder tied to the word embeddings, SDPA attention.
"""

from __future__ import annotations

import torch

from metaxlm.config import ModelConfig  # the schema lives with the other run configs


def bert_config(cfg: ModelConfig, vocab_size: int, pad_token_id: int):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size, hidden_size=cfg.hidden, num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads,
        intermediate_size=cfg.ffn, max_position_embeddings=cfg.max_positions, hidden_dropout_prob=cfg.dropout,
        attention_probs_dropout_prob=cfg.attention_dropout, layer_norm_eps=cfg.layer_norm_eps,
        pad_token_id=pad_token_id, type_vocab_size=2, tie_word_embeddings=True, attn_implementation="sdpa",
    )


def build_mlm(cfg: ModelConfig, tokenizer, seed: int = 0):
    """A freshly initialised `BertForMaskedLM` for `tokenizer`; the same seed gives the same weights."""
    from transformers import BertForMaskedLM

    config = bert_config(cfg, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    # fork_rng: seeding must not disturb the caller's global RNG stream (data order, dropout).
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return BertForMaskedLM(config)
