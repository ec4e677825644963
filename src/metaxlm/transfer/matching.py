"""Match a target (multilingual) vocabulary to a source (English) vocabulary, piece by piece.

MetaXLM initializes the word embeddings of the multilingual model from the meta-pretrained English
model: every target piece gets the mean of the source embeddings it is matched to. For each target id,
in order, the first rule that applies wins:

1. ``special``    -- <s>/cls/bos -> [CLS], </s>/sep/eos -> [SEP], pad, unk, mask -> their source counterparts;
2. ``exact``      -- the same string in the same position: target word-start "▁house" <-> source
                     word-initial "house" (WordPiece) / "▁house" (sentencepiece) / "Ġhouse" (byte-level
                     BPE); target continuation "ing" <-> source "##ing" / "ing";
3. ``normalized`` -- markers stripped, Unicode NFKC, then the source tokenizer's own normalization
                     (`normalizer_for`: lowercase and accent folding for an uncased BERT), looked up in the
                     same position first, then in the other one;
4. ``dict``       -- (use_dict) a word-start piece whose normalized text is a foreign word of a bilingual
                     dictionary: its English translations, each matched exactly/normalized as a whole
                     source word; all matched translations are averaged. With a cased source both look-ups
                     also ignore case (`TranslationTable`, `SourceIndex.word`): MUSE entries are lower-case,
                     so "▁Fenster" finds "fenster" -> "window", and "germany" finds "Germany" when the
                     vocabulary has no "germany" (the dictionary's own spelling first);
5. ``fallback``   -- nothing matched (empty `sources`); `initialize_from_source` decides (random / mean).

Only source pieces the source can produce are matched: a piece its own normalizer changes ("Haus" in an
uncased vocabulary) never occurs in its training data, so its embedding is untrained.

Characters the source always isolates: BERT makes every CJK ideograph (``handle_chinese_chars``) and
every punctuation character (BertPreTokenizer) a word of its own, so its "##東" / "##." pieces are never
used; a single such character matches the source's word piece "東" / "." from either target position
("▁東" and "東"). A piece that the source's pre-tokenization would split into several words ("▁東京" ->
東 京, "),"), when neither the rules above nor the dictionary match it and every word is in the source
vocabulary, gets the mean of those words (rule ``normalized``, last before fallback).

Against the paper (MetaXLM, §3.2: "first directly search the word in the monolingual vocabulary, and then
search the normalized word"; with dictionaries, "first searching the word translation in the
dictionaries, and then applying the mapping strategy"), which leaves the details open:

- it speaks of words; here the units are pieces, matched in their position (word start / continuation),
  and only word-start pieces are looked up in a dictionary;
- "normalized" is not defined there; here it is NFKC plus the source tokenizer's own normalizer, so a
  normalized match is one the source itself would make (in the other position when the same one has none);
- its dictionary sentence can be read as translating every word first; here a piece is matched by itself
  first and the dictionary only serves pieces that match nothing, so a piece spelled like an English word
  keeps that word even where the dictionary translates it otherwise (German "Gift", poison -> "gift");
- several translations: the paper does not say; here the embeddings of all matched ones are averaged;
- special tokens by role, the case-insensitive dictionary look-up for cased sources, and the split into
  the source's own words are additions; the coverage report (`coverage`) shows what each rule contributed.

The parts live beside this module: `tokenizer_rules` (the source's normalizer and isolated characters),
`pieces` (word-start markers, special tokens), `dictionaries` (reading en-<lang> files, the case-insensitive
table), `vocab_match` (the result), `coverage` (the report of a result).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from pathlib import Path

from metaxlm.transfer.dictionaries import TranslationTable, load_dictionaries
from metaxlm.transfer.pieces import SPECIALS, scheme_of, special_ids
from metaxlm.transfer.tokenizer_rules import (
    is_cjk,
    is_punct,
    normalizer_for,
    splits_cjk,
    splits_punct,
)
from metaxlm.transfer.vocab_match import VocabMatch

__all__ = ["SourceIndex", "match_vocab"]


class SourceIndex:
    """Source pieces by (word start, text) -- raw, and normalized (NFKC + the source's normalizer).

    Only pieces the source can produce are indexed: a piece its own normalizer would change is skipped.
    """

    def __init__(self, src_tokenizer):
        self.scheme = scheme_of(src_tokenizer)
        self.norm = normalizer_for(src_tokenizer)
        self.splits_cjk = splits_cjk(src_tokenizer)
        self.splits_punct = splits_punct(src_tokenizer)
        # An uncased source lower-cases every text itself; a cased one needs the case variants of `word`.
        self.cased = self.key("A") != self.key("a")
        specials = special_ids(src_tokenizer)
        self.exact: dict[tuple[bool, str], int] = {}
        self.normalized: dict[tuple[bool, str], int] = {}
        self.unreachable = 0
        for piece, i in sorted(src_tokenizer.get_vocab().items(), key=lambda kv: kv[1]):
            if i in specials:
                continue
            ws, text = self.scheme.split(piece)
            if not text:
                continue
            if self.norm(text) != text:
                # e.g. "Haus" in an uncased vocabulary: the source never produces it, so its embedding was
                # never trained -- it matches nothing.
                self.unreachable += 1
                continue
            self.exact.setdefault((ws, text), i)
            key = self.key(text)
            if key:
                self.normalized.setdefault((ws, key), i)  # lowest id first

    def key(self, text: str) -> str:
        return self.norm(unicodedata.normalize("NFKC", text)).strip()

    def isolated(self, c: str) -> bool:
        """Is the character always a word of its own for the source (CJK ideographs and punctuation in BERT)?"""
        return (self.splits_cjk and is_cjk(c)) or (self.splits_punct and is_punct(c))

    def lookup(self, ws: bool, text: str) -> tuple[str, int] | None:
        """(rule, source id) for a piece text at a position: exact, else normalized (same position first)."""
        if len(text) == 1 and self.isolated(text):
            ws = True  # the source only ever sees this character as a word of its own
        if (ws, text) in self.exact:
            return "exact", self.exact[(ws, text)]
        key = self.key(text)
        if not key or any(c.isspace() for c in key):
            return None
        if len(key) == 1 and self.isolated(key):
            ws = True
        for position in (ws, not ws):
            if (position, key) in self.normalized:
                return "normalized", self.normalized[(position, key)]
        return None

    def word(self, text: str) -> int | None:
        """A whole source word (word-start piece) for an English word: exact, else normalized; for a cased
        source, then the same for its lower-case and its capitalised spelling ("germany" -> "Germany",
        "Cat" -> "cat"): the spelling of the dictionary first, so "window" never becomes "Window"."""
        variants = [text]
        if self.cased:
            variants += [v for v in (text.lower(), text[:1].upper() + text[1:]) if v != text]
        for variant in variants:
            found = self._word(variant)
            if found is not None:
                return found
        return None

    def _word(self, text: str) -> int | None:
        if (True, text) in self.exact:
            return self.exact[(True, text)]
        key = self.key(text)
        if key and not any(c.isspace() for c in key):
            return self.normalized.get((True, key))
        return None

    def split_words(self, ws: bool, text: str) -> list[int] | None:
        """Source pieces for a text the source's own pre-tokenization splits into several words, each of
        them in the source vocabulary (e.g. "東京" -> 東, 京 and "),"  -> ), , for BERT); else None."""
        key = self.key(text)
        if not key or any(c.isspace() for c in key):
            return None
        segments: list[str] = []
        current = ""
        for c in key:
            if self.isolated(c):
                segments += [current, c] if current else [c]
                current = ""
            else:
                current += c
        if current:
            segments.append(current)
        if len(segments) < 2:
            return None
        ids = []
        for k, segment in enumerate(segments):
            found = self.lookup(ws if k == 0 else True, segment)  # after an isolated character: a new word
            if found is None:
                return None
            ids.append(found[1])
        return ids


def match_vocab(src_tokenizer, tgt_tokenizer, *,
                dictionaries: Mapping[str, str | Path | Mapping[str, list[str]]] | None = None,
                use_dict: bool = True) -> VocabMatch:
    """Match every target id to source ids (see the module docstring for the rules and their order).

    `dictionaries`: {lang: path of an en-<lang> dictionary | {foreign: [english, ...]}}.
    """
    src = SourceIndex(src_tokenizer)
    tgt_scheme = scheme_of(tgt_tokenizer)
    n_tgt = len(tgt_tokenizer)
    tgt_pieces = [str(p) for p in tgt_tokenizer.convert_ids_to_tokens(list(range(n_tgt)))]
    id_to_src = {i: p for p, i in src_tokenizer.get_vocab().items()}
    translations = TranslationTable(load_dictionaries(dictionaries, src.norm) if (use_dict and dictionaries) else {},
                                    ignore_case=src.cased)

    sources: list[list[int]] = [[] for _ in range(n_tgt)]
    rules = ["fallback"] * n_tgt

    tgt_specials = special_ids(tgt_tokenizer)
    for tgt_attr, src_attrs in SPECIALS:
        t = getattr(tgt_tokenizer, tgt_attr, None)
        if t is None or not 0 <= t < n_tgt or rules[t] == "special":
            continue
        for attr in src_attrs:
            s = getattr(src_tokenizer, attr, None)
            if s is not None:
                sources[t], rules[t] = [s], "special"
                break

    for t, piece in enumerate(tgt_pieces):
        if t in tgt_specials:
            continue  # matched above, or a target-only special (language tag, ...): fallback
        ws, text = tgt_scheme.split(piece)
        if not text or not text.strip():
            continue
        found = src.lookup(ws, text)
        if found:
            rules[t], sources[t] = found[0], [found[1]]
            continue
        if translations and ws:
            ids: list[int] = []
            for english in translations.get(src.key(text)):
                i = src.word(english)
                if i is not None and i not in ids:
                    ids.append(i)
            if ids:
                rules[t], sources[t] = "dict", ids
                continue
        words = src.split_words(ws, text)
        if words:
            rules[t], sources[t] = "normalized", words

    return VocabMatch(sources=sources, rules=rules, target_pieces=tgt_pieces,
                      source_pieces=[[id_to_src.get(i, str(i)) for i in ids] for ids in sources])
