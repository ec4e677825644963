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
                     source word; all matched translations are averaged;
5. ``fallback``   -- nothing matched (empty `sources`); `initialize_from_source` decides (random / mean).

Only source pieces the source can produce are matched: a piece its own normalizer changes ("Haus" in an
uncased vocabulary) never occurs in its training data, so its embedding is untrained.

Characters the source always isolates: BERT makes every CJK ideograph (``handle_chinese_chars``) and
every punctuation character (BertPreTokenizer) a word of its own, so its "##東" / "##." pieces are never
used; a single such character matches the source's word piece "東" / "." from either target position
("▁東" and "東"). A piece that the source's pre-tokenization would split into several words ("▁東京" ->
東 京, "),"), when neither the rules above nor the dictionary match it and every word is in the source
vocabulary, gets the mean of those words (rule ``normalized``, last before fallback).
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from metaxlm.errors import DataError, MetaXLMError
from metaxlm.io import atomic_write_json, atomic_write_text

__all__ = [
    "RULES", "VocabMatch", "coverage_report", "dictionaries_in", "load_dictionaries", "match_vocab",
    "normalizer_for", "write_coverage_report",
]

RULES = ("special", "exact", "normalized", "dict", "fallback")


@dataclass
class VocabMatch:
    """For every target id: the source ids whose embeddings are averaged, and the rule that matched."""

    sources: list[list[int]]  # per TARGET id; empty = unmatched
    rules: list[str]  # per target id: one of RULES
    target_pieces: list[str] = field(default_factory=list)  # optional, for reports
    source_pieces: list[list[str]] = field(default_factory=list)  # optional: the pieces behind `sources`

    def __post_init__(self):
        if len(self.sources) != len(self.rules):
            raise MetaXLMError(f"VocabMatch: {len(self.sources)} source lists but {len(self.rules)} rules")
        bad = sorted({r for r in self.rules if r not in RULES})
        if bad:
            raise MetaXLMError(f"VocabMatch: unknown rule(s) {bad}; expected one of {list(RULES)}")

    def __len__(self) -> int:
        return len(self.sources)

    def counts(self) -> dict[str, int]:
        """Number of target pieces (types) per rule, every rule listed."""
        c = Counter(self.rules)
        return {rule: c.get(rule, 0) for rule in RULES}

    def to_json(self) -> dict:
        return {"sources": self.sources, "rules": self.rules, "target_pieces": self.target_pieces,
                "source_pieces": self.source_pieces}

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> VocabMatch:
        try:
            obj = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(sources=[[int(i) for i in s] for s in obj["sources"]], rules=list(obj["rules"]),
                       target_pieces=list(obj.get("target_pieces", [])),
                       source_pieces=[list(s) for s in obj.get("source_pieces", [])])
        except FileNotFoundError:
            raise DataError(path, None, "no such vocabulary-match file") from None
        except (ValueError, KeyError, TypeError) as err:
            raise DataError(path, None, f"not a vocabulary-match file: {err}") from None
        except MetaXLMError as err:
            raise DataError(path, None, str(err)) from None


# --- what the source tokenizer does to text -------------------------------------------------------------

def _strip_accents(text: str) -> str:
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
            steps.append(_strip_accents)
        if lowercase:
            steps.append(str.lower)
        return steps  # handle_chinese_chars pads CJK with spaces: see _splits_cjk
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


def _tokenizer_json(tok) -> dict:
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        return {}
    return json.loads(backend.to_str())


def normalizer_for(src_tokenizer) -> Callable[[str], str]:
    """A function doing to text what the source tokenizer's normalizer does (without CJK padding).

    Read from the tokenizer's backend normalizer (its tokenizers JSON): BertNormalizer (clean_text,
    strip_accents -- which follows `lowercase` when unset -- and lowercase), Lowercase, NFC/NFD/NFKC/NFKD,
    StripAccents, Strip and Sequences of them; other components (e.g. a sentencepiece Precompiled
    charsmap) run through the component itself. A Python (slow) tokenizer is read from its
    `do_lower_case` / `strip_accents` attributes. Uncased BERT: "Café" -> "cafe"; cased: unchanged.
    """
    backend = getattr(src_tokenizer, "backend_tokenizer", None)
    if backend is not None:
        steps = _steps_from_json(_tokenizer_json(src_tokenizer).get("normalizer"), backend.normalizer)
    else:
        basic = getattr(src_tokenizer, "basic_tokenizer", src_tokenizer)
        lowercase = bool(getattr(basic, "do_lower_case", getattr(src_tokenizer, "do_lower_case", False)))
        strip = getattr(basic, "strip_accents", None)
        steps = []
        if lowercase if strip is None else strip:
            steps.append(_strip_accents)
        if lowercase:
            steps.append(str.lower)

    def normalize(text: str) -> str:
        for step in steps:
            text = step(text)
        return text

    return normalize


def _find_nodes(spec, kind: str) -> list[dict]:
    """All JSON nodes of a given type, anywhere in a tokenizers JSON (sub)tree."""
    found = []
    if isinstance(spec, dict):
        if spec.get("type") == kind:
            found.append(spec)
        for v in spec.values():
            found.extend(_find_nodes(v, kind))
    elif isinstance(spec, list):
        for v in spec:
            found.extend(_find_nodes(v, kind))
    return found


def _splits_cjk(tok) -> bool:
    """Does the tokenizer make every CJK ideograph a word of its own (BERT's handle_chinese_chars)?"""
    spec = _tokenizer_json(tok)
    if spec:
        return any(n.get("handle_chinese_chars", True) for n in _find_nodes(spec.get("normalizer"), "BertNormalizer"))
    return bool(getattr(tok, "tokenize_chinese_chars", False))


def _splits_punct(tok) -> bool:
    """Does the tokenizer make every punctuation character a word of its own (BertPreTokenizer, Punctuation)?"""
    spec = _tokenizer_json(tok)
    if spec:
        pre = spec.get("pre_tokenizer")
        return bool(_find_nodes(pre, "BertPreTokenizer") or _find_nodes(pre, "Punctuation"))
    return hasattr(tok, "basic_tokenizer")


def _is_punct(c: str) -> bool:
    """BERT's `_is_punctuation`: ASCII symbols and every Unicode P* character."""
    cp = ord(c)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or unicodedata.category(c).startswith("P")


def _is_cjk(c: str) -> bool:
    """The CJK ideograph ranges BERT splits on (`_is_chinese_char`); kana and hangul are not in them."""
    cp = ord(c)
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


# --- how pieces mark word starts -------------------------------------------------------------------------

def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map used by byte-level BPE."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs), strict=True))


_BYTE_DECODER = {c: b for b, c in _bytes_to_unicode().items()}


@dataclass(frozen=True)
class _Scheme:
    """How a vocabulary spells word starts: metaspace ("▁word"), wordpiece ("##cont") or byte-level ("Ġword")."""

    kind: str
    marker: str

    def split(self, piece: str) -> tuple[bool, str | None]:
        """(is word start, the piece's text without marker); text None when it is not valid text."""
        if self.kind == "wordpiece":
            if piece.startswith(self.marker) and len(piece) > len(self.marker):
                return False, piece[len(self.marker):]
            return True, piece
        if self.kind == "bytelevel":
            try:
                text = bytes(_BYTE_DECODER[c] for c in piece).decode("utf-8")
            except (KeyError, UnicodeDecodeError):
                return not piece.startswith("Ġ"), None
            return (True, text[1:]) if text.startswith(" ") else (False, text)
        if piece.startswith(self.marker):
            return True, piece[len(self.marker):].replace(self.marker, " ")
        return False, piece.replace(self.marker, " ")


def _scheme_of(tok) -> _Scheme:
    spec = _tokenizer_json(tok)
    model = spec.get("model") or {}
    if model.get("type") == "WordPiece":
        return _Scheme("wordpiece", model.get("continuing_subword_prefix") or "##")
    around = [spec.get("pre_tokenizer"), spec.get("decoder"), spec.get("normalizer")]
    if _find_nodes(around, "ByteLevel"):
        return _Scheme("bytelevel", "Ġ")
    meta = _find_nodes(around, "Metaspace")
    if meta:
        return _Scheme("metaspace", meta[0].get("replacement", "▁"))
    if model.get("continuing_subword_prefix"):
        return _Scheme("wordpiece", model["continuing_subword_prefix"])
    if spec:  # other tokenizers JSON (e.g. sentencepiece BPE with Replace/Prepend normalizers)
        return _Scheme("metaspace", "▁")
    # A Python tokenizer: WordPiece if it has ## pieces, else sentencepiece-style.
    vocab = tok.get_vocab()
    return _Scheme("wordpiece", "##") if any(p.startswith("##") for p in vocab) else _Scheme("metaspace", "▁")


# --- dictionaries ------------------------------------------------------------------------------------------

def dictionaries_in(directory: str | Path, langs: Iterable[str] | None = None) -> dict[str, Path]:
    """{lang: path} for the `en-<lang>.txt[.xz|.gz]` dictionaries in a directory (e.g. data/demo/dict)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DataError(directory, None, "no such dictionary directory")
    found: dict[str, Path] = {}
    for p in sorted(directory.glob("en-*.txt*")):
        lang = p.name.split(".", 1)[0].removeprefix("en-")
        found.setdefault(lang, p)
    if langs is not None:
        missing = [lang for lang in langs if lang not in found]
        if missing:
            raise DataError(directory, None, f"no en-<lang> dictionary for {missing}")
        found = {lang: found[lang] for lang in langs}
    return found


def load_dictionaries(dictionaries: Mapping[str, str | Path | Mapping[str, list[str]]],
                      normalize: Callable[[str], str] = lambda s: s) -> dict[str, list[str]]:
    """Foreign word (normalized) -> its English translations, over all languages.

    A value is either the path of an en-xx dictionary (lines "english<TAB>foreign", as read by
    `read_muse_dict`; inverted here) or an in-memory {foreign: [english, ...]} mapping. Multi-word
    foreign entries are dropped (a piece is never a phrase); translation order is kept, duplicates dropped.
    """
    from metaxlm.data.readers import read_muse_dict

    out: dict[str, list[str]] = {}

    def add(foreign: str, english: str) -> None:
        key = normalize(unicodedata.normalize("NFKC", foreign)).strip()
        english = english.strip()
        if not key or not english or any(c.isspace() for c in key):
            return
        lst = out.setdefault(key, [])
        if english not in lst:
            lst.append(english)

    for _lang, value in dictionaries.items():
        if isinstance(value, Mapping):
            for foreign, translations in value.items():
                for english in ([translations] if isinstance(translations, str) else translations):
                    add(foreign, english)
        else:
            for english, foreign in read_muse_dict(value):
                add(foreign, english)
    return out


# --- matching ----------------------------------------------------------------------------------------------

_SPECIALS = [  # target attribute -> source attributes, first present wins
    ("cls_token_id", ("cls_token_id", "bos_token_id")),
    ("bos_token_id", ("cls_token_id", "bos_token_id")),
    ("sep_token_id", ("sep_token_id", "eos_token_id")),
    ("eos_token_id", ("sep_token_id", "eos_token_id")),
    ("pad_token_id", ("pad_token_id",)),
    ("unk_token_id", ("unk_token_id",)),
    ("mask_token_id", ("mask_token_id",)),
]


def _special_ids(tok) -> set[int]:
    ids = set(getattr(tok, "all_special_ids", []) or [])
    for attr, _ in _SPECIALS:
        i = getattr(tok, attr, None)
        if i is not None:
            ids.add(i)
    return ids


class _SourceIndex:
    """Source pieces by (word start, text) -- raw, and normalized (NFKC + the source's normalizer).

    Only pieces the source can produce are indexed: a piece its own normalizer would change is skipped.
    """

    def __init__(self, src_tokenizer):
        self.scheme = _scheme_of(src_tokenizer)
        self.norm = normalizer_for(src_tokenizer)
        self.splits_cjk = _splits_cjk(src_tokenizer)
        self.splits_punct = _splits_punct(src_tokenizer)
        specials = _special_ids(src_tokenizer)
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
        return (self.splits_cjk and _is_cjk(c)) or (self.splits_punct and _is_punct(c))

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
        """A whole source word (word-start piece) for an English word: exact, else normalized."""
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
    src = _SourceIndex(src_tokenizer)
    tgt_scheme = _scheme_of(tgt_tokenizer)
    n_tgt = len(tgt_tokenizer)
    tgt_pieces = [str(p) for p in tgt_tokenizer.convert_ids_to_tokens(list(range(n_tgt)))]
    id_to_src = {i: p for p, i in src_tokenizer.get_vocab().items()}
    translations = load_dictionaries(dictionaries, src.norm) if (use_dict and dictionaries) else {}

    sources: list[list[int]] = [[] for _ in range(n_tgt)]
    rules = ["fallback"] * n_tgt

    tgt_specials = _special_ids(tgt_tokenizer)
    for tgt_attr, src_attrs in _SPECIALS:
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
            for english in translations.get(src.key(text), ()):
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


# --- coverage ----------------------------------------------------------------------------------------------

def _share(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def coverage_report(match: VocabMatch, tgt_tokenizer=None,
                    token_counts: Mapping[str, Counter | Mapping[int, int] | Mapping[str, int]] | None = None,
                    *, n_examples: int = 8) -> dict:
    """How the target vocabulary was initialized: per rule over the whole vocabulary, and per language.

    `token_counts`: {lang: counts of target ids (or pieces) over that language's corpus}. Per language
    the report gives, per rule, the share of the language's piece TYPES (pieces seen at least once) and
    of its TOKENS (frequency-weighted).
    """
    n = len(match)
    counts = match.counts()
    pieces = match.target_pieces or (
        [str(p) for p in tgt_tokenizer.convert_ids_to_tokens(list(range(n)))] if tgt_tokenizer is not None else [])
    report: dict = {
        "vocab_size": n,
        "rules": {rule: {"types": counts[rule], "share": _share(counts[rule], n)} for rule in RULES},
    }
    if pieces:
        examples: dict[str, list[str]] = {rule: [] for rule in RULES}
        for t, rule in enumerate(match.rules):
            if len(examples[rule]) < n_examples and pieces[t] and rule != "special":
                src = match.source_pieces[t] if t < len(match.source_pieces) else [str(i) for i in match.sources[t]]
                examples[rule].append(f"{pieces[t]} -> {', '.join(src)}" if src else pieces[t])
        report["examples"] = {rule: ex for rule, ex in examples.items() if ex}
    if token_counts:
        piece_to_id = {p: i for i, p in enumerate(pieces)}
        languages = {}
        for lang, lang_counts in token_counts.items():
            types = Counter()
            tokens = Counter()
            for key, c in lang_counts.items():
                if c <= 0:
                    continue
                t = piece_to_id.get(key) if isinstance(key, str) else int(key)
                if t is None or not 0 <= t < n:
                    raise MetaXLMError(f"token counts for {lang!r}: {key!r} is not a target id or piece "
                                       f"(vocabulary of {n})")
                types[match.rules[t]] += 1
                tokens[match.rules[t]] += c
            n_types, n_tokens = sum(types.values()), sum(tokens.values())
            languages[lang] = {
                "types": n_types, "tokens": n_tokens,
                "rules": {rule: {"types": types[rule], "type_share": _share(types[rule], n_types),
                                 "tokens": tokens[rule], "token_share": _share(tokens[rule], n_tokens)}
                          for rule in RULES},
            }
        report["languages"] = languages
    return report


def _markdown(report: dict) -> str:
    lines = ["# Vocabulary matching coverage", "",
             f"Target vocabulary: {report['vocab_size']} pieces.", "",
             "| rule | pieces | share |", "|---|---:|---:|"]
    for rule, r in report["rules"].items():
        lines.append(f"| {rule} | {r['types']} | {100 * r['share']:.1f}% |")
    if report.get("languages"):
        lines += ["", "## Per language", "",
                  "Share of each language's piece types / tokens (frequency-weighted) initialized by each rule.", "",
                  "| language | types | tokens | " + " | ".join(RULES) + " |",
                  "|---|---:|---:|" + "---:|" * len(RULES)]
        for lang, lr in report["languages"].items():
            cells = [f"{100 * lr['rules'][rule]['type_share']:.1f}% / {100 * lr['rules'][rule]['token_share']:.1f}%"
                     for rule in RULES]
            lines.append(f"| {lang} | {lr['types']} | {lr['tokens']} | " + " | ".join(cells) + " |")
    if report.get("examples"):
        lines += ["", "## Examples", ""]
        for rule, ex in report["examples"].items():
            lines.append(f"- **{rule}**: " + "; ".join(f"`{e}`" for e in ex))
    return "\n".join(lines) + "\n"


def write_coverage_report(report: dict, path: str | Path) -> Path:
    """Write the report as JSON at `path` and as a Markdown table beside it (same name, .md); return the .md."""
    path = Path(path)
    atomic_write_json(path, report)
    md = path.with_suffix(".md")
    atomic_write_text(md, _markdown(report))
    return md
