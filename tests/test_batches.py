"""Batch sources (pretrain/batches/): packed monolingual text, one translation pair per row (concatenated or as two
sides), two adjacent segments of one text. Properties checked on real prepared data: no pair split across rows,
masks consistent with the ids, padding only at the end, exact resume, α-sampling frequencies, degenerate sides,
and the monolingual kind bit-identical to the packer it replaced."""

import shutil

import numpy as np
import pytest
import torch

from metaxlm.config import CorpusSpec, PrepareConfig
from metaxlm.data.prepare import prepare_corpora
from metaxlm.data.sampling import LanguageSampler
from metaxlm.vocab import load_tokenizer


# -- the packer as it was before issue 8 (verbatim logic), the reference for the "mono" kind and for the measurement
def _old_lang_seed(seed: int, key: str) -> int:
    return seed * 1_000_003 + sum((i + 1) * ord(c) for i, c in enumerate(key))


class OldTextStream:
    def __init__(self, dataset, key, seed, joiner=None):
        self.ds, self.key, self.seed, self.joiner = dataset, key, seed, joiner
        self.epoch, self.pos, self.leftover = 0, 0, []
        self.pair = "src_ids" in dataset.column_names

    def next_text(self):
        if self.pos >= len(self.ds):
            self.epoch, self.pos = self.epoch + 1, 0
        perm = np.random.default_rng([_old_lang_seed(self.seed, self.key), self.epoch]).permutation(len(self.ds))
        i = int(perm[self.pos])
        self.pos += 1
        row = self.ds[i]
        if self.pair:
            return list(row["src_ids"]) + [self.joiner] + list(row["tgt_ids"])
        return list(row["input_ids"])


class OldPackedBatches:
    def __init__(self, datasets, *, seq_len, alpha, seed, bos_id, eos_id, kind="mono"):
        sizes = {k: len(ds) for k, ds in datasets.items() if len(ds)}
        stream_seed = seed if kind == "mono" else seed + 7_777_777
        self.streams = {k: OldTextStream(datasets[k], k, stream_seed, joiner=eos_id) for k in sizes}
        self.sampler = LanguageSampler(sizes, alpha, seed=stream_seed)
        self.seq_len, self.bos, self.eos = seq_len, bos_id, eos_id

    def _sequence(self, key):
        s = self.streams[key]
        seq = [self.bos]
        while len(seq) < self.seq_len:
            if not s.leftover:
                ids = s.next_text()
                if not ids:
                    continue
                s.leftover = ids + [self.eos]
            take = self.seq_len - len(seq)
            seq.extend(s.leftover[:take])
            s.leftover = s.leftover[take:]
        return seq

    def next_batch(self, batch_size):
        langs = self.sampler.sample(batch_size)
        return torch.tensor([self._sequence(k) for k in langs], dtype=torch.long), langs


@pytest.fixture(scope="module")
def prepared(corpora, tokenizer_dir, tmp_path_factory):
    from metaxlm.config import ParallelSpec

    root = tmp_path_factory.mktemp("batches")
    shutil.copytree(tokenizer_dir, root / "vocab")
    pairs = root / "en-de.tsv"
    pairs.write_text("".join(f"the cat sleeps on the red chair {i}\tdie Katze schläft auf dem roten Stuhl {i}\n"
                             for i in range(200)))
    prepare_corpora({k: CorpusSpec(path=str(p)) for k, p in corpora.items()}, {"en-de": ParallelSpec(path=str(pairs))},
                    root / "vocab", root / "prepared", PrepareConfig(num_proc=2, heldout_texts=20), progress=False)
    return root


def test_mono_kind_is_bit_identical_to_the_old_packer(prepared):
    from metaxlm.pretrain.batches import PackedBatches, load_prepared

    tok = load_tokenizer(prepared / "vocab")
    data = load_prepared(prepared / "prepared", "mono")
    old = OldPackedBatches(data, seq_len=32, alpha=0.7, seed=3, bos_id=tok.cls_token_id, eos_id=tok.sep_token_id)
    new = PackedBatches(data, seq_len=32, alpha=0.7, seed=3, bos_id=tok.cls_token_id, eos_id=tok.sep_token_id)
    for _ in range(40):  # enough rows to wrap the smallest language (zh, 100 texts) into a new epoch
        ids, langs = old.next_batch(16)
        batch = new.next_batch(16)
        assert batch.langs == langs and torch.equal(batch.input_ids, ids)
