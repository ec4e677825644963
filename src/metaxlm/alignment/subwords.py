"""Sub-word tokens of pre-split sentences and their words; padded batches of sentence pairs; sub-word links
to word links (two sub-words aligned ⇒ their words aligned).

The word of each sub-word comes from the fast tokenizer (`is_split_into_words=True`, `word_ids()`), which
works the same for sentencepiece (XLM-R) and WordPiece (BERT) vocabularies. Special tokens and bare '▁'
pieces (sentencepiece emits one before many words, e.g. punctuation and CJK; it carries no word content) stay
in the encoder input but are left out of the alignment problem. A sentence longer than the model's positions is
split into chunks encoded separately (each with the special tokens), so every word keeps its states.
The encoder run itself is the caller's (evaluation: `features.alignment.token_states`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch.nn.utils.rnn import pad_sequence

from metaxlm.errors import ConfigError

__all__ = ["BARE_PIECE", "PairBatch", "bare_piece_ids", "WordPieces", "pair_batch", "word_links", "word_pieces"]

BARE_PIECE = "▁"  # sentencepiece's word-boundary marker on its own


@dataclass
class WordPieces:
    """One sentence as encoder rows (usually one; several chunks when too long) and its alignable tokens."""

    rows: list[list[int]] = field(default_factory=list)  # input ids with special tokens
    spans: list[tuple[int, int]] = field(default_factory=list)  # per row: [start, end) of the sentence tokens
    keep: list[int] = field(default_factory=list)  # positions (in the sentence tokens) that take part in alignment
    words: list[int] = field(default_factory=list)  # the word index of each kept token


def bare_piece_ids(tokenizer) -> set[int]:
    """The id of sentencepiece's bare '▁' piece (no word content), if the vocabulary has one."""
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
    bare = bare_piece_ids(tokenizer)
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


@dataclass
class PairBatch:
    """A padded batch of sentence pairs: the token similarity matrices and the word of every token."""

    sim: torch.Tensor  # (batch, m, n) dot products of source and target token states (cosines for unit vectors)
    mask: torch.Tensor  # (batch, m, n) True on the real (source token, target token) cells
    src_words: torch.Tensor  # (batch, m) word index of each source token, -1 on padding
    tgt_words: torch.Tensor  # (batch, n)


def pair_batch(src_states: Sequence[torch.Tensor], tgt_states: Sequence[torch.Tensor],
               src_words: Sequence[torch.Tensor], tgt_words: Sequence[torch.Tensor]) -> PairBatch:
    """Pad per-pair token states ((tokens, hidden) each) and word indices ((tokens,) long each) into one batch."""
    if not len(src_states) == len(tgt_states) == len(src_words) == len(tgt_words):
        raise ValueError(f"pair_batch needs as many states as word lists on each side, got {len(src_states)}, "
                         f"{len(tgt_states)}, {len(src_words)}, {len(tgt_words)}")
    src = pad_sequence(list(src_states), batch_first=True)
    tgt = pad_sequence(list(tgt_states), batch_first=True)
    src_word = pad_sequence(list(src_words), batch_first=True, padding_value=-1)
    tgt_word = pad_sequence(list(tgt_words), batch_first=True, padding_value=-1)
    mask = (src_word >= 0).unsqueeze(2) & (tgt_word >= 0).unsqueeze(1)
    return PairBatch(torch.bmm(src, tgt.transpose(1, 2)), mask, src_word, tgt_word)


def word_links(token_links: torch.Tensor, src_words: torch.Tensor,
               tgt_words: torch.Tensor) -> list[set[tuple[int, int]]]:
    """0-based (source word, target word) links per pair from boolean (batch, m, n) sub-word links: two sub-words
    aligned ⇒ their words aligned. `src_words` (batch, m) and `tgt_words` (batch, n) as in `PairBatch`."""
    result: list[set[tuple[int, int]]] = [set() for _ in range(token_links.shape[0])]
    b, i, j = (token_links & (src_words >= 0).unsqueeze(2) & (tgt_words >= 0).unsqueeze(1)).nonzero(as_tuple=True)
    for q, x, y in zip(b.tolist(), src_words[b, i].tolist(), tgt_words[b, j].tolist(), strict=True):
        result[q].add((x, y))
    return result
