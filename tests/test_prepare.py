import json
import subprocess
import sys
import textwrap

import datasets
import pytest

from metaxlm.config import CorpusSpec, ParallelSpec, PrepareConfig
from metaxlm.data.prepare import prepare_corpora
from metaxlm.data.readers import read_text
from metaxlm.errors import DataError
from metaxlm.vocab import load_tokenizer


@pytest.fixture
def pairs(tmp_path):
    p = tmp_path / "en-de.tsv"
    p.write_text("".join(f"the cat {i}\tdie Katze {i}\n" for i in range(300)))
    return p


@pytest.mark.parametrize("num_proc", [1, 2])
def test_prepare_matches_direct_tokenization(corpora, tokenizer_dir, pairs, tmp_path, num_proc):
    mono = {k: CorpusSpec(path=str(p)) for k, p in corpora.items() if k in ("de", "zh")}
    cfg = PrepareConfig(num_proc=num_proc, writer_batch_size=100, batch_size=64, max_shard_size="20KB")
    meta = prepare_corpora(mono, {"en-de": ParallelSpec(path=str(pairs))}, tokenizer_dir, tmp_path / "out", cfg,
                           progress=False)
    tok = load_tokenizer(tokenizer_dir)
    for lang in ("de", "zh"):
        ds = datasets.load_from_disk(str(tmp_path / "out" / "mono" / lang))
        lines = list(read_text(corpora[lang]))
        expected = tok(lines, add_special_tokens=False)["input_ids"]
        got = ds["input_ids"]
        # workers interleave by i % num_proc; the dataset holds each worker's texts in turn
        order = [i for w in range(num_proc) for i in range(len(lines)) if i % num_proc == w]
        assert got == [expected[i] for i in order]
        assert meta["mono"][lang]["examples"] == len(lines)
        assert meta["mono"][lang]["tokens"] == sum(map(len, expected))
    assert meta["mono"]["de"]["shards"] > 1  # max_shard_size splits the Arrow output
    par = datasets.load_from_disk(str(tmp_path / "out" / "parallel" / "en-de"))
    assert len(par) == 300 and set(par.column_names) == {"src_ids", "tgt_ids", "length"}
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["parallel"]["en-de"]["examples"] == 300


def test_a_tokenizer_dir_without_tokenizer_json_needs_the_callers_loader(corpora, tokenizer_dir, tmp_path):
    """data/ does not import vocab/: a directory with only the sentencepiece model is read by the loader the
    caller passes (the pipeline passes vocab.load_tokenizer), in the workers too; without one, a clear error."""
    import shutil

    spm_only = tmp_path / "spm-only"
    shutil.copytree(tokenizer_dir, spm_only)
    (spm_only / "tokenizer.json").unlink()
    mono = {"de": CorpusSpec(path=str(corpora["de"]))}
    with pytest.raises(DataError, match=r"spm-only: no tokenizer.json here: pass load_tokenizer"):
        prepare_corpora(mono, {}, spm_only, tmp_path / "out", PrepareConfig(num_proc=1), progress=False)
    assert not (tmp_path / "out").exists()
    prepare_corpora(mono, {}, spm_only, tmp_path / "out", PrepareConfig(num_proc=1), progress=False,
                    load_tokenizer=load_tokenizer)
    prepare_corpora(mono, {}, tokenizer_dir, tmp_path / "want", PrepareConfig(num_proc=1), progress=False)
    got = datasets.load_from_disk(str(tmp_path / "out" / "mono" / "de"))["input_ids"]
    assert got == datasets.load_from_disk(str(tmp_path / "want" / "mono" / "de"))["input_ids"] and got


@pytest.mark.parametrize("num_proc", [1, 2])
def test_bad_line_names_file_and_line_even_from_workers(tokenizer_dir, tmp_path, num_proc):
    bad = tmp_path / "de.txt"
    bad.write_bytes(b"gut\nauch gut\nkaputt \xff\nwieder gut\n")
    with pytest.raises(DataError, match=r"de\.txt:3"):
        prepare_corpora({"de": CorpusSpec(path=str(bad))}, {}, tokenizer_dir, tmp_path / "out",
                        PrepareConfig(num_proc=num_proc), progress=False)
    assert not (tmp_path / "out").exists()  # nothing half-written
    meta = prepare_corpora({"de": CorpusSpec(path=str(bad))}, {}, tokenizer_dir, tmp_path / "out",
                           PrepareConfig(num_proc=num_proc), skip_bad=True, progress=False)
    assert meta["mono"]["de"]["examples"] == 3 and meta["mono"]["de"]["skipped_bad_lines"] == 1


def test_streams_in_bounded_memory(tokenizer_dir, tmp_path):
    """A corpus far larger than the allowed memory growth streams through: the peak RSS of the prepare
    process and of its worker, over a run on a 10-line corpus, stays far below the corpus size."""
    import gzip
    import random

    rng = random.Random(0)
    words = "the house is small and the cat sleeps on the red chair das Haus ist klein".split()

    def write(path, n_lines):
        size = 0
        with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as f:
            for _ in range(n_lines):
                line = " ".join(rng.choices(words, k=12)) + "\n"
                size += len(line)
                f.write(line)
        return size

    lines = 150_000  # 8 MB of text: the bound below is half of it (the cgroup test in test_larger_than_memory.py
    # checks prepare's memory against a hard limit, page cache included)
    raw_bytes = write(tmp_path / "big.txt.gz", lines)
    write(tmp_path / "tiny.txt.gz", 10)
    script = textwrap.dedent(f"""
        import resource, sys
        from metaxlm.config import CorpusSpec, PrepareConfig
        from metaxlm.data.prepare import prepare_corpora
        prepare_corpora({{"en": CorpusSpec(path=sys.argv[1])}}, {{}}, {str(tokenizer_dir)!r}, sys.argv[2],
                        PrepareConfig(num_proc=1, writer_batch_size=1000), progress=False)
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    """)  # noqa: E501 (the child script, kept byte-identical)

    def peak_kb(corpus, out):
        res = subprocess.run([sys.executable, "-c", script, str(corpus), str(out)], capture_output=True, text=True,
                             check=True)
        return [int(x) for x in res.stdout.split()[-2:]]

    tiny = peak_kb(tmp_path / "tiny.txt.gz", tmp_path / "out_tiny")
    big = peak_kb(tmp_path / "big.txt.gz", tmp_path / "out")
    tokens_bytes = lines * 12 * 8  # what holding the token ids as Python ints would cost at least
    assert raw_bytes > 8e6
    for name, before, after in zip(("main", "worker"), tiny, big, strict=True):
        assert (after - before) * 1024 < min(raw_bytes, tokens_bytes) / 2, (name, before, after, raw_bytes)
    assert len(datasets.load_from_disk(str(tmp_path / "out" / "mono" / "en"))) == lines
