"""`model.arch: bert`: a BERT encoder with a masked-LM head (HF `BertForMaskedLM`), decoder tied to the word
embeddings, SDPA attention. It also handles the RoBERTa family (RoBERTa, XLM-R: `*ForMaskedLM` with `lm_head`),
so any such HF directory can be continued or probed."""

from __future__ import annotations

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
