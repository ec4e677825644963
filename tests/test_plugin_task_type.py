"""A new task type is one file: a plugin outside the package (tests/regression_task.py) registers a task type and
its benchmark format, and `metaxlm evaluate` and `metaxlm report` run it like a built-in one."""

from __future__ import annotations

import json
import random
from pathlib import Path

import yaml
from pretrain_helpers import cli

from metaxlm.config import ModelConfig
from metaxlm.models import build_mlm
from metaxlm.vocab import load_tokenizer

PLUGIN = Path(__file__).with_name("regression_task.py")
WORDS = {"en": "the house is small and the cat sleeps on the red chair near an open window".split(),
         "de": "das Haus ist klein und die Katze schläft auf dem roten Stuhl am offenen Fenster".split()}


def test_a_plugin_task_type_runs_through_evaluate_and_report(tokenizer_dir, tmp_path):
    model_dir = tmp_path / "model"
    tok = load_tokenizer(tokenizer_dir)
    build_mlm(ModelConfig(layers=1, hidden=32, heads=2, ffn=64, max_positions=64), tok, seed=0).save_pretrained(
        str(model_dir))
    tok.save_pretrained(str(model_dir))
    rng = random.Random(0)
    data = tmp_path / "data"
    data.mkdir()
    for split, langs in (("train", ["en"]), ("test", ["en", "de"])):
        for lang in langs:
            rows = []
            for i in range(24):
                words = rng.choices(WORDS[lang], k=rng.randint(2, 8))
                rows.append({"id": f"s{i}", "text": " ".join(words), "score": len(words) / 8})  # longer: higher
            (data / f"{split}.{lang}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = tmp_path / "sts_toy.yaml"
    task.write_text(yaml.safe_dump({
        "type": "regression", "format": "scored_jsonl", "metric": "pearson", "languages": ["en", "de"],
        "train": str(data / "train.{lang}.jsonl"), "test": str(data / "test.{lang}.jsonl"), "seeds": [0],
        "hyperparameters": {"max_steps": 4, "batch_size": 8, "max_seq_len": 32, "lr": 1e-3}}))
    run_dir = tmp_path / "run"
    config = tmp_path / "run.yaml"
    plan = {"output_dir": str(run_dir), "data": {"languages": ["en", "de"]}, "plugins": [str(PLUGIN)],
            "evaluate": {"variants": [], "models": {"tiny": str(model_dir)}, "tasks": {"sts": {"task": str(task)}},
                         "retrieval": {}, "alignment": {}}}
    config.write_text(yaml.safe_dump(plan))

    evaluated = cli("evaluate", str(config), "--no-progress")
    assert evaluated.returncode == 0, evaluated.stderr
    entry = json.loads((run_dir / "eval" / "tiny" / "results.json").read_text())["tasks"]["sts"]
    assert (entry["type"], entry["metric"], entry["scenario"]) == ("regression", "pearson", "zero_shot")
    assert entry["report_hints"]["names"] == {"pearson": "Pearson r"}  # the type's own declaration
    assert set(entry["per_language"]) == {"en", "de"}
    assert all(-1.0 <= s["mean"] <= 1.0 for s in entry["per_language"].values())

    reported = cli("report", str(run_dir))
    assert reported.returncode == 0, reported.stderr
    markdown = (run_dir / "report" / "report.md").read_text()
    assert "sts" in markdown and "pearson" in markdown

    # without the plugin, the type is unknown: one line naming it and the registered ones
    plan.pop("plugins")
    config.write_text(yaml.safe_dump(plan))
    failed = cli("evaluate", str(config), "--no-progress")
    assert failed.returncode != 0 and "Traceback" not in failed.stderr
    assert ("unknown task type 'regression' (registered: classification, qa, spans, tagging, translation)"
            in failed.stderr)
