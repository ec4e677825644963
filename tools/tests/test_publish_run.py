from pathlib import Path

from tools.publish_run import main, publish


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "compare"
    files = {"config.yaml": "seed: 0\n", "run_info.json": "{}", "timings.json": "{}", "stats.json": "{}",
             "report/report.md": "# report\n![](figures/a.png)\n", "report/report.html": "<html></html>",
             "report/figures/a.png": "png", "comparison.json": "{}", "comparison.md": "# Pretraining comparison\n",
             "eval/mlm_only/results.json": '{"model_name": "mlm_only"}',
             "eval/ppa@step40/results.json": '{"model_name": "ppa@step40"}',
             "eval/mlm_only/parts/sib200.json": "{}",
             "eval/mlm_only/finetune/sib200/seed0/model.safetensors": "weights",
             "pretrain/mlm_only/final/model.safetensors": "weights", "prepared/train/data-00000.arrow": "rows"}
    for name, text in files.items():
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text(text)
    return run


def test_publishes_the_small_results_and_nothing_else(tmp_path):
    run, dest = _run(tmp_path), tmp_path / "docs" / "results" / "compare"
    dest.mkdir(parents=True)
    (dest / "results.gone.json").write_text("{}")  # an earlier run's model: replaced with the whole directory
    written = publish(run, dest)
    assert written == ["config.yaml", "figures/a.png", "pretraining.json", "pretraining.md", "report.md",
                       "results.mlm_only.json", "results.ppa@step40.json", "run_info.json", "timings.json"]
    assert (dest / "report.md").read_text() == (run / "report/report.md").read_text()
    assert (dest / "results.ppa@step40.json").read_text() == '{"model_name": "ppa@step40"}'
    assert not list(dest.rglob("*.safetensors")) and not list(dest.rglob("*.arrow"))
    assert sorted(p.name for p in dest.parent.iterdir()) == ["compare"]  # no temporary directory left


def test_an_unreported_run_is_one_clear_error_and_touches_nothing(tmp_path, capsys):
    run, dest = _run(tmp_path), tmp_path / "published"
    (run / "report/report.md").unlink()
    dest.mkdir()
    (dest / "report.md").write_text("the earlier one")
    assert main([str(run), str(dest)]) == 2
    err = capsys.readouterr().err
    assert str(run) in err and "report/report.md" in err
    assert (dest / "report.md").read_text() == "the earlier one"
