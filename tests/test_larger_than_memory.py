"""Larger than memory (issue 13), at test scale: `prepare` runs in a real memory cgroup whose headroom above the
process tree's own start-up footprint is a fraction of the corpus, and finishes without being OOM-killed; the
pieces that keep memory bounded (token counts read in Arrow batches, the stream's int32 order) are checked on their
degenerate cases. The full measurement (corpora up to 4x the limit, prepare + pretrain) is
bench/larger_than_memory.py, whose cgroup code this test runs."""

import importlib.util
import sys
import textwrap
from pathlib import Path

import datasets
import numpy as np
import pytest

from metaxlm.config import CorpusSpec, PrepareConfig
from metaxlm.data.prepare import column_sum, prepare_corpora
from metaxlm.pretrain.batches.streams import ShuffledOrder, permutation

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


# -- token counts in Arrow batches ----------------------------------------------------------------------------------

@pytest.mark.parametrize("lengths", [[], [7], [3, 0, 5, 9], list(range(1000))])
@pytest.mark.parametrize("batch_size", [1, 3, 100_000])
def test_column_sum_is_exact_for_every_batching(lengths, batch_size):
    """Empty, one row, a batch size of one row or smaller than the dataset, one batch larger than it."""
    ds = datasets.Dataset.from_dict({"length": lengths}, features=datasets.Features({"length": datasets.Value("int32")}))
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
    meta = prepare_corpora({"de": CorpusSpec(path=str(tmp_path / "de.txt")), "en": CorpusSpec(path=str(tmp_path / "en.txt"))},
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
