"""What a (source) tokenizer does to text before it looks pieces up: its normalizer, and which characters
its pre-tokenization always makes a word of their own.

Read from the tokenizer's backend (its tokenizers JSON) or, for a Python ("slow") tokenizer, from its
attributes; nothing here tokenizes, so the rules apply to piece texts as well as to dictionary words.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable

__all__ = ["find_nodes", "is_cjk", "is_punct", "normalizer_for", "splits_cjk", "splits_punct", "strip_accents",
           "tokenizer_json"]


def tokenizer_json(tok) -> dict:
    """The tokenizers JSON of a fast tokenizer; {} for a Python tokenizer."""
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        return {}
    return json.loads(backend.to_str())


def find_nodes(spec, kind: str) -> list[dict]:
    """All JSON nodes of a given type, anywhere in a tokenizers JSON (sub)tree."""
    found = []
    if isinstance(spec, dict):
        if spec.get("type") == kind:
            found.append(spec)
        for v in spec.values():
            found.extend(find_nodes(v, kind))
    elif isinstance(spec, list):
        for v in spec:
            found.extend(find_nodes(v, kind))
    return found


# --- the normalizer ---------------------------------------------------------------------------------------

def strip_accents(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def _clean_text(text: str) -> str:
    """BertNormalizer(clean_text): drop NUL, U+FFFD and control characters; whitespace becomes a space."""
    out = []
    for c in text:
        if c in "\x00\ufffd":
            continue
        if c in "\t\n\r" or unicodedata.category(c) == "Zs":
            out.append(" ")
        elif unicodedata.category(c) in ("Cc", "Cf"):
            continue
        else:
            out.append(c)
    return "".join(out)


def _steps_from_json(spec: dict | None, obj) -> list[Callable[[str], str]]:
    """Python steps for a tokenizers normalizer JSON node; an unknown node type runs the real component."""
    if not spec:
        return []
    kind = spec.get("type")
    if kind == "Sequence":
        steps: list[Callable[[str], str]] = []
        for i, sub in enumerate(spec.get("normalizers", [])):
            try:
                sub_obj = obj[i] if obj is not None else None
            except (TypeError, IndexError):
                sub_obj = None
            steps.extend(_steps_from_json(sub, sub_obj))
        return steps
    if kind == "BertNormalizer":
        steps = []
        if spec.get("clean_text", True):
            steps.append(_clean_text)
        lowercase = bool(spec.get("lowercase", True))
        strip = spec.get("strip_accents")
        if lowercase if strip is None else strip:  # BERT: strip_accents follows lowercase unless set
            steps.append(strip_accents)
        if lowercase:
            steps.append(str.lower)
        return steps  # handle_chinese_chars pads CJK with spaces: see splits_cjk
    if kind == "Lowercase":
        return [str.lower]
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        return [lambda s, form=kind: unicodedata.normalize(form, s)]
    if kind == "StripAccents":
        return [lambda s: "".join(c for c in s if unicodedata.category(c) != "Mn")]
    if kind == "Strip":
        left, right = spec.get("strip_left", True), spec.get("strip_right", True)
        if left and right:
            return [str.strip]
        return [str.lstrip] if left else [str.rstrip] if right else []
    if kind == "Prepend":
        return []  # only marks word starts; pieces are compared without markers
    if obj is not None and hasattr(obj, "normalize_str"):
        return [obj.normalize_str]  # Precompiled (sentencepiece charsmap), Replace, ...
    return []


def normalizer_for(tok) -> Callable[[str], str]:
    """A function doing to text what the tokenizer's normalizer does (without CJK padding).

    Read from the tokenizer's backend normalizer (its tokenizers JSON): BertNormalizer (clean_text,
    strip_accents -- which follows `lowercase` when unset -- and lowercase), Lowercase, NFC/NFD/NFKC/NFKD,
    StripAccents, Strip and Sequences of them; other components (e.g. a sentencepiece Precompiled
    charsmap) run through the component itself. A Python (slow) tokenizer is read from its
    `do_lower_case` / `strip_accents` attributes. Uncased BERT: "Café" -> "cafe"; cased: unchanged.
    """
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is not None:
        steps = _steps_from_json(tokenizer_json(tok).get("normalizer"), backend.normalizer)
    else:
        basic = getattr(tok, "basic_tokenizer", tok)
        lowercase = bool(getattr(basic, "do_lower_case", getattr(tok, "do_lower_case", False)))
        strip = getattr(basic, "strip_accents", None)
        steps = []
        if lowercase if strip is None else strip:
            steps.append(strip_accents)
        if lowercase:
            steps.append(str.lower)

    def normalize(text: str) -> str:
        for step in steps:
            text = step(text)
        return text

    return normalize


# --- characters the pre-tokenization isolates ---------------------------------------------------------------

def splits_cjk(tok) -> bool:
    """Does the tokenizer make every CJK ideograph a word of its own (BERT's handle_chinese_chars)?"""
    spec = tokenizer_json(tok)
    if spec:
        return any(n.get("handle_chinese_chars", True) for n in find_nodes(spec.get("normalizer"), "BertNormalizer"))
    return bool(getattr(tok, "tokenize_chinese_chars", False))


def splits_punct(tok) -> bool:
    """Does the tokenizer make every punctuation character a word of its own (BertPreTokenizer, Punctuation)?"""
    spec = tokenizer_json(tok)
    if spec:
        pre = spec.get("pre_tokenizer")
        return bool(find_nodes(pre, "BertPreTokenizer") or find_nodes(pre, "Punctuation"))
    return hasattr(tok, "basic_tokenizer")


def is_punct(c: str) -> bool:
    """BERT's `_is_punctuation`: ASCII symbols and every Unicode P* character."""
    cp = ord(c)
    return (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
            or unicodedata.category(c).startswith("P"))


def is_cjk(c: str) -> bool:
    """The CJK ideograph ranges BERT splits on (`_is_chinese_char`); kana and hangul are not in them."""
    cp = ord(c)
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)
