"""A rerun of `metaxlm run` reuses a finished variant (and resumes a begun one) only under the settings it was
pretrained under: otherwise it refuses in one line naming each difference, before it writes anything — config.yaml
and run_info.json stay as they were — or pretrains it again when asked (`--recompute NAME`). run_info.json says which
invocation made each artifact and from what (issue 63)."""

import json
import os
import shutil

import pytest
import yaml
from pretrain_helpers import TINY, final_weights

from metaxlm import pipeline
from metaxlm.cli import main
from metaxlm.config import load_config
from metaxlm.errors import MetaXLMError
from metaxlm.run.layout import RunDir

TRAIN = {"steps": 4, "batch_size": 8, "seq_len": 32, "warmup_steps": 1, "lr": 1e-3, "log_every": 1, "eval_every": 4,
         "save_every": 2, "eval_sequences": 2, "precision": "fp32"}


def _pretrain_config(run_template, tmp_path, variants=None) -> str:
    """A run of one tiny variant on the prepared test data (stages: pretrain)."""
    shutil.copytree(run_template, tmp_path / "run")
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump({
        "output_dir": str(tmp_path / "run"), "stages": ["pretrain"],
        "data": {"languages": ["en", "de", "ru", "zh"], "mono": "unused/{lang}"}, "model": TINY, "train": TRAIN,
        "variants": variants or {"xlm": {}}}))
    return str(path)


def _files(run, *names) -> dict[str, bytes]:
    return {name: (run / name).read_bytes() for name in names}


def _error(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("metaxlm: error:")]
    assert len(lines) == 1, lines
    return lines[0]


def test_a_finished_or_begun_variant_is_reused_only_under_its_settings(run_template, tmp_path, capsys):
    cfg = _pretrain_config(run_template, tmp_path)
    run = tmp_path / "run"
    assert main(["run", cfg, "--no-progress"]) == 0
    info = json.loads((run / "run_info.json").read_text())
    first = info["invocations"][0]["id"]
    assert info["artifacts"]["pretrain/xlm"]["made_by"] == first
    weights = final_weights(run / "pretrain" / "xlm")
    kept = _files(run, "config.yaml", "run_info.json")

    # another lr: refused in one line naming it, nothing written
    assert main(["run", cfg, "--no-progress", "train.lr=5e-4"]) == 2
    error = _error(capsys)
    assert "pretrain/xlm has other settings than the config's (train.lr: 0.001 when it was pretrained, 0.0005 now)" \
        in error and "--recompute xlm" in error
    assert _files(run, "config.yaml", "run_info.json") == kept
    # an evaluation alone of the variant under the changed config is refused as well
    with pytest.raises(MetaXLMError, match=r"train\.lr: 0\.001 when it was pretrained, 0\.0005 now"):
        pipeline.check_reuse(load_config(cfg, ["stages=[evaluate]", "train.lr=5e-4",
                                               "evaluate.tasks={demo_module: {}}"]))

    # unchanged: reused, and run_info.json keeps the invocation that made it
    assert main(["run", cfg, "--no-progress"]) == 0
    assert "pretrain xlm: already done" in capsys.readouterr().out
    info = json.loads((run / "run_info.json").read_text())
    assert info["artifacts"]["pretrain/xlm"]["made_by"] == first and len(info["invocations"]) == 2

    # killed after its last checkpoint, before its export: a resume under another step budget is refused before
    # anything is written
    os.unlink(run / "pretrain" / "xlm" / "summary.json")
    kept = _files(run, "config.yaml", "run_info.json")
    assert main(["run", cfg, "--no-progress", "train.steps=8"]) == 2
    assert "train.steps: 4 in its checkpoint, 8 now" in _error(capsys)
    assert _files(run, "config.yaml", "run_info.json") == kept

    # --recompute: pretrained again under the config's settings, recorded as this invocation's
    assert main(["run", cfg, "--no-progress", "train.lr=5e-4", "--recompute", "xlm"]) == 0
    summary = json.loads((run / "pretrain" / "xlm" / "summary.json").read_text())
    assert summary["settings"]["train"]["lr"] == 5e-4
    assert final_weights(run / "pretrain" / "xlm")["bert.embeddings.word_embeddings.weight"].ne(
        weights["bert.embeddings.word_embeddings.weight"]).any()
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["lr"] == 5e-4
    info = json.loads((run / "run_info.json").read_text())
    assert info["artifacts"]["pretrain/xlm"]["made_by"] == info["invocations"][-1]["id"] != first


def test_recompute_of_a_variant_others_continue_needs_them_too(run_template, tmp_path):
    """b continues a's final model: pretraining a again would leave b a continuation of a model that is gone, so
    --recompute a alone is refused, naming b and the flags to add."""
    cfg = _pretrain_config(run_template, tmp_path, {"a": {}, "b": {"start_from": "a", "train": {"steps": 2}}})
    pipeline.run(load_config(cfg), progress=False)
    with pytest.raises(MetaXLMError, match=r"pretrain/b continues a, which this run pretrains \(again\) first.*"
                                           r"--recompute a --recompute b"):
        pipeline.check_reuse(load_config(cfg), ["a"])
    pipeline.check_reuse(load_config(cfg), ["a", "b"])
    with pytest.raises(MetaXLMError, match="--recompute c: not a variant this run pretrains"):
        pipeline.check_reuse(load_config(cfg), ["c"])
    # b's start is a's final model by content: a replaced behind the run's back is a difference at b's turn
    final = RunDir(tmp_path / "run").variant("a").final / "model.safetensors"
    final.write_bytes(final.read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(MetaXLMError, match=r"pretrain/b has other settings than the config's \(start\.model: "):
        pipeline.check_reuse(load_config(cfg))


def test_the_vocabulary_and_data_a_variant_was_pretrained_on(tmp_path, corpora, capsys):
    """A vocabulary the run would make again from other settings is refused before it is made (the finished
    variant's vocabulary stays); one made again only because a corpus file was touched comes out the same, by
    content, and the variant is reused."""
    mono = tmp_path / "mono"
    mono.mkdir()
    for lang in ("en", "de"):
        shutil.copyfile(corpora[lang], mono / f"{lang}.txt")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "output_dir": str(tmp_path / "run"), "stages": ["vocab", "prepare", "pretrain"],
        "data": {"languages": ["en", "de"], "mono": str(mono / "{lang}.txt"), "parallel": ""},
        "vocab": {"size": 120, "sample_sentences": 2000}, "prepare": {"num_proc": 1, "heldout_texts": 10},
        "model": TINY, "train": {**TRAIN, "steps": 2}}))
    run = RunDir(tmp_path / "run")
    pipeline.run(load_config(path), progress=False)
    vocab = {p: p.stat().st_mtime_ns for p in run.vocab.rglob("*")}
    kept = _files(run.root, "config.yaml", "run_info.json")
    with pytest.raises(MetaXLMError, match=r"pretrain/xlm was pretrained on the vocabulary \(vocab\.size: 120 when it "
                                           r"was made, 140 now\).*which this run makes again"):
        pipeline.run(load_config(path, ["vocab.size=140"]), progress=False)
    assert vocab == {p: p.stat().st_mtime_ns for p in run.vocab.rglob("*")}
    assert _files(run.root, "config.yaml", "run_info.json") == kept

    os.utime(mono / "de.txt")  # touched: the vocabulary and the data are made again, the same
    capsys.readouterr()
    pipeline.run(load_config(path), progress=False)
    out = capsys.readouterr().out
    assert "vocab: reused" not in out and "prepare: reused" not in out and "pretrain xlm: already done" in out
