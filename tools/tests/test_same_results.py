"""tools/same_results.py: two runs compared weight file by weight file, results.json by results.json."""

from __future__ import annotations

import json

import torch
from safetensors.torch import save_file

from tools.same_results import compare, main


def _run(root, weight: float, score: float, model_dir: str):
    (root / "pretrain" / "x" / "final").mkdir(parents=True)
    save_file({"w": torch.full((2, 2), weight)}, str(root / "pretrain" / "x" / "final" / "model.safetensors"))
    (root / "eval" / "x").mkdir(parents=True)
    (root / "eval" / "x" / "results.json").write_text(json.dumps(
        {"model_name": "x", "model_dir": model_dir, "tasks": {"t": {"per_language": {"de": {"mean": score}}}}}))
    return root


def test_same_runs_pass_and_each_difference_is_named(tmp_path, capsys):
    before = _run(tmp_path / "before", 1.0, 0.5, "/a")
    assert compare(before, _run(tmp_path / "same", 1.0, 0.5, "/elsewhere")) == []  # paths do not count
    assert main([str(before), str(tmp_path / "same")]) == 0
    other = _run(tmp_path / "other", 1.001, 0.25, "/a")
    assert compare(before, other) == ["weights pretrain/x/final/model.safetensors: different bytes",
                                      "eval/x/results.json: different results"]
    assert main([str(before), str(other)]) == 1 and "different bytes" in capsys.readouterr().out
