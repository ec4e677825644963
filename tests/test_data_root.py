"""The benchmark-data root `{data}` (METAXLM_DATA, default ../shared/data; metaxlm.roots): the shipped task
definitions and configs name their benchmark files under it, every path a config or task holds is filled from it
before `{lang}`, and a missing file under it says which root, where that came from, and the page to read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO

from metaxlm.cli import main
from metaxlm.config import RetrievalEvalSpec, RunConfig
from metaxlm.data.benchmarks import load_examples
from metaxlm.errors import DataError
from metaxlm.evaluation.recipe import retrieval_pairs
from metaxlm.finetune.spec import load_task_spec
from metaxlm.pretrain.variant import _dictionaries
from metaxlm.roots import DATA_ENV

SHIPPED = REPO / "src" / "metaxlm" / "configs"


def test_shipped_configs_name_benchmark_files_under_the_data_root():
    """No task definition or config depends on where this checkout sits (../shared/data beside it)."""
    beside = [f"{path.relative_to(SHIPPED)}:{n}" for path in sorted(SHIPPED.rglob("*.yaml"))
              for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
              if not line.lstrip().startswith("#") and re.search(r"\.\./shared/data|(?<![\w}/])data/xtreme", line)]
    assert beside == []
    assert 'test: "{data}/sib200/{flores}/test.tsv"' in (SHIPPED / "tasks" / "sib200.yaml").read_text()


def test_task_paths_are_filled_from_the_root(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert load_task_spec("sib200").path("test", "de") == tmp_path / "sib200" / "deu_Latn" / "test.tsv"
    udpos = load_task_spec("udpos")  # a mapping of one path per language
    assert udpos.path("train", "en") == tmp_path / "ud" / "UD_English-EWT" / "en_ewt-ud-train.conllu"
    assert load_task_spec("xnli").path("dev", "fr") == tmp_path / "xtreme" / "xnli" / "dev-fr.tsv"


def test_run_config_paths_are_filled_from_the_root(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    cfg = RunConfig.model_validate({
        "output_dir": str(tmp_path / "run"),
        "data": {"languages": ["en", "de"], "mono": "{data}/mono/{lang}.txt",
                 "parallel": {"en-de": {"src": "{data}/par/x.en", "tgt": "{data}/par/x.de"}}},
        "meta": {"dictionaries": "{data}/dicts/en-{lang}.txt"}})
    assert cfg.data.mono_corpora()["de"].path == f"{tmp_path}/mono/de.txt"
    assert (cfg.data.parallel_corpora()["en-de"].src, cfg.data.parallel_corpora()["en-de"].tgt) == \
        (f"{tmp_path}/par/x.en", f"{tmp_path}/par/x.de")
    (tmp_path / "dicts").mkdir()
    (tmp_path / "dicts" / "en-de.txt").write_text("house\tHaus\n", encoding="utf-8")
    assert _dictionaries(cfg) == {"de": f"{tmp_path}/dicts/en-de.txt"}


def test_tatoeba_retrieval_reads_the_root(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    (tmp_path / "tatoeba").mkdir()
    (tmp_path / "tatoeba" / "tatoeba.deu-eng.deu").write_text("Hallo.\nDanke.\n", encoding="utf-8")
    (tmp_path / "tatoeba" / "tatoeba.deu-eng.eng").write_text("Hello.\nThanks.\n", encoding="utf-8")
    spec = RetrievalEvalSpec(path="{data}/tatoeba", format="tatoeba")
    assert retrieval_pairs(spec, "de", "en") == (["Hallo.", "Danke."], ["Hello.", "Thanks."])


def test_a_missing_file_under_the_root_says_which_root_and_where_to_read(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "bench"))
    with pytest.raises(DataError) as info:
        load_examples("sib200", tmp_path / "bench" / "sib200" / "deu_Latn" / "test.tsv")
    assert str(info.value) == (f"{tmp_path}/bench/sib200/deu_Latn/test.tsv: no such file (benchmark-data root "
                               f"{tmp_path}/bench, from $METAXLM_DATA; docs/benchmark-data.md says how to get it)")
    with pytest.raises(DataError) as info:  # a file elsewhere is not benchmark data
        load_examples("sib200", tmp_path / "mine" / "test.tsv")
    assert str(info.value) == f"{tmp_path}/mine/test.tsv: no such file"


def test_finetune_without_the_benchmark_data(monkeypatch, tmp_path, capsys):
    """The README's `metaxlm finetune sib200 --model ... --out ...` outside this repository: one line naming the
    file, the root and its origin, and the docs page, before any model is read (`m` does not exist)."""
    monkeypatch.chdir(tmp_path)  # ../shared/data from here does not exist
    monkeypatch.delenv(DATA_ENV, raising=False)
    assert main(["finetune", "sib200", "--model", "m", "--out", "o"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("metaxlm: error: task sib200: no train file for the source language en "
                   "(../shared/data/sib200/eng_Latn/train.tsv: no such file (benchmark-data root ../shared/data, the "
                   "default; set METAXLM_DATA to your copy; docs/benchmark-data.md says how to get it))")
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "elsewhere"))
    assert main(["finetune", "sib200", "--model", "m", "--out", "o"]) == 2
    assert f"({tmp_path}/elsewhere/sib200/eng_Latn/train.tsv: no such file (benchmark-data root {tmp_path}/elsewhere," \
           f" from $METAXLM_DATA;" in capsys.readouterr().err
    assert not Path("o").exists()
