"""Shared vocabulary: train a sentencepiece model over α-sampled text, load one, or trim one to a corpus."""

from metaxlm.vocab.load import load_tokenizer, save_spm_as_hf
from metaxlm.vocab.train import train_vocab
from metaxlm.vocab.trim import trim_vocab

__all__ = ["load_tokenizer", "save_spm_as_hf", "train_vocab", "trim_vocab"]
