"""The select stage (evaluation/selection.py): the start and every kept checkpoint scored on DEV parts only, the
checkpoint that improves most on the start exported as final/ (the last one kept in last/), and a verdict per dev
metric against the start, in one line when no checkpoint beats it. The dev scores are stubbed here (what a model
dir scores is given); tests/test_retrieval.py and the alignment tests check the scores themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metaxlm.config import RunConfig
from metaxlm.errors import ConfigError
from metaxlm.evaluation import selection

EVALUATE = {"retrieval": {"tatoeba": {"path": "unused", "format": "tatoeba"}},
            "alignment": {"de-en": {"src": "s", "tgt": "t", "gold": "g"}}}


def config(tmp_path: Path, **select) -> RunConfig:
    return RunConfig.model_validate({
        "output_dir": str(tmp_path / "run"), "stages": ["pretrain", "select", "evaluate"],
        "data": {"languages": ["en", "de"], "mono": "x/{lang}"},
        "variants": {"aligned": {"start_from": "some/encoder"}, "scratch": {}},
        "select": {"retrieval": ["tatoeba"], "alignment": ["de-en"], **select}, "evaluate": EVALUATE})


def model(path: Path, tag: str) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"tag": tag}))
    (path / "model.safetensors").write_text(tag)  # what the fingerprint reads
    return path


def pretrained(cfg: RunConfig, steps=(10, 20), last: int = 30) -> Path:
    """A variant dir as the pretrain stage leaves it: start_model/, each checkpoint's export, final/, summary."""
    root = Path(cfg.output_dir) / "pretrain" / "aligned"
    model(root / "start_model", "start")
    exports = {str(s): {"model": f"pretrain/aligned/ckpt/step_{s}/export",
                        "tokenizer": f"pretrain/aligned/ckpt/step_{s}/export"}
               for s in steps}
    for s in steps:
        model(root / "ckpt" / f"step_{s}" / "export", f"step {s}")
    model(root / "final", f"step {last}")
    (root / "exports.json").write_text(json.dumps({"checkpoints": exports}))
    (root / "summary.json").write_text(json.dumps({"steps": last}))
    return root


def stub_scores(monkeypatch, errors: dict[str, tuple[float, float]]) -> list[str]:
    """Each model (by its tag) scores these (retrieval error, AER) on dev; returns the tags scored, in order."""
    scored = []

    def dev_scores(cfg, model_dir, tokenizer_dir):
        tag = json.loads((Path(model_dir) / "config.json").read_text())["tag"]
        scored.append(tag)
        retrieval, aer = errors[tag]
        return {"retrieval tatoeba": {"layers": [0, 1], "curve": [0.0, 1 - retrieval], "layer": 1, "error": retrieval},
                "alignment de-en": {"layers": [0, 1], "curve": [1.0, aer], "layer": 1, "error": aer}}

    monkeypatch.setattr(selection, "dev_scores", dev_scores)
    return scored


def tag(path: Path) -> str:
    return json.loads((path / "config.json").read_text())["tag"]


def test_the_best_dev_checkpoint_becomes_final_and_the_last_is_kept(tmp_path, monkeypatch, capsys):
    cfg = config(tmp_path)
    root = pretrained(cfg)
    stub_scores(monkeypatch, {"start": (0.10, 0.20), "step 10": (0.09, 0.19), "step 20": (0.08, 0.17),
                              "step 30": (0.12, 0.16)})
    record = selection.stage_select(cfg)["aligned"]
    assert record["chosen"] == "step 20" and record["beats_start"]
    assert tag(root / "final") == "step 20" and tag(root / "last") == "step 30"
    # relative: the mean of the shares of the start's error removed
    assert record["scores"]["step 20"] == pytest.approx(((0.10 - 0.08) / 0.10 + (0.20 - 0.17) / 0.20) / 2)
    out = capsys.readouterr().out
    assert "final/ (step 20) is better than the start on retrieval tatoeba dev: accuracy@1 92.0 vs 90.0" in out
    assert "is better than the start on alignment de-en dev: AER 17.0 vs 20.0" in out
    assert "no checkpoint beats the start" not in out
    saved = json.loads((root / "selection.json").read_text())
    assert saved["chosen"] == "step 20" and set(saved["candidates"]) == {"start", "step 10", "step 20", "step 30"}
    assert "scratch" not in selection.stage_select(cfg)  # no start model: not selected by default


def test_no_checkpoint_beating_the_start_is_said_in_one_line(tmp_path, monkeypatch, capsys):
    cfg = config(tmp_path)
    root = pretrained(cfg)
    stub_scores(monkeypatch, {"start": (0.10, 0.20), "step 10": (0.11, 0.21), "step 20": (0.15, 0.19),
                              "step 30": (0.12, 0.22)})
    record = selection.stage_select(cfg)["aligned"]
    assert not record["beats_start"] and record["chosen"] == "step 10"  # the least bad
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "no checkpoint beats the start" in ln]
    assert len(lines) == 1 and str(root / "start_model") in lines[0]
    assert tag(root / "final") == "step 10"


def test_a_rerun_reuses_the_scores_and_choosing_the_last_step_restores_it(tmp_path, monkeypatch):
    cfg = config(tmp_path)
    root = pretrained(cfg)
    scored = stub_scores(monkeypatch, {"start": (0.10, 0.20), "step 10": (0.05, 0.10), "step 20": (0.09, 0.19),
                                       "step 30": (0.08, 0.18)})
    selection.stage_select(cfg)
    assert tag(root / "final") == "step 10" and scored == ["start", "step 10", "step 20", "step 30"]
    selection.stage_select(cfg)
    assert len(scored) == 4  # every candidate's stored dev scores reused: same files, same settings
    # another criterion (points) with other dev numbers for step 10's files: the last step wins, final/ is restored
    (root / "ckpt" / "step_10" / "export" / "model.safetensors").write_text("changed")
    scored = stub_scores(monkeypatch, {"start": (0.10, 0.20), "step 10": (0.30, 0.30), "step 20": (0.09, 0.19),
                                       "step 30": (0.08, 0.18)})
    record = selection.stage_select(config(tmp_path, criterion="points"))["aligned"]
    assert scored == ["step 10"] and record["chosen"] == "step 30"
    assert tag(root / "final") == "step 30" and not (root / "last").exists()
    assert record["scores"]["step 30"] == pytest.approx(((0.10 - 0.08) + (0.20 - 0.18)) * 100 / 2)


def test_the_select_section_is_checked_before_anything_runs(tmp_path):
    with pytest.raises(ConfigError, match="select.retrieval: no evaluate.retrieval set 'flores'"):
        selection.check_select_config(config(tmp_path, retrieval=["flores"]))
    with pytest.raises(ConfigError, match="scratch has no start_from"):
        selection.check_select_config(config(tmp_path, variants=["scratch"]))
    with pytest.raises(ConfigError, match="name the dev sets"):
        selection.check_select_config(config(tmp_path, retrieval=[], alignment=[]))
    no_dev = RunConfig.model_validate({**config(tmp_path).model_dump(), "evaluate": {
        "retrieval": {"tatoeba": {"path": "unused", "dev_fraction": 0}}, "alignment": EVALUATE["alignment"]}})
    with pytest.raises(ConfigError, match="tatoeba has no dev part"):
        selection.check_select_config(no_dev)


def test_criterion_degenerate_cases():
    start = {"m": {"error": 0.0}}
    assert selection.criterion(start, {"m": {"error": 0.0}}, "relative") == 0.0
    assert selection.criterion(start, {"m": {"error": 0.1}}, "relative") == -1.0
    assert selection.criterion({"m": {"error": 0.2}}, {"m": {"error": 0.1}}, "points") == pytest.approx(10.0)
