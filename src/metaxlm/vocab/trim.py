"""Trim a sentencepiece vocabulary to the pieces a corpus uses, and record how ids were remapped.

A 250k-piece XLM-R vocabulary makes the embedding and output layers dominate a small CPU model; keeping
only the pieces seen in the training corpus shrinks them without changing how that corpus is
tokenized: unigram Viterbi picks the best segmentation among the available pieces, and every piece of
that segmentation is kept, so the best path is unchanged. `trim_map.json` lists, for every new id, its
old id, so embedding rows can be copied from a model that used the old vocabulary; `untrimmed/` keeps the
old tokenizer those old ids belong to.

The trim is a training vocabulary: a model continued on the trimmed ids is the start model with its MLM output
softmax (and random-replacement tokens) restricted to the corpus pieces, at the cost of a model of the trimmed
size. What a run exports is `vocab.export`: by default the start's full vocabulary, the trained rows put back at
their old ids (metaxlm.pretrain.vocabulary), so that pieces the corpus never used are not `<unk>` afterwards.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from tqdm import tqdm

from metaxlm.errors import DataError
from metaxlm.io import atomic_dir, atomic_write_json
from metaxlm.vocab.load import SPM_FILE, load_tokenizer, save_spm_as_hf

TRIM_MAP = "trim_map.json"
UNTRIMMED_DIR = "untrimmed"  # the source tokenizer, whose ids trim_map.json's old ids are


def count_pieces(tokenizer, texts: Iterable[str], batch_size: int = 1000, progress: bool = True) -> Counter:
    counts: Counter = Counter()
    batch: list[str] = []
    bar = tqdm(desc="count pieces", unit=" texts", disable=not progress)
    for text in texts:
        batch.append(text)
        if len(batch) == batch_size:
            for ids in tokenizer(batch, add_special_tokens=False)["input_ids"]:
                counts.update(ids)
            bar.update(len(batch))
            batch = []
    if batch:
        for ids in tokenizer(batch, add_special_tokens=False)["input_ids"]:
            counts.update(ids)
        bar.update(len(batch))
    bar.close()
    return counts


def trim_vocab(tokenizer_dir: str | Path, texts: Iterable[str], out_dir: str | Path, *, min_count: int = 1,
               progress: bool = True) -> dict:
    """Keep special pieces and every piece seen at least `min_count` times; write an HF tokenizer dir with
    trim_map.json and a copy of the source tokenizer in `untrimmed/`."""
    from sentencepiece import sentencepiece_model_pb2 as sp_pb2

    src = Path(tokenizer_dir)
    spm_path = src / SPM_FILE
    if not spm_path.exists():
        raise DataError(src, None, f"trimming needs a sentencepiece tokenizer directory (no {SPM_FILE} here)")
    old = load_tokenizer(src)
    counts = count_pieces(old, texts, progress=progress)

    proto = sp_pb2.ModelProto()
    proto.ParseFromString(spm_path.read_bytes())
    if proto.trainer_spec.model_type != sp_pb2.TrainerSpec.UNIGRAM:
        raise DataError(spm_path, None, "only unigram sentencepiece models can be trimmed exactly")
    old_vocab = old.get_vocab()
    kept = []
    for piece in proto.pieces:
        # Control/unknown pieces define the id layout; the rest stay only if the corpus used them.
        special = piece.type != sp_pb2.ModelProto.SentencePiece.NORMAL
        if special or counts[old_vocab.get(piece.piece, -1)] >= min_count:
            kept.append(piece)
    del proto.pieces[:]
    proto.pieces.extend(kept)

    with atomic_dir(out_dir) as tmp:
        (Path(tmp) / SPM_FILE).write_bytes(proto.SerializeToString())
        new = save_spm_as_hf(Path(tmp) / SPM_FILE, tmp, model_max_length=old.model_max_length)
        new_vocab = new.get_vocab()
        new_to_old = [old_vocab[piece] for piece, _ in sorted(new_vocab.items(), key=lambda kv: kv[1])]
        info = {"source": str(src), "old_vocab_size": len(old), "new_vocab_size": len(new),
                "min_count": min_count, "new_to_old": new_to_old}
        atomic_write_json(Path(tmp) / TRIM_MAP, info)
        # the source tokenizer alone (`tokenizer_dir` may be a whole model directory), for full-vocabulary exports
        untrimmed = Path(tmp) / UNTRIMMED_DIR
        old.save_pretrained(str(untrimmed))
        shutil.copyfile(spm_path, untrimmed / SPM_FILE)
    return {k: v for k, v in info.items() if k != "new_to_old"}


def trimmed_tokenizer(tokenizer, texts: Iterable[str], *, min_count: int = 1) -> tuple[object, list[int]]:
    """(`tokenizer` trimmed to the pieces `texts` use, new id -> old id): `trim_vocab` on the directory the tokenizer
    was loaded from (it must hold its sentencepiece model), for a model whose vocabulary rows are then selected
    (e.g. a translation model's output layer kept to the pair's pieces). The texts tokenize exactly as before."""
    import json
    import tempfile

    source = Path(getattr(tokenizer, "name_or_path", "") or ".")
    if not (source / SPM_FILE).exists():
        raise DataError(source, None, f"a trimmed vocabulary needs the tokenizer's sentencepiece model ({SPM_FILE}) "
                                      f"in the directory it was loaded from "
                                      f"(metaxlm's exports hold it; else copy it there)")
    with tempfile.TemporaryDirectory(prefix="metaxlm-trim-") as tmp:
        out = Path(tmp) / "vocab"
        trim_vocab(source, texts, out, min_count=min_count, progress=False)
        new_to_old = json.loads((out / TRIM_MAP).read_text(encoding="utf-8"))["new_to_old"]
        trimmed = load_tokenizer(out)
    if len(trimmed) != len(new_to_old):
        raise DataError(source, None, "internal error: the trimmed tokenizer does not match its trim map")
    return trimmed, new_to_old
