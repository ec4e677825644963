"""Sub-word tokens of pre-split sentences, their words, and their hidden states per layer.

The word of each sub-word comes from the fast tokenizer (`is_split_into_words=True`, `word_ids()`), which
works the same for sentencepiece (XLM-R) and WordPiece (BERT) vocabularies. Special tokens and bare '▁'
pieces (sentencepiece emits one before many words, e.g. punctuation and CJK; it carries no word content) stay
in the encoder input but are left out of the alignment problem. A sentence longer than the model's positions is
split into chunks encoded separately (each with the special tokens), so every word keeps its states.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from tqdm import tqdm

from metaxlm.errors import ConfigError
from metaxlm.features.layers import LayerRunner, inference, length_sorted_batches, pad_batch, pad_id

BARE_PIECE = "▁"  # sentencepiece's word-boundary marker on its own


@dataclass
class WordPieces:
    """One sentence as encoder rows (usually one; several chunks when too long) and its alignable tokens."""

    rows: list[list[int]] = field(default_factory=list)  # input ids with special tokens
    spans: list[tuple[int, int]] = field(default_factory=list)  # per row: [start, end) of the sentence tokens
    keep: list[int] = field(default_factory=list)  # positions (in the sentence tokens) that take part in alignment
    words: list[int] = field(default_factory=list)  # the word index of each kept token


def _bare_piece_ids(tokenizer) -> set[int]:
    token_id = tokenizer.convert_tokens_to_ids(BARE_PIECE)
    return set() if token_id is None or token_id == tokenizer.unk_token_id else {token_id}


def word_pieces(tokenizer, sentences: Sequence[Sequence[str]], limit: int) -> list[WordPieces]:
    """Tokenize pre-split sentences; rows hold at most `limit` tokens (longer sentences are chunked, with one
    warning for the whole call)."""
    if not getattr(tokenizer, "is_fast", False):
        raise ConfigError(f"word alignment needs a fast tokenizer (word_ids), got {type(tokenizer).__name__}")
    out = [WordPieces() for _ in sentences]
    todo = [k for k, words in enumerate(sentences) if len(words)]
    if not todo:
        return out
    enc = tokenizer([list(sentences[k]) for k in todo], is_split_into_words=True, add_special_tokens=True)
    bare = _bare_piece_ids(tokenizer)
    n_chunked = 0
    for row, k in enumerate(todo):
        ids, word_ids = enc["input_ids"][row], enc.word_ids(row)
        inside = [p for p, w in enumerate(word_ids) if w is not None]
        if not inside:  # every word vanished in normalisation: nothing to align
            continue
        first, last = inside[0], inside[-1] + 1
        prefix, tokens, suffix = ids[:first], ids[first:last], ids[last:]
        window = limit - len(prefix) - len(suffix)
        if window < 1:
            raise ConfigError(f"the model takes {limit} tokens, fewer than its {len(prefix) + len(suffix)} specials")
        n_chunked += len(tokens) > window
        pieces = out[k]
        for start in range(0, len(tokens), window):
            chunk = tokens[start:start + window]
            pieces.rows.append(prefix + chunk + suffix)
            pieces.spans.append((len(prefix), len(prefix) + len(chunk)))
        for p, (token, word) in enumerate(zip(tokens, word_ids[first:last], strict=True)):
            if word is not None and token not in bare:
                pieces.keep.append(p)
                pieces.words.append(word)
    if n_chunked:
        warnings.warn(f"{n_chunked} of {len(sentences)} sentences are longer than the model's {limit} positions: "
                      f"encoded in chunks of {limit} tokens", stacklevel=3)
    return out


def token_states(model, tokenizer, sentences: Sequence[WordPieces], layers: Sequence[int], *, batch_size: int = 64,
                 precision: str = "auto", progress: bool = False) -> dict[int, list[torch.Tensor]]:
    """{layer: [per sentence (n_kept_tokens, hidden) unit vectors]} from one forward pass per batch of rows."""
    rows = [(k, r) for k, s in enumerate(sentences) for r in range(len(s.rows))]
    lengths = [len(sentences[k].rows[r]) for k, r in rows]
    parts: dict[int, dict[tuple[int, int], torch.Tensor]] = {layer: {} for layer in layers}
    runner = LayerRunner(model, layers)
    with inference(model, precision):
        for batch in tqdm(length_sorted_batches(lengths, batch_size), desc="encode", unit="batch",
                          disable=not progress):
            input_ids, attention_mask = pad_batch([sentences[rows[b][0]].rows[rows[b][1]] for b in batch],
                                                  pad_id(tokenizer))
            for layer, states in runner(input_ids, attention_mask).items():
                for position, b in enumerate(batch):
                    k, r = rows[b]
                    start, end = sentences[k].spans[r]
                    parts[layer][k, r] = states[position, start:end].cpu().clone()  # not a view of the padded batch
    hidden = model.config.hidden_size
    out: dict[int, list[torch.Tensor]] = {}
    for layer in layers:
        out[layer] = []
        for k, s in enumerate(sentences):
            tokens = [parts[layer][k, r] for r in range(len(s.rows))]
            states = torch.cat(tokens)[s.keep] if tokens else torch.zeros(0, hidden)
            out[layer].append(F.normalize(states, dim=-1))  # unit vectors: dot products are cosines
    return out
