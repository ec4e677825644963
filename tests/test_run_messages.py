"""What a run says, and no more: a stopped command says whether and how a rerun resumes; the pretraining comparison
is a short plain summary on the terminal (the table in comparison.md), with no Δ row when there is nothing to compare
and its languages in the config's order in the file and the report alike; a report with no evaluation is titled by
what it holds; a training run's precision is said once (the resume line itself: tests/test_pretrain.py,
tests/test_finetune_checkpoint.py)."""

import json
import re
from pathlib import Path

import pytest
import yaml

from metaxlm.cli import main
from metaxlm.run.processes import Terminated


# -- Ctrl-C and SIGTERM --------------------------------------------------------------------------------------------
@pytest.fixture
def config(tmp_path) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump({"output_dir": str(tmp_path / "run"), "stages": ["pretrain"],
                                    "data": {"languages": ["en", "de"], "mono": "unused/{lang}"},
                                    "train": {"precision": "fp32"}}))
    return path


def checkpoint(tmp_path, step: int) -> Path:
    """A pretraining checkpoint of variant xlm as the engine leaves it: ckpt/latest naming a complete step dir."""
    ckpt = tmp_path / "run" / "pretrain" / "xlm" / "ckpt"
    (ckpt / f"step_{step:08d}").mkdir(parents=True)
    (ckpt / f"step_{step:08d}" / "trainer_state.json").write_text(json.dumps({"step": step}))
    (ckpt / "latest").write_text(f"step_{step:08d}")
    return ckpt / f"step_{step:08d}"


def stopped(monkeypatch, capsys, where: str, argv: list[str], stop: type[BaseException] = KeyboardInterrupt):
    """main(argv) with the work at `where` (module:function) stopped by `stop`: (exit code, the CLI's own lines on
    stderr)."""
    module, name = where.split(":")

    def stops(*args, **kwargs):
        raise stop

    monkeypatch.setattr(f"{module}.{name}", stops)
    code = main(argv)
    return code, [line for line in capsys.readouterr().err.splitlines() if line.startswith("metaxlm:")]


@pytest.mark.parametrize("stop, code, said", [(KeyboardInterrupt, 130, "interrupted"),
                                              (Terminated, 143, "terminated (SIGTERM)")], ids=["ctrl-c", "sigterm"])
def test_a_stopped_run_says_that_rerunning_it_resumes(stop, code, said, config, monkeypatch, capsys):
    assert stopped(monkeypatch, capsys, "metaxlm.pipeline:run", ["run", str(config)], stop) == (code, [
        f"metaxlm: {said}; rerun the same command to resume (finished stages and variants are kept; pretraining "
        f"continues from its last checkpoint)"])


def test_a_run_recomputing_a_variant_says_to_rerun_without_it(config, monkeypatch, capsys):
    _, lines = stopped(monkeypatch, capsys, "metaxlm.pipeline:run", ["run", str(config), "--recompute", "xlm"])
    assert lines == ["metaxlm: interrupted; rerun it without --recompute to resume (with it, xlm would be "
                     "pretrained from the start again)"]


def test_a_stopped_pretraining_names_its_checkpoint_and_how_to_continue(config, tmp_path, monkeypatch, capsys):
    where, argv = "metaxlm.pretrain.variant:run_pretrain", ["pretrain", str(config), "--no-progress"]
    assert stopped(monkeypatch, capsys, where, argv)[1] == [
        "metaxlm: interrupted; xlm had written no checkpoint yet: a rerun starts it again"]
    step = checkpoint(tmp_path, 40)
    assert stopped(monkeypatch, capsys, where, argv)[1] == [
        f"metaxlm: interrupted; rerun it with --resume to continue xlm from step 40 (checkpoint {step})"]
    assert stopped(monkeypatch, capsys, where, [*argv, "--resume"])[1] == [
        f"metaxlm: interrupted; rerun the same command to resume xlm from step 40 (checkpoint {step})"]
    assert stopped(monkeypatch, capsys, where, [*argv, "--resume-from", str(step)])[1] == [
        f"metaxlm: interrupted; rerun it with --resume instead of --resume-from to continue xlm from step 40 "
        f"(checkpoint {step})"]


def test_evaluate_and_finetune_say_a_rerun_resumes_and_other_commands_say_nothing_more(tmp_path, monkeypatch):
    from argparse import Namespace

    from metaxlm.cli import build_parser
    from metaxlm.run.resume import how_to_resume

    parse = build_parser().parse_args
    assert how_to_resume(parse(["evaluate", "cfg.yaml"])) == \
        "rerun the same command to resume (finished parts and fine-tuning runs are kept)"
    assert how_to_resume(parse(["finetune", "sib200", "--model", "m", "--out", "o"])) == \
        "rerun the same command to resume (the finished language and seed runs in --out are kept)"
    for argv in (["data", "check", "x.txt", "--format", "text"], ["translate", "--model", "m"],
                 ["vocab", "train", "cfg.yaml"]):
        assert how_to_resume(parse(argv)) == "", argv  # their work is redone: no promise
    # an unreadable config: nothing sure to say, and no error while the user is leaving
    assert how_to_resume(Namespace(command="pretrain", config=str(tmp_path / "missing.yaml"), overrides=[],
                                   variant=None, resume=True, resume_from=None)) == ""


# -- the pretraining comparison ------------------------------------------------------------------------------------
@pytest.fixture
def figures_not_drawn(monkeypatch):
    """Figures laid out, not drawn (as tools/regenerate_reports.py --check): the tests read the markdown."""
    from metaxlm.report import plots

    def close_only(fig, path):
        Path(path).write_bytes(b"")
        plots._pyplot().close(fig)

    monkeypatch.setattr(plots, "_save", close_only)


def comparison_run(tmp_path, variants: list[str], languages: list[str]) -> Path:
    """A run dir whose variants logged held-out losses (de lowest, then en, ru, zh), the config listing `languages`."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"output_dir": str(run), "data": {"languages": languages},
                                                     "variants": {v: {} for v in variants}}))
    for i, variant in enumerate(variants):
        metrics = run / "pretrain" / variant / "metrics.jsonl"
        metrics.parent.mkdir(parents=True)
        metrics.write_text("".join(json.dumps({"step": s, **{f"heldout_loss/{lang}": 5 + j / 10 - i / 10 - s / 100
                                                              for j, lang in enumerate(sorted(languages))}}) + "\n"
                                   for s in (5, 10)))
    return run


def test_the_terminal_gets_a_plain_summary_and_the_file_the_table(tmp_path):
    from metaxlm.report.pretraining import comparison_summary, pretraining_comparison, write_comparison

    run = comparison_run(tmp_path, ["xlm", "metaxlm"], ["en", "de", "ru"])
    comparison = pretraining_comparison(run, ["xlm", "metaxlm"], pivot="en")
    said = comparison_summary(comparison, write_comparison(run, comparison))
    assert said.splitlines() == [
        "pretraining: held-out MLM loss, mean of 2 languages other than en (lower is better)",
        "  xlm      5.000  (step 10)",
        "  metaxlm  4.900  (step 10; -0.100 vs xlm)",
        f"per language: {run / 'comparison.md'}"]
    table = (run / "comparison.md").read_text()
    assert "| Δ vs xlm | +0.000 | -0.100 |" in table
    assert "![" not in table  # the figures are the report stage's: no links to files not drawn


def test_one_variant_has_no_difference_to_itself(tmp_path, figures_not_drawn):
    from metaxlm.report.evaluation import PRETRAINING_TITLE, TITLE, write_report
    from metaxlm.report.pretraining import compare_variants, comparison_summary

    run = comparison_run(tmp_path, ["xlm"], ["en", "de"])
    comparison = compare_variants(run, ["xlm"], pivot="en")
    assert "Δ" not in (run / "comparison.md").read_text()
    assert "vs" not in comparison_summary(comparison, run / "comparison.md")
    md = write_report([run])["markdown"].read_text()
    assert "Δ" not in md and "mean without the pivot" in md
    # titled by what it holds: a pretraining comparison, no evaluation
    assert md.startswith(f"# {PRETRAINING_TITLE}\n") and TITLE not in md


def test_languages_keep_the_configs_order_in_the_file_and_the_report(tmp_path, figures_not_drawn):
    from metaxlm.report.evaluation import write_report
    from metaxlm.report.pretraining import compare_variants

    order = ["en", "zh", "de", "ru"]  # neither alphabetical nor by size
    run = comparison_run(tmp_path, ["xlm", "metaxlm"], order)
    assert compare_variants(run, ["xlm", "metaxlm"], pivot="en")["languages"] == order
    rows = re.compile(r"^\| (\w\w) \|", re.MULTILINE)
    assert rows.findall((run / "comparison.md").read_text()) == order
    assert rows.findall(write_report([run])["markdown"].read_text()) == order


# -- precision -----------------------------------------------------------------------------------------------------
def test_the_training_setup_leaves_saying_the_precision_to_the_run(monkeypatch, capsys):
    """training_accelerator decides quietly: the engine's `pretrain VARIANT: precision ...` line is the one."""
    from metaxlm.compute import precision

    monkeypatch.setattr(precision, "_announced", set())  # as in a new process
    _, choice = precision.training_accelerator("auto")
    assert choice.precision == "fp32"  # the test suite's decision (METAXLM_PRECISION_AUTO)
    assert capsys.readouterr().err == ""


def test_an_interrupt_inside_the_cpu_fast_path_stays_an_interrupt():
    """Ctrl-C landing where torch has taken the fast path's mode off its stack (inside handle_torch_function) must
    still reach the CLI as KeyboardInterrupt (its one line), not as "trying to pop from empty mode stack"."""
    import torch

    from metaxlm.compute.fastpath import CPUTrainingFastPath

    with pytest.raises(KeyboardInterrupt):
        with CPUTrainingFastPath():
            torch._C._pop_torch_function_stack()  # what the interrupt leaves: the mode already off the stack
            raise KeyboardInterrupt
    assert torch._C._len_torch_function_stack() == 0
    with pytest.raises(ValueError), CPUTrainingFastPath():  # any other error: the mode is taken off as always
        raise ValueError
    assert torch._C._len_torch_function_stack() == 0


def summary_with_objectives(run_dir: Path, variant: str, objectives: dict) -> None:
    (run_dir / "pretrain" / variant / "summary.json").write_text(json.dumps(
        {"steps": 10, "settings": {"train": {"objectives": objectives}}}))


def test_a_variant_that_trains_no_mlm_head_has_no_heldout_mlm_loss_to_compare(tmp_path, figures_not_drawn):
    """MoCo + self_align (configs/align-encoder.yaml) never train the MLM head: its held-out MLM loss is an untrained
    head's, so the terminal, comparison.md and the report leave it out with one line saying why; a variant that trains
    MLM (here with DWA, whose own loss leaves the head out) stays."""
    from metaxlm.report.evaluation import write_report
    from metaxlm.report.pretraining import compare_variants, comparison_summary

    run = comparison_run(tmp_path, ["xlm", "align"], ["en", "de"])
    summary_with_objectives(run, "xlm", {"mlm": {}, "dwa": {}})
    summary_with_objectives(run, "align", {"moco": {}, "self_align": {}})
    comparison = compare_variants(run, ["xlm", "align"], pivot="en")
    assert list(comparison["final"]) == ["xlm"] and comparison["untrained_head"] == {"align": ["moco", "self_align"]}
    said = comparison_summary(comparison, run / "comparison.md")
    assert "align (moco, self_align): no objective trains the MLM head" in said and "  align " not in said
    md = write_report([run])["markdown"].read_text()
    assert "| language | xlm |" in md and "not compared for align (moco, self_align)" in md

    # the only variant: no table, no figures, the line alone (also from a comparison.json written before
    # comparisons named such variants: the report finds them from the summaries)
    (tmp_path / "alone").mkdir()
    run = comparison_run(tmp_path / "alone", ["align"], ["en", "de"])
    summary_with_objectives(run, "align", {"moco": {}, "self_align": {}})
    comparison = compare_variants(run, ["align"], pivot="en")
    assert comparison["final"] == {} and "|" not in (run / "comparison.md").read_text()
    assert comparison_summary(comparison, run / "comparison.md").startswith("pretraining: Held-out MLM loss not")
    older = {"metric": "held-out MLM loss", "pivot": "en", "languages": ["en", "de"], "steps": {"align": 10},
             "final": {"align": {"en": 11.6, "de": 12.0}}, "mean_non_pivot": {"align": 12.0}, "baseline": "align",
             "curves": {"align": {"10": 12.0}}, "delta_vs_baseline": {"align": 0.0}}
    (run / "comparison.json").write_text(json.dumps(older))
    md = write_report([run])["markdown"].read_text()
    assert "12.000" not in md and "not compared for align (moco, self_align)" in md
