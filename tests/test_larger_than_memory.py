"""Larger than memory (issue 13), at test scale: `prepare` runs in a real memory cgroup whose headroom above the
process tree's own start-up footprint is a fraction of the corpus, and finishes without being OOM-killed; a
pretraining stream's anonymous memory hardly grows with the number of texts; the pieces that keep memory bounded
(token counts read in Arrow batches, the stream's int32 order in a file mapping, large record batches) are checked
on their degenerate cases and keep the data and the batch order bit-identical. The full measurement (corpora up to 4x
the limit, prepare + pretrain) is bench/larger_than_memory.py, whose cgroup code this test runs."""

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pytest

from metaxlm.config import CorpusSpec, PrepareConfig
from metaxlm.data.prepare import RECORD_BATCH_ROWS, column_sum, prepare_corpora, save_shards
from metaxlm.pretrain.batches import streams
from metaxlm.pretrain.batches.streams import ShuffledOrder, TextStream, permutation

BENCH = Path(__file__).resolve().parents[1] / "bench" / "larger_than_memory.py"
_spec = importlib.util.spec_from_file_location("larger_than_memory_bench", BENCH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)  # top-level imports are stdlib only: cheap

MiB = 1 << 20


# -- the property: prepare under a memory limit smaller than the corpus needs ---------------------------------------

PREPARE = textwrap.dedent("""
    import sys
    from metaxlm.config import CorpusSpec, PrepareConfig
    from metaxlm.data.prepare import prepare_corpora
    meta = prepare_corpora({"en": CorpusSpec(path=sys.argv[1])}, {}, sys.argv[2], sys.argv[3],
                           PrepareConfig(num_proc=1, heldout_texts=10), progress=False)
    print(meta["mono"]["en"]["examples"] + meta["mono"]["en"]["heldout_examples"], meta["mono"]["en"]["tokens"])
""")


def _write_words(path: Path, target: int) -> int:
    """Lines of 4-12 words from the test vocabulary, about `target` bytes; returns the line count."""
    import random

    rng, words = random.Random(0), "the house is small and the cat sleeps on the red chair near an open window".split()
    block = "".join(" ".join(rng.choices(words, k=rng.randint(4, 12))) + "\n" for _ in range(20_000))
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(max(1, target // len(block))):
            f.write(block)
    return max(1, target // len(block)) * 20_000


def test_prepare_finishes_in_a_cgroup_whose_headroom_is_a_fraction_of_the_corpus(tokenizer_dir, tmp_path):
    """The start-up footprint (interpreter, pyarrow, datasets, the tokenizer, the worker process) is measured on a
    one-line corpus in an unlimited cgroup (memory.max_usage_in_bytes: exact, page cache included); then a corpus
    four times the headroom goes through `prepare` in a cgroup limited to footprint + headroom. A prepare that held
    the corpus, its lines or its token ids would be OOM-killed (the token ids alone are ~2x the text)."""
    why = bench.cgroup_available()
    if why:
        pytest.skip(f"no memory cgroup here: {why}")
    cmd = [sys.executable, "-c", PREPARE]
    (tmp_path / "one.txt").write_text("the cat\n" * 12)  # > heldout_texts lines
    base = bench.run_limited(cmd + [str(tmp_path / "one.txt"), str(tokenizer_dir), str(tmp_path / "out-one")],
                             limit=1 << 40, name="metaxlm-test-base", log=tmp_path / "base.log", label="base")
    assert base["ok"], base
    headroom = 8 * MiB
    lines = _write_words(tmp_path / "big.txt", 4 * headroom)
    corpus = (tmp_path / "big.txt").stat().st_size
    limit = base["max_usage_bytes"] + headroom
    big = bench.run_limited(cmd + [str(tmp_path / "big.txt"), str(tokenizer_dir), str(tmp_path / "out-big")],
                            limit=limit, name="metaxlm-test-big", log=tmp_path / "big.log", label="big")
    assert big["ok"] and not big["oom_killed"], (big, (tmp_path / "big.log").read_text()[-2000:])
    assert big["limit_bytes"] == limit and corpus >= 3 * headroom
    assert big["peak_anon_bytes"] < limit
    examples, tokens = map(int, (tmp_path / "big.log").read_text().split()[-2:])
    assert examples == lines and tokens > corpus / 8  # everything went through
    assert len(datasets.load_from_disk(str(tmp_path / "out-big" / "mono" / "en"))) == lines - 10


def test_run_limited_reports_an_oom_kill_as_a_failure(tmp_path):
    why = bench.cgroup_available()
    if why:
        pytest.skip(f"no memory cgroup here: {why}")
    hog = [sys.executable, "-c", "x = bytearray(256 << 20); x[::4096] = b'1' * len(x[::4096])"]
    rec = bench.run_limited(hog, limit=64 * MiB, name="metaxlm-test-oom", log=tmp_path / "oom.log", label="oom")
    assert not rec["ok"] and rec["oom_killed"] and rec["oom_kills"] >= 1 and rec["exit_code"] == -9
    assert not Path(bench.CGROUP_ROOT, f"metaxlm-test-oom-{__import__('os').getpid()}").exists()  # removed


# -- the property: a pretraining stream's memory against the number of texts ---------------------------------------

STREAM = textwrap.dedent("""
    import sys
    import datasets
    from metaxlm.pretrain.batches import streams
    streams.SPILL_MIN_ROWS = int(sys.argv[2])
    def anon():
        return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("RssAnon"))
    before = anon()
    stream = streams.TextStream(datasets.load_from_disk(sys.argv[1]), "en", seed=0)
    stream.next_text()  # builds the epoch order
    print(anon() - before)
""")


def _one_token_texts(path: Path, n: int, save=save_shards) -> None:
    """n one-token texts, saved the way prepare saves them: the fixed cost per text, and nothing else."""
    ids = pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)), pa.array(np.full(n, 7, np.int32)))
    save(datasets.Dataset(pa.table({"input_ids": ids, "length": pa.array(np.ones(n, np.int32))})), path)


def test_stream_memory_hardly_grows_with_the_number_of_texts(tmp_path):
    """Anonymous memory (RssAnon: what a memory limit cannot reclaim) that a TextStream adds, from load_from_disk to
    its first text, in a fresh process, for 0.5 M and 2 M texts. It was 7.5 bytes a text (an int32 order on the
    heap, and per-record-batch metadata at 1,000 rows a batch); now the order is a file mapping and record batches
    hold 10,000 rows: ~0.3 bytes a text. Both sizes are above the spill threshold here (as any corpus of 1 M texts
    or more is by default)."""
    datasets.disable_progress_bars()
    grown = {}
    for n in (500_000, 2_000_000):
        _one_token_texts(tmp_path / str(n), n)
        out = subprocess.run([sys.executable, "-c", STREAM, str(tmp_path / str(n)), "400000"], capture_output=True,
                             text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert out.returncode == 0, out.stderr[-2000:]
        grown[n] = int(out.stdout.split()[-1])
    per_text = (grown[2_000_000] - grown[500_000]) / 1_500_000
    assert per_text < 1.0, (grown, per_text)


# -- token counts in Arrow batches ----------------------------------------------------------------------------------

@pytest.mark.parametrize("lengths", [[], [7], [3, 0, 5, 9], list(range(1000))])
@pytest.mark.parametrize("batch_size", [1, 3, 100_000])
def test_column_sum_is_exact_for_every_batching(lengths, batch_size):
    """Empty, one row, a batch size of one row or smaller than the dataset, one batch larger than it."""
    ds = datasets.Dataset.from_dict({"length": lengths},
                                    features=datasets.Features({"length": datasets.Value("int32")}))
    assert column_sum(ds, "length", batch_size=batch_size) == sum(lengths)
    if lengths:  # a select()/shuffle() view (an indices mapping) counts its own rows
        view = ds.select([0] * 3 + list(range(len(lengths))))
        assert column_sum(view, "length", batch_size=batch_size) == 3 * lengths[0] + sum(lengths)


def test_prepare_counts_tokens_without_formatting_rows(tokenizer_dir, tmp_path, monkeypatch):
    """Iterating a Dataset row by row (what `sum(ds["length"])` does) cost more than tokenizing: it must not
    happen in prepare's parent process any more. A text longer than a writer batch and a one-line corpus too."""
    (tmp_path / "de.txt").write_text(" ".join(["Katze"] * 5000) + "\n" + "das Haus ist klein\n" * 250)
    (tmp_path / "en.txt").write_text("the cat\n")

    def no_rows(self):
        raise AssertionError("a dataset was iterated row by row")

    monkeypatch.setattr(datasets.Dataset, "__iter__", no_rows)
    meta = prepare_corpora({"de": CorpusSpec(path=str(tmp_path / "de.txt")),
                            "en": CorpusSpec(path=str(tmp_path / "en.txt"))},
                           {}, tokenizer_dir, tmp_path / "out", PrepareConfig(num_proc=1, heldout_texts=100,
                                                                              writer_batch_size=64), progress=False)
    monkeypatch.undo()
    for lang, heldout in (("de", 100), ("en", 0)):
        train = datasets.load_from_disk(str(tmp_path / "out" / "mono" / lang))
        assert meta["mono"][lang]["tokens"] == sum(train["length"]) == sum(map(len, train["input_ids"]))
        assert meta["mono"][lang]["heldout_examples"] == heldout
    assert max(datasets.load_from_disk(str(tmp_path / "out" / "mono" / "de"))["length"]) >= 5000


# -- the stream's order ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 2, 17, 100_003])
def test_int32_order_is_the_same_permutation(n):
    """The batches must stay bit-identical to earlier runs: the int32 order is rng.permutation(n), value for value."""
    for epoch in (0, 1, 7):
        want = np.random.default_rng([12345, epoch]).permutation(n)
        got = permutation(np.random.default_rng([12345, epoch]), n)
        assert got.dtype == np.int32 and np.array_equal(got, want)


def test_shuffled_order_keeps_one_int32_order_and_resumes():
    order = ShuffledOrder(1000, "de", seed=3)
    first = [order.next_index() for _ in range(2500)]  # into the third epoch
    assert order._order[1].dtype == np.int32 and order._order[1].nbytes == 4000
    assert sorted(first[:1000]) == list(range(1000)) and first[:1000] != first[1000:2000]
    again = ShuffledOrder(1000, "de", seed=3)
    again.epoch, again.pos = 1, 500
    assert [again.next_index() for _ in range(1000)] == first[1500:2500]
    one = ShuffledOrder(1, "en", seed=0)
    assert [one.next_index() for _ in range(3)] == [0, 0, 0]


def _mappings(directory: Path) -> list[str]:
    return [line for line in Path("/proc/self/maps").read_text().splitlines() if str(directory) in line]


@pytest.mark.parametrize("n", [1, 2, 17, 100_003, 1_048_577])
def test_order_in_a_file_mapping_is_the_same_permutation(n, tmp_path):
    """Above the spill threshold the order lives in an unlinked file beside the data, mapped, and is filled and
    shuffled in place: the values must still be rng.permutation(n)'s, in the same order (batches bit-identical to
    earlier runs). Nothing is left in the directory; the mapping goes with the array."""
    for epoch in (0, 3):
        want = np.random.default_rng([99, epoch]).permutation(n)
        got = permutation(np.random.default_rng([99, epoch]), n, str(tmp_path), spill_min_rows=1)
        assert got.dtype == np.int32 and np.array_equal(got, want)
        assert not got.flags.owndata and any("(deleted)" in m for m in _mappings(tmp_path))
        assert list(tmp_path.iterdir()) == []
        del got
    assert _mappings(tmp_path) == []


def test_order_falls_back_to_the_temp_dir_then_to_memory(tmp_path, monkeypatch):
    want = np.random.default_rng([1, 0]).permutation(5000)
    nowhere = tmp_path / "missing"  # not a directory: the default temp dir takes the file
    got = permutation(np.random.default_rng([1, 0]), 5000, str(nowhere), spill_min_rows=1)
    assert np.array_equal(got, want) and not got.flags.owndata and not nowhere.exists()
    monkeypatch.setattr(streams.tempfile, "TemporaryFile", lambda **kw: (_ for _ in ()).throw(OSError(28, "full")))
    got = permutation(np.random.default_rng([1, 0]), 5000, str(tmp_path), spill_min_rows=1)
    assert np.array_equal(got, want) and got.flags.owndata  # no room anywhere: the order on the heap, same values
    assert permutation(np.random.default_rng([1, 0]), 0, str(tmp_path), spill_min_rows=0).size == 0


def test_a_spilled_stream_reads_the_same_texts_and_resumes(tmp_path, monkeypatch):
    """TextStream over a saved dataset: the same texts, epoch after epoch, with the order in memory (the default
    for small corpora) and in a file beside the data; a resumed stream continues where the first one was."""
    lengths = np.arange(1, 1001) % 13
    ids = pa.ListArray.from_arrays(pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)),
                                   pa.array(np.arange(lengths.sum(), dtype=np.int32)))
    save_shards(datasets.Dataset(pa.table({"input_ids": ids, "length": pa.array(lengths.astype(np.int32))})),
                tmp_path / "en", rows_per_batch=300)
    ds = datasets.load_from_disk(str(tmp_path / "en"))
    heap = TextStream(ds, "en", seed=4)
    want = [heap.next_text() for _ in range(2500)]
    assert heap.order._order[1].flags.owndata
    monkeypatch.setattr(streams, "SPILL_MIN_ROWS", 100)
    mapped = TextStream(ds, "en", seed=4)
    assert [mapped.next_text() for _ in range(2500)] == want
    assert not mapped.order._order[1].flags.owndata and _mappings(tmp_path / "en")
    again = TextStream(ds, "en", seed=4)
    again.load_state_dict({"epoch": 1, "pos": 200, "leftover": []})
    assert [again.next_text() for _ in range(1300)] == want[1200:]


# -- large record batches --------------------------------------------------------------------------------------------

def test_saved_shards_have_the_same_rows_in_fewer_record_batches(tmp_path):
    """save_shards writes what save_to_disk writes (same rows, same order, same schema and shards' row counts),
    in record batches of RECORD_BATCH_ROWS rows instead of 1,000, and leaves datasets' setting as it was."""
    datasets.disable_progress_bars()
    n = 2 * RECORD_BATCH_ROWS + 4321
    lengths = np.arange(n) % 7
    ids = pa.ListArray.from_arrays(pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)),
                                   pa.array((np.arange(lengths.sum()) % 1000).astype(np.int32)))
    ds = datasets.Dataset(pa.table({"input_ids": ids, "length": pa.array(lengths.astype(np.int32))}))
    ds.save_to_disk(str(tmp_path / "old"))
    save_shards(ds, tmp_path / "new")
    save_shards(ds, tmp_path / "new-shards", max_shard_size="100KB")
    assert datasets.config.DEFAULT_MAX_BATCH_SIZE == 1000
    old, new = (datasets.load_from_disk(str(tmp_path / d)) for d in ("old", "new"))
    shards = datasets.load_from_disk(str(tmp_path / "new-shards"))
    assert old.data.table.num_columns == 2 and old.features == new.features == shards.features
    assert new.data.table.equals(old.data.table) and shards.data.table.equals(old.data.table)
    assert old.data.column("input_ids").num_chunks == -(-n // 1000)
    assert new.data.column("input_ids").num_chunks == -(-n // RECORD_BATCH_ROWS)
    assert len(shards.cache_files) > 1
    assert all(len(c) <= RECORD_BATCH_ROWS for c in shards.data.column("input_ids").chunks)


# -- the bench's corpus generator ----------------------------------------------------------------------------------

def test_generated_corpus_has_the_asked_size_in_whole_lines(tmp_path):
    lines = {"en": ["the cat", "a house with a red chair"], "zh": ["房子很小", "猫睡在"]}
    info = bench.generate_corpus(lines, 10_000, tmp_path / "c")
    for lang, rec in info.items():
        data = (tmp_path / "c" / f"{lang}.txt").read_bytes()
        assert len(data) == rec["bytes"] and 5_000 - 40 < rec["bytes"] <= 5_000
        assert data.endswith(b"\n") and data.count(b"\n") == rec["lines"]
        assert set(data.decode().splitlines()) == set(lines[lang])
    one = bench.generate_corpus({"en": ["a line longer than the target"]}, 5, tmp_path / "one")
    assert one["en"]["lines"] == 1  # never an empty file
    assert bench.parse_size("384MiB") == 384 * MiB and bench.parse_size("1GB") == 1 << 30
