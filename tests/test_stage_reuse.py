"""Rerunning a run reuses its vocab and prepare stages while what they were made from is unchanged, and redoes
them when a config section, an input file or the vocabulary changes (metaxlm.run.stamps)."""

import json
import os
import shutil

import yaml

from metaxlm import pipeline
from metaxlm.config import load_config
from metaxlm.run.layout import RunDir


def _config(tmp_path, corpora, **vocab):
    mono = tmp_path / "mono"
    if not mono.exists():
        mono.mkdir()
        for lang in ("en", "de"):
            shutil.copyfile(corpora[lang], mono / f"{lang}.txt")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "output_dir": str(tmp_path / "run"),
        "data": {"languages": ["en", "de"], "mono": str(mono / "{lang}.txt"), "parallel": ""},
        "vocab": {"size": 120, "sample_sentences": 2000, **vocab},
        "prepare": {"num_proc": 1, "heldout_texts": 10}}))
    return load_config(path), mono


def _stages(cfg, capsys):
    pipeline.stage_vocab(cfg, progress=False)
    pipeline.stage_prepare(cfg, progress=False)
    out = capsys.readouterr().out
    return "vocab: reused" in out, "prepare: reused" in out


def test_vocab_and_prepare_are_reused_until_an_input_changes(tmp_path, corpora, capsys):
    cfg, mono = _config(tmp_path, corpora)
    run = RunDir.of(cfg)
    assert _stages(cfg, capsys) == (False, False)  # first run: both made
    made = {p: p.stat().st_mtime_ns for p in run.vocab.rglob("*") if p.is_file()}
    meta = (run.prepared / "meta.json").read_text()

    assert _stages(cfg, capsys) == (True, True)  # rerun: nothing redone, nothing rewritten
    assert made == {p: p.stat().st_mtime_ns for p in run.vocab.rglob("*") if p.is_file()}
    assert (run.prepared / "meta.json").read_text() == meta

    with open(mono / "de.txt", "a", encoding="utf-8") as f:  # an input file grows: both depend on it
        f.write("ein neuer Satz am Ende\n")
    assert _stages(cfg, capsys) == (False, False)
    assert _stages(cfg, capsys) == (True, True)

    bigger, _ = _config(tmp_path, corpora, size=140)  # the vocabulary's config: vocab, and so prepare, redone
    assert _stages(bigger, capsys) == (False, False)

    # prepare's own config changes: only prepare is redone
    more_heldout = bigger.model_copy(update={"prepare": bigger.prepare.model_copy(update={"heldout_texts": 12})})
    assert _stages(more_heldout, capsys) == (True, False)


def test_an_interrupted_or_missing_stage_is_redone(tmp_path, corpora, capsys):
    cfg, _ = _config(tmp_path, corpora)
    run = RunDir.of(cfg)
    _stages(cfg, capsys)
    shutil.rmtree(run.prepared)  # output gone (e.g. deleted to free space): the stamp alone vouches for nothing
    assert _stages(cfg, capsys) == (True, False)
    run.stamp("prepare").write_text("{not json")  # a torn stamp: redo
    assert _stages(cfg, capsys) == (True, False)
    os.unlink(run.stamp("vocab"))  # a stage that never finished has no stamp: redo it (and what depends on it)
    assert _stages(cfg, capsys) == (False, False)


def test_a_reused_stage_keeps_its_measured_time_in_the_run_clock(tmp_path, corpora):
    """The run clock's timings.json keeps the seconds a stage took when it ran, not the instant of its reuse."""
    cfg, _ = _config(tmp_path, corpora)
    cfg = cfg.model_copy(update={"stages": ["vocab", "prepare"]})
    pipeline.run(cfg, progress=False)
    timings = RunDir.of(cfg).timings
    first = json.loads(timings.read_text())["stages"]
    assert first["vocab"] > 0 and first["prepare"] > 0
    assert isinstance(pipeline.stage_vocab(cfg, progress=False), pipeline.Reused)
    pipeline.run(cfg, progress=False)
    assert json.loads(timings.read_text())["stages"] == first
