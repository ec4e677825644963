"""An HF encoder-decoder (`transformers.EncoderDecoderModel`) as metaxlm builds, shares and saves it — for any
architecture's seq2seq assembly (VECO's is metaxlm.models.veco_export.assemble_seq2seq).

- `generation_ids(tokenizer)`: the special-token ids every training side and `generate()` use: decoder start =
  CLS/<s> (a BERT-style tokenizer's sentence start), eos = SEP/</s>, pad = the tokenizer's.
- `encoder_decoder(encoder, decoder, ids)`: the pair as one `EncoderDecoderModel`, the ids set on its config and its
  generation config, so `generate()` (greedy or beam) and `from_pretrained` (EncoderDecoderModel or
  AutoModelForSeq2SeqLM) work on the saved directory.
- `tie_encoder_decoder_embeddings` / `save_seq2seq`: one word-embedding matrix for both halves, in memory, and a
  save that still loads with the stock class (an `EncoderDecoderModel` cannot declare that tie itself: its tie
  mechanism is per sub-model, so the shared matrix is written under both names).
"""

from __future__ import annotations

from pathlib import Path

from metaxlm.errors import ConfigError
from metaxlm.io import atomic_dir
from metaxlm.models.loading import quiet_transformers
from metaxlm.vocab.load import save_tokenizer


def generation_ids(tokenizer) -> dict[str, int]:
    """bos / eos / pad / decoder-start token ids of `tokenizer` (cls and sep first: BERT-style tokenizers)."""
    bos = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    eos = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    pad = tokenizer.pad_token_id
    if bos is None or eos is None or pad is None:
        raise ConfigError("assemble_seq2seq: the tokenizer needs cls/bos, sep/eos and pad tokens")
    return {"bos_token_id": bos, "eos_token_id": eos, "pad_token_id": pad, "decoder_start_token_id": bos}


def encoder_decoder(encoder, decoder, ids: dict[str, int]):
    """`EncoderDecoderModel(encoder, decoder)` with `ids` (generation_ids) on its config and generation config and
    the decoder's vocabulary size as its own."""
    from transformers import EncoderDecoderModel, GenerationConfig

    seq2seq = EncoderDecoderModel(encoder=encoder, decoder=decoder)
    for key, value in ids.items():
        setattr(seq2seq.config, key, value)
    seq2seq.config.vocab_size = decoder.config.vocab_size
    seq2seq.generation_config = GenerationConfig(**ids)
    return seq2seq


def tie_encoder_decoder_embeddings(seq2seq) -> None:
    """Share ONE word-embedding matrix between encoder, decoder input and decoder output, in memory (the paper's
    shared embeddings). Save such a model with `save_seq2seq` (see the module docstring)."""
    seq2seq.decoder.bert.embeddings.word_embeddings = seq2seq.encoder.embeddings.word_embeddings
    seq2seq.decoder.tie_weights()


def save_seq2seq(seq2seq, tokenizer, out_dir: str | Path) -> Path:
    """Write an assembled (or fine-tuned) encoder-decoder + tokenizer to `out_dir` (replaced atomically); the
    directory loads with `EncoderDecoderModel.from_pretrained` / `AutoModelForSeq2SeqLM.from_pretrained`."""
    out = Path(out_dir)
    shared = seq2seq.decoder.bert.embeddings.word_embeddings is seq2seq.encoder.embeddings.word_embeddings
    # a shared encoder/decoder matrix is written under both names (cloned) so the stock class loads it
    state = {k: v.clone() for k, v in seq2seq.state_dict().items()} if shared else None
    with atomic_dir(out) as tmp, quiet_transformers():  # no "Writing model shards" bar
        seq2seq.save_pretrained(str(tmp), state_dict=state)
        if tokenizer is not None:
            save_tokenizer(tokenizer, tmp)
    return out
