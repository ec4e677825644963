"""`metaxlm plan`, `metaxlm status` and `metaxlm list`: what a run will do (nothing written), what a run directory has
done, is doing and has left, and what a config can name."""

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from pretrain_helpers import TINY

from metaxlm import pipeline
from metaxlm.cli import main
from metaxlm.config import load_config
from metaxlm.packaged import find_config
from metaxlm.plan import format_plan, format_status, plan_run, run_status
from metaxlm.run.layout import RunDir

pytestmark = pytest.mark.usefixtures("one_thread")


def _files(root):
    return {p: p.stat().st_mtime_ns for p in root.rglob("*")}


def test_plan_of_the_demo_config_with_nothing_done(tmp_path):
    cfg = load_config(find_config("demo"), [f"output_dir={tmp_path / 'run'}"])
    plan = plan_run(cfg)
    assert plan.nothing_done and plan.refusal is None
    assert not (tmp_path / "run").exists()  # nothing written, not even the output directory
    assert plan.stage_names == ["vocab", "prepare", "stats", "pretrain", "evaluate", "report"]
    assert {s.name: s.done for s in plan.stages} == {"vocab": False, "prepare": False, "stats": False, "report": False}
    variants = {v.name: v for v in plan.variants}
    assert list(variants) == ["xlm", "metaxlm", "metaxlm_dict", "mlm_only", "xlm_align", "ppa", "veco"]
    xlm, metaxlm, ppa = variants["xlm"], variants["metaxlm"], variants["ppa"]
    assert (xlm.steps, xlm.batch_size, xlm.seq_len, xlm.tokens) == (50, 8, 128, 51_200)
    assert (ppa.steps, ppa.tokens) == (12, 12 * 8 * 128)
    assert xlm.start == "from scratch" and metaxlm.start.startswith("initialized from the English encoder")
    assert ppa.start == "continues metaxlm's final model"
    assert ppa.objectives == {"moco": 1.0, "tlm": 1.0} and ppa.batch_kinds == ["pair", "pair_sides"]
    assert all(v.what == "to pretrain" and v.steps_done == 0 and v.precision.startswith("auto") for v in
               plan.variants)
    evaluation = plan.evaluation
    assert [m.name for m in evaluation.models if not m.final] == ["xlm@step25", "metaxlm@step25"]
    assert len(evaluation.models) == 9 and not any(m.parts_reused for m in evaluation.models)
    spans, translation = evaluation.tasks
    assert (spans.name, spans.type, spans.scenario, len(spans.languages), spans.seeds) == \
        ("spans", "spans", "zero_shot", 12, [0])
    assert len(spans.models) == 7  # final models only (checkpoint_tasks: [])
    assert (translation.languages, translation.models) == (["en", "de"], ["veco"])
    assert len(evaluation.retrieval["demo"]) == 11 and evaluation.alignment == ["grc-en"]
    assert plan.eta.seconds is None
    text = format_plan(plan)
    assert "(nothing done yet)" in text and "50 steps × 8 × 128 = 51,200 tokens" in text
    assert "task spans (demo_spans: spans, zero_shot): 12 languages × 1 seed, on 7 models" in text
    assert "ETA: no timing on record for this CPU" in text


@pytest.fixture(scope="module")
def finished_run(run_template, corpora, tmp_path_factory):
    """A whole tiny run made by the pipeline itself, the records a finished run leaves: vocab (trained again as the
    session's run_template made it, so its prepared data fits), pretrain (a from scratch, b continuing it) and
    evaluate (one retrieval set)."""
    root = tmp_path_factory.mktemp("plan_run")
    shutil.copytree(run_template, root / "run")
    (root / "en-de.tsv").write_text("".join(f"the cat sleeps {i}\tdie Katze schläft {i}\n" for i in range(8)))
    path = root / "c.yaml"
    path.write_text(yaml.safe_dump({
        "output_dir": str(root / "run"), "stages": ["vocab", "pretrain", "evaluate"],
        "data": {"languages": list(corpora), "mono": str(corpora["en"].parent / "{lang}.txt")},
        "vocab": {"size": 120, "sample_sentences": 4000},
        "model": TINY, "train": {"steps": 2, "batch_size": 4, "seq_len": 16, "warmup_steps": 1, "log_every": 1,
                                 "eval_every": 2, "save_every": 2, "eval_sequences": 2, "precision": "fp32"},
        "variants": {"a": {}, "b": {"start_from": "a", "train": {"steps": 4}}},
        "evaluate": {"retrieval": {"r": {"path": str(root / "en-{lang}.tsv"), "languages": ["de"]}},
                     "layers": [0, 2]}}))
    pipeline.run(load_config(path), progress=False)
    return path


def test_plan_after_a_run_says_what_is_reused_and_what_would_be_refused(finished_run):
    run = RunDir(Path(load_config(finished_run).output_dir))
    before = _files(run.root)
    plan = plan_run(load_config(finished_run))
    assert _files(run.root) == before  # the plan writes nothing, locks nothing
    assert not plan.nothing_done and plan.refusal is None
    assert [(s.name, s.done) for s in plan.stages] == [("vocab", True)]  # reused
    a, b = plan.variants
    assert (a.what, b.what) == ("done (reused)", "done (reused)")
    assert (a.tokens, b.tokens) == (2 * 4 * 16, 4 * 4 * 16)
    assert a.tokens_counted == 2 * 4 * 16  # what the engine counted (mono batches are packed: the whole budget)
    assert a.precision == "fp32 (configured)" and b.start == "continues a's final model"
    assert [(m.name, m.done) for m in plan.evaluation.models] == [("a", True), ("b", True)]
    assert plan.eta.seconds == pytest.approx(0.0) and plan.eta.unknown == []  # from timings.json: nothing left

    # a changed setting: the variants pretrained under the old one are refused, as `metaxlm run` would refuse them
    changed = plan_run(load_config(finished_run, ["train.lr=1e-3"]))
    assert "pretrain/a has other settings than the config's (train.lr: 0.0005 when it was pretrained, 0.001 now)" \
        in changed.refusal
    assert changed.variants[0].refused and "would refuse, before writing anything" in format_plan(changed)
    # ... unless pretrained again: then b (which continues a) too, and the evaluation is redone with them
    again = plan_run(load_config(finished_run, ["train.lr=1e-3"]), ("a", "b"))
    assert again.refusal is None and [v.what for v in again.variants] == ["pretrained again from step 0 "
                                                                          "(--recompute)"] * 2
    assert not any(m.parts_reused for m in again.evaluation.models)
    assert again.eta.seconds > 0  # 2 + 4 steps at the measured rates, two models at their measured times
    # a vocabulary made again: named, and its variants refused
    vocab = plan_run(load_config(finished_run, ["vocab.size=140"]))
    assert vocab.stages[0].what == "made again: vocab.size: 120 when it was made, 140 now"
    assert "pretrain/a was pretrained on the vocabulary (vocab.size" in vocab.refusal
    # an evaluation setting changed: its parts are computed again, the models are kept
    layers = plan_run(load_config(finished_run, ["evaluate.layers=[1]"]))
    assert layers.refusal is None and [m.parts_reused for m in layers.evaluation.models] == [0, 0]


HOLDER = textwrap.dedent("""
    import sys, time
    from metaxlm.config import load_config
    from metaxlm.run.info import record_stage_seconds, write_run_info
    from metaxlm.run.lock import run_dir_held

    run = sys.argv[1]
    with run_dir_held(run, "metaxlm run"):
        write_run_info(run, load_config(run + "/config.yaml"))
        record_stage_seconds(run, {"vocab": 1.0, "prepare": 1.0}, unfinished=("pretrain", 5.0))
        print("held", flush=True)
        time.sleep(120)
""")


def test_status_during_and_after_a_run(finished_run, tmp_path):
    done = run_status(load_config(finished_run).output_dir)
    assert not done.running and done.finished
    assert format_status(done).startswith("status: not running: the last invocation finished")

    # the same run in the middle of b: its checkpoint at step 2 of 4, its log at step 3, a process holding it
    run = RunDir(tmp_path / "moved")  # a run directory is read wherever it lies
    shutil.copytree(load_config(finished_run).output_dir, run.root)
    b = run.variant("b")
    shutil.rmtree(b.final)
    shutil.rmtree(b.ckpt / "step_00000004")
    b.summary.unlink()
    (b.ckpt / "latest").write_text("step_00000002")
    logged = [json.loads(line) for line in b.metrics.read_text().splitlines()]
    b.metrics.write_text("".join(json.dumps(r) + "\n" for r in logged if r["step"] <= 3))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run.root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        status = run_status(run.root)
        assert status.running and status.holders[0]["pid"] == holder.pid and status.holders[0]["what"] == \
            "metaxlm run"
        assert status.stage == "pretrain" and status.steps_now == {"b": 3}
        a, b_state = status.plan.variants
        assert a.finished and (b_state.finished, b_state.steps_done) == (False, 2)
        text = format_status(status)
        assert text.startswith(f"status: running: metaxlm run (pid {holder.pid} on ")
        assert "stage pretrain" in text and "  b: pretraining: at step 3 of 4" in text
        assert "  b: to evaluate" in text and "  a: done (reused)" in text
    finally:
        holder.kill()
        holder.wait()
    stopped = run_status(run.root)
    assert not stopped.running and not stopped.finished
    text = format_status(stopped)
    assert "the last invocation stopped in stage pretrain (rerunning the same command resumes)" in text
    assert "  b: resumes from step 2 of 4" in text


def test_status_of_a_directory_that_is_no_run(tmp_path, capsys):
    assert main(["status", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"metaxlm: error: {tmp_path}: no config.yaml, so not a run directory " \
                                      f"(metaxlm run writes it at its start)\n"


def test_list_what_a_config_can_name(capsys):
    assert main(["list", "objectives"]) == 0
    out = capsys.readouterr().out
    assert "  mlm    " in out and "[mono] MLM on packed monolingual text" in out and "[pair_sides]" in out
    assert main(["list", "archs"]) == 0
    out = capsys.readouterr().out
    assert "  bert  a BERT encoder with a masked-LM head" in out and "  veco  " in out
    assert main(["list", "tasks"]) == 0
    out = capsys.readouterr().out
    assert "task types" in out and "  qa   " in out and "  sib200 " in out and "classification, accuracy" in out
    assert main(["list", "languages", "croat"]) == 0
    out = capsys.readouterr().out
    assert "  hr  Croatian" in out and "  de  " not in out
    assert main(["list", "archs", "x"]) == 2
    assert "takes no search text" in capsys.readouterr().err
