"""Reorganizing VECO's modules for fine-tuning (Luo et al. §2.3), as standard HF classes — never a private format.

NLU (`export_encoder`, in metaxlm.models.archs.veco: the arch's own export): the self-attention + FFN stack with the
embeddings and MLM head, cross-attention thrown out, as a plain `BertForMaskedLM` directory: `AutoModel` /
`AutoModelForMaskedLM` / the task Auto classes load it without metaxlm, so `metaxlm finetune` / `evaluate` / the probes
work on it unchanged. Its IS-MLM outputs are the VECO model's (same weights, same modules, same masks).

A VECO pretraining run writes (`Veco.export`, called by the engine):

    pretrain/<variant>/final/            the NLU export (BertForMaskedLM + tokenizer): what every stage reads
    pretrain/<variant>/final/veco/       the full VECO model (VecoForMaskedLM + tokenizer; loads with
                                         AutoModelForMaskedLM after `import metaxlm.models`): the input of
                                         `assemble_seq2seq` and of `start_from` for continued VECO training
    pretrain/<variant>/ckpt/step_*/      VECO weights (exact resume), as for every arch

NLG (`assemble_seq2seq`): an `EncoderDecoderModel` with a `BertModel` encoder (self-attention + FFN of ALL layers)
and a `BertLMHeadModel` decoder (`is_decoder`, `add_cross_attention`) made of a chosen subset of the layers with all
three modules. `decoder_layers: n` takes the LAST n layers (the paper's "predominant" choice, §5.1: the last layers
"play a more important role in making predictions over the whole vocabulary"; default 6 as in the paper's
Table 3, or all when the model has fewer); a list picks layers by index, bottom to top. `init`:
  veco     the decoder's self-attention, cross-attention and FFN are the VECO layers' (cross-attention new only for a
           chosen layer that has none in the VECO model);
  encoder  every module copied from a plain BERT-style encoder (e.g. the NLU export, or any MLM model) in both
           halves, the decoder's cross-attention new (random) — the "same encoder weights in both halves" baseline;
  random   the same shapes, every weight fresh (seeded): the randomly initialized Transformer baseline.
Both halves get the VECO (or encoder) embeddings; the decoder's LM head is the MLM head, tied to the decoder's word
embeddings. Token ids: decoder_start_token_id = CLS/<s> (every training side starts with it), eos = SEP/</s>,
pad = the tokenizer's, set on the config and the generation config, so `generate()` (greedy or beam) and
`from_pretrained` (EncoderDecoderModel or AutoModelForSeq2SeqLM) work on the saved directory.

Departure (HF limitation): in the paper's shared-module model the encoder and decoder read ONE embedding matrix. An
`EncoderDecoderModel` cannot declare a tie between its encoder's and its decoder's embeddings that survives
`save_pretrained` / `from_pretrained` (its tie mechanism is per sub-model), so the assembled model's encoder and
decoder embeddings START equal but are separate parameters; the decoder's output layer IS tied to the decoder's
input embeddings (BertLMHeadModel's own tie, kept on reload). `tie_encoder_decoder_embeddings(model)` shares them
in memory for fine-tuning (the Trainer must then save with `save_seq2seq`, which writes the shared matrix twice so
the directory still loads with the stock class). Those two, and the special-token ids, are any encoder-decoder's, not
VECO's: they live in metaxlm.models.seq2seq.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch
from torch import nn

from metaxlm.errors import ConfigError
from metaxlm.models.arch import arch_of
from metaxlm.models.archs.veco import bert_config_of, encoder_state, is_veco, load_veco, veco_from_encoder
from metaxlm.models.loading import load_model_config, load_pretrained, quiet_transformers
from metaxlm.models.new_parameters import mark_new
from metaxlm.models.seq2seq import encoder_decoder, generation_ids

Init = Literal["veco", "encoder", "random"]
DEFAULT_DECODER_LAYERS = 6


# -- NLG ---------------------------------------------------------------------------------------------------------
def chosen_layers(n_layers: int, decoder_layers: int | list[int] | None) -> list[int]:
    """Decoder layer k ← model layer chosen[k]: the last n (an int; capped at the model's depth) or a list."""
    if decoder_layers is None:
        decoder_layers = DEFAULT_DECODER_LAYERS
    if isinstance(decoder_layers, int) and not isinstance(decoder_layers, bool):
        if decoder_layers < 1:
            raise ConfigError(f"decoder_layers must be at least 1, got {decoder_layers}")
        return list(range(max(0, n_layers - decoder_layers), n_layers))
    layers = [int(i) for i in decoder_layers]
    if not layers or any(not 0 <= i < n_layers for i in layers) or layers != sorted(set(layers)):
        raise ConfigError(f"decoder_layers {decoder_layers}: give distinct increasing layer indices in "
                          f"0..{n_layers - 1}, or a number of last layers")
    return layers


def _load_source(source, init: Init):
    """(model, tokenizer or None) of `source` (a model or a directory) for `init`."""
    if isinstance(source, nn.Module):
        return source, None
    from transformers import AutoModelForMaskedLM, AutoTokenizer


    path = Path(source)
    config = load_model_config(path)  # before the tokenizer, which reads config.json unchecked
    tokenizer = AutoTokenizer.from_pretrained(str(path)) if (path / "tokenizer_config.json").exists() else None
    if init == "veco":
        return load_veco(path), tokenizer
    with quiet_transformers():
        if any(a.endswith(("ForMaskedLM", "ForPreTraining")) for a in config.architectures or []):
            return load_pretrained(AutoModelForMaskedLM, path), tokenizer
        from transformers import AutoModel

        return load_pretrained(AutoModel, path), tokenizer


def assemble_seq2seq(source, tokenizer=None, decoder_layers: int | list[int] | None = DEFAULT_DECODER_LAYERS,
                     init: Init = "veco", seed: int = 0, vocabulary_rows: list[int] | None = None):
    """A `transformers.EncoderDecoderModel` (BertModel encoder, BertLMHeadModel decoder with cross-attention)
    assembled from `source` — a VECO model or directory (a VECO run's final/ is fine) for `init: veco`; any HF
    BERT-style encoder or MLM (incl. a VECO model: its cross-attention is ignored) for `encoder` and `random`
    (`random` only reads the shapes). `tokenizer`: for the special token ids (default: the one saved beside
    `source`). New weights (cross-attention, pooler, everything for `random`) are drawn under `seed`.
    `vocabulary_rows`: keep only these rows of the source's vocabulary (new id k = old id rows[k]) in both halves'
    embeddings and the output layer, for a `tokenizer` trimmed to them (metaxlm.vocab.trim.trimmed_tokenizer)."""
    from transformers import BertLMHeadModel, BertModel


    if init not in ("veco", "encoder", "random"):
        raise ConfigError(f"init must be veco, encoder or random, got {init!r}")
    model, saved_tokenizer = _load_source(source, init)
    tokenizer = tokenizer if tokenizer is not None else saved_tokenizer
    if tokenizer is None:
        raise ConfigError("assemble_seq2seq: give the tokenizer (the source directory has none)")
    if init == "veco" and not is_veco(model):
        raise ConfigError(f"init veco needs a VECO model (got model type {model.config.model_type!r}); use "
                          f"init: encoder for a plain encoder")
    # one layout for every init: a VECO model (a plain encoder converted: cross-attention absent → new below)
    veco = model if is_veco(model) else veco_from_encoder(model, cross_attention_layers=[], seed=seed)
    if vocabulary_rows is not None:
        arch_of(veco).select_vocabulary(veco, list(vocabulary_rows))
    n = veco.config.num_hidden_layers
    layers = chosen_layers(n, decoder_layers)
    ids = generation_ids(tokenizer)
    bos, eos, pad = ids["bos_token_id"], ids["eos_token_id"], ids["pad_token_id"]
    enc_config = bert_config_of(veco.config, architectures=["BertModel"], bos_token_id=bos, eos_token_id=eos,
                                pad_token_id=pad)
    dec_config = bert_config_of(veco.config, architectures=["BertLMHeadModel"], num_hidden_layers=len(layers),
                                is_decoder=True, add_cross_attention=True, bos_token_id=bos, eos_token_id=eos,
                                pad_token_id=pad)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        encoder, decoder = BertModel(enc_config, add_pooling_layer=True), BertLMHeadModel(dec_config)
    new: list[str] = []  # the parameters the source did not give (fine-tuning's head_lr_scale applies to them)
    if init == "random":
        new = [f"encoder.{k}" for k, _ in encoder.named_parameters()] + \
            [f"decoder.{k}" for k, _ in decoder.named_parameters()]
    else:
        state = {k.removeprefix("bert."): v for k, v in encoder_state(veco).items() if k.startswith("bert.")}
        missing, unexpected = encoder.load_state_dict(state, strict=False)
        if [k for k in missing if not k.startswith("pooler.")] or unexpected:
            raise RuntimeError(f"internal error: encoder does not fit (missing {missing}, unexpected {unexpected})")
        new += [f"encoder.{k}" for k in missing]
        dec_state = {f"bert.embeddings.{k}": v for k, v in veco.bert.embeddings.state_dict().items()}
        dec_state.update({f"cls.{k}": v for k, v in veco.cls.state_dict().items()})
        for k, i in enumerate(layers):
            source_layer = veco.bert.encoder.layer[i]
            for key, value in source_layer.state_dict().items():
                if key.startswith("crossattention.") and init != "veco":
                    continue  # init encoder: cross-attention new
                dec_state[f"bert.encoder.layer.{k}.{key}"] = value
        missing, unexpected = decoder.load_state_dict(dec_state, strict=False)
        new_ok = (".crossattention.", "cls.predictions.decoder.")
        if [k for k in missing if not any(s in k for s in new_ok)] or unexpected:
            raise RuntimeError(f"internal error: decoder does not fit (missing {missing}, unexpected {unexpected})")
        new += [f"decoder.{k}" for k in missing if "cls.predictions.decoder." not in k]  # that one is tied
        decoder.tie_weights()
    seq2seq = encoder_decoder(encoder, decoder, ids)
    seq2seq.metaxlm_decoder_layers = layers  # for the caller's report (not saved)
    mark_new(seq2seq, new)  # as load_model marks a task head
    return seq2seq.eval()
