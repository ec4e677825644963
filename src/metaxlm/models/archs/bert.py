"""`model.arch: bert`: a BERT encoder with a masked-LM head (HF `BertForMaskedLM`), decoder tied to the word
embeddings, SDPA attention. It also handles the RoBERTa family (RoBERTa, XLM-R: `*ForMaskedLM` with `lm_head`),
so any such HF directory can be continued or probed."""

from __future__ import annotations

import copy

import torch
from torch import nn

from metaxlm.models.arch import ARCHS, ModelArch


def bert_config(cfg, vocab_size: int, pad_token_id: int):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size, hidden_size=cfg.hidden, num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads,
        intermediate_size=cfg.ffn, max_position_embeddings=cfg.max_positions, hidden_dropout_prob=cfg.dropout,
        attention_probs_dropout_prob=cfg.attention_dropout, layer_norm_eps=cfg.layer_norm_eps,
        pad_token_id=pad_token_id, type_vocab_size=2, tie_word_embeddings=True, attn_implementation="sdpa",
    )


@ARCHS.register("bert")
class Bert(ModelArch):
    model_types = ("bert", "roberta", "xlm-roberta", "camembert")

    def build(self, cfg, tokenizer, seed: int = 0) -> nn.Module:
        from transformers import BertForMaskedLM

        return BertForMaskedLM(bert_config(cfg, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id))

    def mlm_head(self, model: nn.Module) -> nn.Module:
        return model.cls if hasattr(model, "cls") else model.lm_head  # BERT: cls; the RoBERTa family: lm_head

    def layers(self, model: nn.Module) -> nn.ModuleList:
        return model.base_model.encoder.layer

    def output_bias(self, model: nn.Module) -> torch.Tensor | None:
        if not (hasattr(model, "cls") or hasattr(model, "lm_head")):
            return None  # a bare encoder (BertModel): no MLM head
        head = self.mlm_head(model)
        return getattr(getattr(head, "predictions", head), "bias", None)

    def truncated_encoder(self, model: nn.Module, n_layers: int) -> nn.Module:
        base = model.base_model
        clone, encoder = _shallow_copy(base), _shallow_copy(base.encoder)
        encoder.layer = nn.ModuleList(list(base.encoder.layer)[:n_layers])
        clone.encoder = encoder
        if getattr(clone, "pooler", None) is not None:
            clone.pooler = None  # nothing reads the pooled output of a truncated encoder
        return clone


def _shallow_copy(module: nn.Module) -> nn.Module:
    """A new module object sharing parameters and submodules, whose own submodule table can be changed."""
    clone = copy.copy(module)
    clone._modules = dict(module._modules)
    return clone
