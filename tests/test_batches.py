"""Batch sources (pretrain/batches/): packed monolingual text, one translation pair per row (concatenated or as two
sides), two adjacent segments of one text. Properties checked on real prepared data: no pair split across rows,
masks consistent with the ids, padding only at the end, exact resume, α-sampling frequencies, degenerate sides,
and the monolingual kind bit-identical to the packer it replaced."""

import json
import random
import shutil
from collections import Counter
from types import SimpleNamespace

import datasets
import numpy as np
import pytest
import torch
from conftest import WORDS

from metaxlm.config import CorpusSpec, PrepareConfig
from metaxlm.data.prepare import prepare_corpora
from metaxlm.data.sampling import LanguageSampler, sampling_probs
from metaxlm.errors import ConfigError, DataError
from metaxlm.pretrain.batches import BATCH_SOURCES, Batch, load_prepared
from metaxlm.pretrain.batches.base import padded_length
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
    parallel = {}
    for lang, n in (("de", 200), ("ru", 60)):  # word-for-word "translations" of 2-14 words: distinct pairs
        rng, size = random.Random(n), min(len(WORDS["en"]), len(WORDS[lang]))
        picks = [[rng.randrange(size) for _ in range(rng.randint(2, 14))] for _ in range(n)]
        path = root / f"en-{lang}.tsv"
        path.write_text("".join(" ".join(WORDS["en"][j] for j in p) + "\t" + " ".join(WORDS[lang][j] for j in p) + "\n"
                                for p in picks))
        parallel[f"en-{lang}"] = ParallelSpec(path=str(path))
    prepare_corpora({k: CorpusSpec(path=str(p)) for k, p in corpora.items()}, parallel,
                    root / "vocab", root / "prepared", PrepareConfig(num_proc=2, heldout_texts=20), progress=False)
    return root


# Synthetic ids for tests that need exact control: source tokens < TGT0 <= target tokens, so the side of every
# token is known from its value alone (as it is not in the packed rows the measurement below inspects).
TOK = SimpleNamespace(cls_token_id=0, sep_token_id=2, pad_token_id=1)
SRC0, TGT0 = 1000, 100_000


def source(kind, data, *, seq_len=128, alpha=0.7, seed=0, tokenizer=TOK):
    return BATCH_SOURCES.get(kind)(data, seq_len=seq_len, alpha=alpha, seed=seed, tokenizer=tokenizer)


def synthetic_pairs(n, lengths, seed=0, empty_every=0):
    rng = random.Random(seed)
    src = [[SRC0 + rng.randrange(TGT0 - SRC0) for _ in range(rng.randint(*lengths))] for _ in range(n)]
    tgt = [[TGT0 + rng.randrange(TGT0) for _ in range(rng.randint(*lengths))] for _ in range(n)]
    for i in range(0, n, empty_every or n + 1):
        (src if i % 2 else tgt)[i] = []
    return datasets.Dataset.from_dict({"src_ids": src, "tgt_ids": tgt})


def pairs_of(ds):
    return [(tuple(s), tuple(t)) for s, t in zip(ds["src_ids"], ds["tgt_ids"], strict=True)]


def pair_set(ds):
    return set(pairs_of(ds))


def check_pair_rows(batch, tok, pairs, seq_len, *, truncated_ok=False):
    """Every row is exactly one pair of `pairs`: <s> src </s> tgt </s>, then padding only; side and attention
    mask agree with the ids. Returns the (src, tgt) of each row."""
    ids, mask, side = (batch.tensors[k] for k in ("input_ids", "attention_mask", "side"))
    assert ids.shape == mask.shape == side.shape and ids.dtype == mask.dtype == side.dtype == torch.long
    lengths = mask.sum(1)
    assert ids.shape[1] == padded_length(int(lengths.max()), seq_len) and (ids.shape[1] % 8 == 0
                                                                           or ids.shape[1] == seq_len)
    rows = []
    for i in range(len(ids)):
        n = int(lengths[i])
        assert mask[i, :n].all() and not mask[i, n:].any()  # padding only at the end
        assert (ids[i, n:] == tok.pad_token_id).all() and (side[i, n:] == -1).all()
        assert not (ids[i, :n] == tok.pad_token_id).any()
        src, tgt = ids[i][side[i] == 0].tolist(), ids[i][side[i] == 1].tolist()
        assert ids[i, :n].tolist() == [tok.cls_token_id, *src, tok.sep_token_id, *tgt, tok.sep_token_id]
        assert side[i, :n].tolist() == [-1] + [0] * len(src) + [-1] + [1] * len(tgt) + [-1]
        assert src and tgt
        if truncated_ok:  # a truncated pair keeps the start of both sides of ONE pair
            assert any(s[:len(src)] == tuple(src) and t[:len(tgt)] == tuple(tgt) for s, t in pairs)
        else:
            assert (tuple(src), tuple(tgt)) in pairs
        rows.append((tuple(src), tuple(tgt)))
    return rows


def check_sides(batch, tok, seq_len):
    """src/tgt tensors: <s> x </s> then padding only, masks consistent. Returns each row's (x, y) contents."""
    out = []
    for side in ("src", "tgt"):
        ids, mask = batch.tensors[f"{side}_ids"], batch.tensors[f"{side}_mask"]
        assert ids.shape == mask.shape and ids.shape[0] == len(batch) and ids.shape[1] <= seq_len
        lengths = mask.sum(1)
        assert ids.shape[1] == padded_length(int(lengths.max()), seq_len)
        contents = []
        for i in range(len(ids)):
            n = int(lengths[i])
            assert mask[i, :n].all() and not mask[i, n:].any() and (ids[i, n:] == tok.pad_token_id).all()
            assert n >= 3 and ids[i, 0] == tok.cls_token_id and ids[i, n - 1] == tok.sep_token_id
            body = ids[i, 1:n - 1].tolist()
            assert tok.pad_token_id not in body and tok.cls_token_id not in body and tok.sep_token_id not in body
            contents.append(tuple(body))
        out.append(contents)
    return list(zip(*out, strict=True))


def old_split_counts(rows):
    """The issue's measurement on rows of synthetic pairs: rows whose first token is a target token (the row
    starts inside a target, its source in another row) and rows whose last token is a source token (the row ends
    with a source whose translation is in another row)."""
    starts_in_target = ends_with_source = 0
    for row in rows.tolist():
        content = [t for t in row if t >= SRC0]
        starts_in_target += content[0] >= TGT0
        ends_with_source += content[-1] < TGT0
    return starts_in_target, ends_with_source


@pytest.fixture(scope="module")
def tok(prepared):
    return load_tokenizer(prepared / "vocab")


# -- kind "mono" ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.7, 0.0])
def test_mono_kind_is_bit_identical_to_the_old_packer(prepared, tok, alpha):
    data = load_prepared(prepared / "prepared", "mono")
    old = OldPackedBatches(data, seq_len=32, alpha=alpha, seed=3, bos_id=tok.cls_token_id, eos_id=tok.sep_token_id)
    new = source("mono", data, seq_len=32, alpha=alpha, seed=3, tokenizer=tok)
    for _ in range(40):
        ids, langs = old.next_batch(16)
        batch = new.next_batch(16)
        assert batch.kind == "mono" and set(batch.tensors) == {"input_ids"}
        assert batch.langs == langs and torch.equal(batch.input_ids, ids)
    if alpha == 0.0:  # uniform sampling: the comparison goes through reshuffles of the small languages
        assert new.streams["zh"].epoch >= 1


# -- kind "pair": the TLM defect -----------------------------------------------------------------------------------
def test_the_old_packing_split_pairs_and_pair_rows_never_do():
    """The issue's measurement (500 pairs of 15-30 tokens per side, seq_len 128, 32 rows): the old packer starts
    about half the rows inside a target and ends many with a source whose translation is elsewhere; kind "pair"
    has 0 and 0, every row being exactly one pair of the dataset."""
    ds = synthetic_pairs(500, (15, 30))
    old = OldPackedBatches({"en-de": ds}, seq_len=128, alpha=0.7, seed=0, bos_id=0, eos_id=2, kind="parallel")
    old_rows, _ = old.next_batch(32)
    starts, ends = old_split_counts(old_rows)
    assert starts >= 8 and ends >= 8  # measured: 16 and 18 of 32

    pair = source("pair", {"en-de": ds}, seq_len=128)
    batch = pair.next_batch(32)
    assert old_split_counts(batch.input_ids) == (0, 0)
    rows = check_pair_rows(batch, TOK, pair_set(ds), 128)
    assert len(set(rows)) == 32 and pair.stats == {"rows": 32, "truncated_pairs": 0, "skipped_empty_side": 0}


def is_translation(src_text: str, tgt_text: str, lang: str) -> bool:
    """The fixture's pairs are word-for-word: target word j is the word at source word j's index in the other list."""
    src, tgt = src_text.split(), tgt_text.split()
    if len(src) != len(tgt):
        return False
    translations = [{WORDS[lang][i] for i, e in enumerate(WORDS["en"][:len(WORDS[lang])]) if e == word} for word in src]
    return all(t in options for t, options in zip(tgt, translations, strict=True))


def test_pair_rows_on_prepared_data_are_whole_pairs(prepared, tok):
    data = load_prepared(prepared / "prepared", "parallel")
    by_lang = {k: pair_set(ds) for k, ds in data.items()}
    pair = source("pair", data, seq_len=64, tokenizer=tok)
    assert pair.kind == "pair" and pair.data == "parallel"
    seen = {k: [] for k in data}
    for _ in range(50):
        batch = pair.next_batch(8)
        assert batch.kind == "pair"
        rows = check_pair_rows(batch, tok, set().union(*by_lang.values()), 64)
        for lang, (src, tgt) in zip(batch.langs, rows, strict=True):
            assert (src, tgt) in by_lang[lang] and is_translation(tok.decode(src), tok.decode(tgt), lang.split("-")[1])
            seen[lang].append((src, tgt))
    for lang, ds in data.items():  # one epoch of a language pair draws each of its pairs exactly once
        assert len(seen[lang]) >= len(ds)
        assert Counter(seen[lang][:len(ds)]) == Counter(pairs_of(ds))
    assert pair.stats == {"rows": 400, "truncated_pairs": 0, "skipped_empty_side": 0}


def test_long_pairs_are_truncated_proportionally_and_counted():
    ds = datasets.Dataset.from_dict({
        "src_ids": [[SRC0 + i for i in range(40)], [SRC0 + 7], [SRC0 + i for i in range(3)],
                    [SRC0 + i for i in range(5)]],
        "tgt_ids": [[TGT0 + i for i in range(20)], [TGT0 + i for i in range(50)], [TGT0 + 9],
                    [TGT0 + i for i in range(4)]],
    })
    pairs = pair_set(ds)
    pair = source("pair", {"x-y": ds}, seq_len=16)
    batch = pair.next_batch(40)
    rows = check_pair_rows(batch, TOK, pairs, 16, truncated_ok=True)
    assert batch.input_ids.shape[1] == 16
    truncated = 0
    for src, tgt in rows:
        full_src, full_tgt = next((s, t) for s, t in pairs if s[:len(src)] == src and t[:len(tgt)] == tgt)
        if (len(src), len(tgt)) != (len(full_src), len(full_tgt)):
            truncated += 1
            assert len(src) + len(tgt) == 16 - 3  # a cut pair fills the row
            share = len(full_src) / (len(full_src) + len(full_tgt))
            assert abs(len(src) / 13 - share) <= 1 / 13 + 1e-9 or min(len(src), len(tgt)) == 1
    # 40:20 cut to 8:5, one-token sides kept
    assert {(len(s), len(t)) for s, t in rows} >= {(8, 5), (1, 12), (3, 1), (5, 4)}
    assert truncated and pair.stats["truncated_pairs"] == truncated


def test_pairs_with_an_empty_side_are_skipped_and_counted(tmp_path):
    ds = synthetic_pairs(40, (1, 6), empty_every=5)  # 8 of 40 pairs have an empty source or target
    usable = {p for p in pair_set(ds) if p[0] and p[1]}
    assert len(usable) == 32
    pair = source("pair", {"x-y": ds}, seq_len=32)
    first_epoch = check_pair_rows(pair.next_batch(32), TOK, usable, 32)
    assert set(first_epoch) == usable  # each usable pair exactly once, none with an empty side
    pair.next_batch(1)  # the first draw of the next epoch: every empty pair of the first one was passed over
    assert pair.stats["skipped_empty_side"] == 8

    sides = source("pair_sides", {"x-y": ds}, seq_len=32)
    assert set(check_sides(sides.next_batch(32), TOK, 32)) == usable

    none = datasets.Dataset.from_dict({"src_ids": [[5], []], "tgt_ids": [[], [6]]})
    none.save_to_disk(str(tmp_path / "x-y"))
    with pytest.raises(DataError, match="x-y.*all 2 pairs have an empty side"):
        source("pair", {"x-y": datasets.load_from_disk(str(tmp_path / "x-y"))})


def test_pair_sides_are_the_same_pairs_as_pair_rows(prepared, tok):
    data = load_prepared(prepared / "prepared", "parallel")
    pair, sides = source("pair", data, seq_len=64, tokenizer=tok), source("pair_sides", data, seq_len=64, tokenizer=tok)
    for _ in range(5):
        a, b = pair.next_batch(8), sides.next_batch(8)
        assert set(b.tensors) == {"src_ids", "src_mask", "tgt_ids", "tgt_mask", "swap"}
        pairs = set().union(*(pair_set(ds) for ds in data.values()))
        assert check_sides(b, tok, 64) == check_pair_rows(a, tok, pairs, 64) and a.langs == b.langs
        # the same order coin for the same pair (PPA: MoCo's query side and TLM's order agree)
        assert torch.equal(a.tensors["swap"], b.tensors["swap"])


def test_pair_sides_cut_long_sides_to_seq_len():
    ds = datasets.Dataset.from_dict({"src_ids": [[SRC0 + i for i in range(30)]], "tgt_ids": [[TGT0]]})
    sides = source("pair_sides", {"x-y": ds}, seq_len=8)
    batch = sides.next_batch(3)
    assert check_sides(batch, TOK, 8) == [(tuple(range(SRC0, SRC0 + 6)), (TGT0,))] * 3
    assert batch.tensors["src_ids"].shape == (3, 8) and batch.tensors["tgt_ids"].shape == (3, 8)
    assert sides.stats["truncated_pairs"] == 3


# -- kind "segments" -----------------------------------------------------------------------------------------------
def test_segments_are_two_adjacent_parts_of_one_text(prepared, tok):
    data = load_prepared(prepared / "prepared", "mono")
    texts = {k: {tuple(t) for t in ds["input_ids"]} for k, ds in data.items()}
    seg = source("segments", data, seq_len=32, tokenizer=tok)
    for _ in range(10):
        batch = seg.next_batch(16)
        assert batch.kind == "segments"
        for lang, (x, y) in zip(batch.langs, check_sides(batch, tok, 32), strict=True):
            assert x and y and x + y in texts[lang]  # the short test lines fit in one row: a row is one whole text
            n = len(x) + len(y)
            assert n // 4 <= len(x) <= n - n // 4  # cut in the middle half


def test_segments_walk_a_long_text_in_order_and_skip_unsplittable_ones():
    text = list(range(SRC0, SRC0 + 500))
    ds = datasets.Dataset.from_dict({"input_ids": [text, [SRC0 - 1], []]})
    seg = source("segments", {"xx": ds}, seq_len=16)
    parts = check_sides(seg.next_batch(20), TOK, 16)  # 18 windows of ~28 tokens cover the text, then it restarts
    walked = [t for x, y in parts for t in x + y]
    assert len(walked) > 500 and walked == (text * 2)[:len(walked)]  # nothing lost, nothing repeated
    assert all(1 <= len(x) <= 14 and 1 <= len(y) <= 14 for x, y in parts)
    assert 2 <= seg.stats["skipped_short_texts"] <= 4 and seg.stats["rows"] == 20  # the 1- and 0-token texts
    two = source("segments", {"xx": datasets.Dataset.from_dict({"input_ids": [[SRC0, SRC0 + 1]]})}, seq_len=8)
    assert check_sides(two.next_batch(2), TOK, 8) == [((SRC0,), (SRC0 + 1,))] * 2  # one token per segment
    with pytest.raises(DataError, match="no text has the 2 tokens"):
        source("segments", {"xx": datasets.Dataset.from_dict({"input_ids": [[5], [6]]})})


# -- every kind ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["mono", "pair", "pair_sides", "segments"])
def test_a_restored_source_continues_exactly(prepared, tok, kind):
    data = load_prepared(prepared / "prepared", BATCH_SOURCES.get(kind).data)
    make = lambda: source(kind, data, seq_len=24, seed=5, tokenizer=tok)  # noqa: E731
    run = make()
    for _ in range(7):
        run.next_batch(12)
    state = json.loads(json.dumps(run.state_dict()))  # as a checkpoint stores it
    resumed = make()
    resumed.load_state_dict(state)
    for _ in range(25):  # long enough to cross an epoch of the 200 pairs
        a, b = run.next_batch(12), resumed.next_batch(12)
        assert a.langs == b.langs and a.tensors.keys() == b.tensors.keys()
        assert all(torch.equal(a.tensors[k], b.tensors[k]) for k in a.tensors)
    assert run.stats == resumed.stats
    first = make().next_batch(12)  # the restored source did not simply start over
    assert not all(torch.equal(first.tensors[k], a.tensors[k]) for k in a.tensors)


@pytest.mark.parametrize("kind", ["pair", "pair_sides"])
def test_pairs_are_alpha_sampled_by_language_pair(kind):
    sizes = {"en-de": 400, "en-ru": 40, "en-zh": 4}
    data = {k: synthetic_pairs(n, (1, 3), seed=i) for i, (k, n) in enumerate(sizes.items())}
    src = source(kind, data, seq_len=16, alpha=0.5)
    langs = [lang for _ in range(20) for lang in src.next_batch(500).langs]
    probs = sampling_probs(sizes, 0.5)
    for k, p in probs.items():
        assert langs.count(k) / len(langs) == pytest.approx(p, abs=4 * (p * (1 - p) / len(langs)) ** 0.5)


def test_parallel_sources_do_not_change_the_mono_batches(prepared, tok):
    """The parallel kinds draw from their own seed offset; mono from the run's seed, as before issue 8."""
    mono = load_prepared(prepared / "prepared", "mono")
    par = load_prepared(prepared / "prepared", "parallel")
    alone = source("mono", mono, seq_len=32, seed=1, tokenizer=tok)
    beside = source("mono", mono, seq_len=32, seed=1, tokenizer=tok)
    pair = source("pair", par, seq_len=32, seed=1, tokenizer=tok)
    for _ in range(3):
        pair.next_batch(8)
        assert torch.equal(alone.next_batch(8).input_ids, beside.next_batch(8).input_ids)
    assert pair.stream_seed == 1 + 7_777_777 and alone.stream_seed == 1


def test_a_single_language_and_the_registry():
    ds = synthetic_pairs(10, (2, 4))
    batch = source("pair", {"en-de": ds}, seq_len=16, alpha=0.0).next_batch(6)
    assert batch.langs == ["en-de"] * 6
    mono = source("mono", {"en": datasets.Dataset.from_dict({"input_ids": [[SRC0 + i] * (i + 1) for i in range(5)]})},
                  seq_len=8, alpha=1.0)
    assert mono.next_batch(3).input_ids.shape == (3, 8)
    assert BATCH_SOURCES.names() == ["mono", "pair", "pair_sides", "segments"]
    with pytest.raises(ConfigError, match="unknown batch kind 'pairs'.*pair_sides"):
        BATCH_SOURCES.get("pairs")
    with pytest.raises(ConfigError, match="needs parallel training data"):
        source("pair", {"en-de": ds.select([])})
    with pytest.raises(ConfigError, match="no pad token"):
        source("pair", {"en-de": ds}, tokenizer=SimpleNamespace(cls_token_id=0, sep_token_id=2, pad_token_id=None))


def test_batch_rows_slice_every_tensor_and_num_tokens_counts_real_ones():
    batch = source("pair", {"en-de": synthetic_pairs(20, (1, 9))}, seq_len=32).next_batch(6)
    idx = torch.arange(1, 6, 2)
    part = batch.rows(idx)
    assert part.langs == [batch.langs[i] for i in idx] and part.kind == "pair"
    assert all(torch.equal(part.tensors[k], batch.tensors[k][idx]) for k in batch.tensors)
    assert batch.rows(slice(0, 2)).input_ids.shape[0] == 2
    assert batch.num_tokens == int(batch.tensors["attention_mask"].sum()) < batch.input_ids.numel()
    with pytest.raises(ValueError, match="other row counts"):
        Batch("pair", ["en-de"], {"input_ids": torch.zeros(2, 3, dtype=torch.long)})


@pytest.mark.parametrize("kind", ["mono", "pair", "pair_sides", "segments"])
def test_every_kind_reads_rows_zero_copy(prepared, tok, kind):
    data = load_prepared(prepared / "prepared", BATCH_SOURCES.get(kind).data)
    src = source(kind, data, seq_len=32, tokenizer=tok)
    columns = [c for s in src.streams.values() for c in ((s.ids,) if hasattr(s, "ids") else (s.src, s.tgt))]
    assert columns and all(c.fast is not None for c in columns)
