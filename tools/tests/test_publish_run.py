from pathlib import Path

from tools.publish_run import main, publish


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "compare"
    files = {"config.yaml": "seed: 0\n", "run_info.json": "{}", "timings.json": "{}", "stats.json": "{}",
             "report/report.md": "# report\n![](figures/a.png)\n", "report/report.html": "<html></html>",
             "report/figures/a.png": "png", "comparison.json": "{}",
             "comparison.md": "# Pretraining comparison\n![held-out loss](heldout_curves.png)\n",
             "heldout_curves.png": "curves",
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
    (dest / "finished-runs" / "m").mkdir(parents=True)  # an archive of finished runs kept there: the run's input
    (dest / "finished-runs" / "m" / "en-seed0.json").write_text("{}")
    written = publish(run, dest)
    assert (dest / "finished-runs" / "m" / "en-seed0.json").read_text() == "{}"
    written = [name for name in written if not name.startswith("finished-runs/")]
    assert written == ["config.yaml", "figures/a.png", "figures/heldout_curves.png", "pretraining.json",
                       "pretraining.md", "report.md",
                       "results.mlm_only.json", "results.ppa@step40.json", "run_info.json", "timings.json"]
    assert (dest / "report.md").read_text() == (run / "report/report.md").read_text()
    assert (dest / "results.ppa@step40.json").read_text() == '{"model_name": "ppa@step40"}'
    # the pretraining comparison's figures travel with it: no link in the published page points at nothing
    assert (dest / "pretraining.md").read_text() == ("# Pretraining comparison\n"
                                                     "![held-out loss](figures/heldout_curves.png)\n")
    assert (dest / "figures/heldout_curves.png").read_text() == "curves"
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


def test_a_comparison_figure_never_overwrites_a_report_figure(tmp_path, capsys):
    run, dest = _run(tmp_path), tmp_path / "published"
    (run / "report/figures/heldout_curves.png").write_text("the report's own")
    assert main([str(run), str(dest)]) == 2
    assert "heldout_curves.png" in capsys.readouterr().err and not dest.exists()


def test_a_comparison_figure_the_report_already_has_is_linked_not_copied(tmp_path):
    run, dest = _run(tmp_path), tmp_path / "published"
    (run / "report/figures/pretraining_heldout_curves.png").write_text("curves")  # the report's copy, same bytes
    written = publish(run, dest)
    assert "figures/heldout_curves.png" not in written
    assert "](figures/pretraining_heldout_curves.png)" in (dest / "pretraining.md").read_text()
