"""How a vocabulary spells its pieces: word-start markers (sentencepiece "▁word", WordPiece "##cont",
byte-level BPE "Ġword") and which ids are special tokens."""

from __future__ import annotations

from dataclasses import dataclass

from metaxlm.transfer.tokenizer_rules import find_nodes, tokenizer_json

__all__ = ["SPECIALS", "PieceScheme", "scheme_of", "special_ids"]


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
class PieceScheme:
    """How a vocabulary spells word starts: metaspace ("▁word"), wordpiece ("##cont") or byte-level ("Ġword")."""

    kind: str  # "metaspace" | "wordpiece" | "bytelevel"
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


def scheme_of(tok) -> PieceScheme:
    """The scheme of a tokenizer, read from its tokenizers JSON (model, pre-tokenizer, decoder)."""
    spec = tokenizer_json(tok)
    model = spec.get("model") or {}
    if model.get("type") == "WordPiece":
        return PieceScheme("wordpiece", model.get("continuing_subword_prefix") or "##")
    around = [spec.get("pre_tokenizer"), spec.get("decoder"), spec.get("normalizer")]
    if find_nodes(around, "ByteLevel"):
        return PieceScheme("bytelevel", "Ġ")
    meta = find_nodes(around, "Metaspace")
    if meta:
        return PieceScheme("metaspace", meta[0].get("replacement", "▁"))
    if model.get("continuing_subword_prefix"):
        return PieceScheme("wordpiece", model["continuing_subword_prefix"])
    if spec:  # other tokenizers JSON (e.g. sentencepiece BPE with Replace/Prepend normalizers)
        return PieceScheme("metaspace", "▁")
    # A Python tokenizer: WordPiece if it has ## pieces, else sentencepiece-style.
    vocab = tok.get_vocab()
    return PieceScheme("wordpiece", "##") if any(p.startswith("##") for p in vocab) else PieceScheme("metaspace", "▁")


SPECIALS = [  # target attribute -> source attributes, first present wins
    ("cls_token_id", ("cls_token_id", "bos_token_id")),
    ("bos_token_id", ("cls_token_id", "bos_token_id")),
    ("sep_token_id", ("sep_token_id", "eos_token_id")),
    ("eos_token_id", ("sep_token_id", "eos_token_id")),
    ("pad_token_id", ("pad_token_id",)),
    ("unk_token_id", ("unk_token_id",)),
    ("mask_token_id", ("mask_token_id",)),
]


def special_ids(tok) -> set[int]:
    """Every special-token id of a tokenizer (all_special_ids and the ids named in SPECIALS)."""
    ids = set(getattr(tok, "all_special_ids", []) or [])
    for attr, _ in SPECIALS:
        i = getattr(tok, attr, None)
        if i is not None:
            ids.add(i)
    return ids
