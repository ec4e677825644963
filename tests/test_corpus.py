import gzip
import json

import datasets
import pytest

from metaxlm.config import CorpusSpec, ParallelSpec
from metaxlm.data.corpus import count_pairs, count_texts, iter_pairs, iter_texts
from metaxlm.errors import DataError


def test_text_jsonl_dir_and_documents(tmp_path):
    d = tmp_path / "de"
    d.mkdir()
    (d / "a.txt").write_text("eins\nzwei\n")
    with gzip.open(d / "b.txt.gz", "wt") as f:
        f.write("drei\n\nvier\n")
    assert list(iter_texts(CorpusSpec(path=str(d)))) == ["eins", "zwei", "drei", "vier"]
    assert count_texts(CorpusSpec(path=str(d))) == 4
    docs = tmp_path / "docs.txt"
    docs.write_text("a\nb\n\nc\n")
    assert list(iter_texts(CorpusSpec(path=str(docs), unit="document"))) == ["a\nb", "c"]
    assert count_texts(CorpusSpec(path=str(docs), unit="document")) == 2
    j = tmp_path / "x.jsonl"
    j.write_text("\n".join(json.dumps({"body": t}) for t in ["x", "y"]))
    assert list(iter_texts(CorpusSpec(path=str(j), text_field="body"))) == ["x", "y"]


def test_hf_dataset_on_disk(tmp_path):
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["a b", "", "c"]}),
                               "test": datasets.Dataset.from_dict({"text": ["t"]})})
    dd.save_to_disk(str(tmp_path / "dd"))
    spec = CorpusSpec(path=str(tmp_path / "dd"))
    assert list(iter_texts(spec)) == ["a b", "c"]
    assert count_texts(spec) == 3  # rows, as N_i for sampling
    assert list(iter_texts(CorpusSpec(path=str(tmp_path / "dd"), split="test"))) == ["t"]
    with pytest.raises(DataError, match="no split 'dev'"):
        list(iter_texts(CorpusSpec(path=str(tmp_path / "dd"), split="dev")))
    with pytest.raises(DataError, match="no column 'body'"):
        list(iter_texts(CorpusSpec(path=str(tmp_path / "dd"), text_field="body")))


def test_missing_and_empty_dir(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        list(iter_texts(CorpusSpec(path=str(tmp_path / "nope.txt"))))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="directory holds no files"):
        list(iter_texts(CorpusSpec(path=str(tmp_path / "empty"))))


def test_parallel_tsv_and_two_files(tmp_path):
    (tmp_path / "p.tsv").write_text("a\tA\nb\tB\n")
    (tmp_path / "s.en").write_text("a\nb\n")
    (tmp_path / "s.de").write_text("A\nB\n")
    tsv, two = ParallelSpec(path=str(tmp_path / "p.tsv")), ParallelSpec(src=str(tmp_path / "s.en"),
                                                                           tgt=str(tmp_path / "s.de"))
    assert list(iter_pairs(tsv)) == list(iter_pairs(two)) == [("a", "A"), ("b", "B")]
    assert count_pairs(tsv) == count_pairs(two) == 2
    with pytest.raises(ValueError, match="either `path`"):
        ParallelSpec(src="x")


def test_list_of_paths_reads_all_and_skips_empty_files(tmp_path, capsys):
    from metaxlm.config import DataConfig

    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "de.txt").write_text("eins\nzwei\n")
    (tmp_path / "big" / "hi.txt").write_text("")
    (tmp_path / "de.txt").write_text("drei\n")
    (tmp_path / "hi.txt").write_text("ek\n")
    data = DataConfig(languages=["de", "hi"], mono=[str(tmp_path / "big" / "{lang}.txt"), str(tmp_path / "{lang}.txt")])
    specs = data.mono_corpora()
    assert list(iter_texts(specs["de"])) == ["eins", "zwei", "drei"] and count_texts(specs["de"]) == 3
    assert list(iter_texts(specs["hi"])) == ["ek"]
    assert "hi.txt is empty" in capsys.readouterr().out
    (tmp_path / "hi.txt").write_text("")
    with pytest.raises(DataError, match="every file of this corpus is empty"):
        count_texts(specs["hi"])
