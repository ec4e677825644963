"""A whole `metaxlm run`: the `scale` setting, the whole-run ETA (RunClock), what run_info records, and resume of a
multi-variant run killed between variants and inside one."""

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import warm_cli
import yaml
from pretrain_helpers import TINY, cli, final_weights, metrics

from metaxlm.config import EvalConfig, load_config
from metaxlm.evaluation.recipe import task_specs
from metaxlm.run.clock import RunClock

BASE = {"output_dir": "unused", "data": {"languages": ["en", "de"], "mono": "unused/{lang}"}}


# -- scale ---------------------------------------------------------------------------------------------------
def test_scale_multiplies_every_budget_and_nothing_else(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        **BASE, "scale": 2.5,
        "train": {"steps": 100, "warmup_steps": 10, "eval_every": 20, "save_every": 50, "batch_size": 8},
        "variants": {"xlm": {}, "short": {"train": {"steps": 40, "warmup_steps": 0}}}}))
    cfg = load_config(path)
    assert cfg.train.steps == 100  # the config as given: a saved config.yaml is not scaled twice on reload
    xlm, short = cfg.train_for("xlm"), cfg.train_for("short")
    assert (xlm.steps, xlm.warmup_steps, xlm.eval_every, xlm.save_every) == (250, 25, 50, 125)
    assert (short.steps, short.warmup_steps) == (100, 0)  # a variant's own budget scales too
    assert xlm.batch_size == 8 and xlm.lr == cfg.train.lr
    assert cfg.meta_train.steps == 250
    tiny = load_config(path, ["scale=0.001"]).train_for("xlm")
    assert (tiny.steps, tiny.eval_every, tiny.save_every) == (1, 1, 1)  # never 0 steps

    eval_cfg = EvalConfig(tasks={"a": {"task": "demo_module", "hyperparameters": {"max_steps": 100,
                                                                              "eval_steps": [10, 50]}},
                             "b": {"task": "demo_module", "hyperparameters": {"epochs": 2.0, "max_steps": None}}})
    plain, scaled = task_specs(eval_cfg), task_specs(eval_cfg, 2.5)
    assert scaled["a"].hyperparameters.max_steps == 250 and scaled["a"].hyperparameters.eval_steps == [25, 125]
    assert scaled["b"].hyperparameters.epochs == 5.0 and scaled["b"].hyperparameters.max_steps is None
    assert scaled["a"].hyperparameters.batch_size == plain["a"].hyperparameters.batch_size
    with pytest.raises(Exception, match="scale"):
        load_config(path, ["scale=0"])


# -- the whole-run clock -------------------------------------------------------------------------------------
def test_run_clock_costs_what_is_left_from_measured_rates(tmp_path):
    lines = []
    clock = RunClock(tmp_path / "timings.json", ["prepare", "pretrain", "evaluate", "report"], printer=lines.append)
    clock.plan_pretraining({"a": 100, "b": 100, "c": 0})  # c already trained
    clock.plan_evaluation({"a@step50": False, "a": True, "b": True})
    left, unknown = clock.remaining()
    assert unknown == ["pretraining", "evaluation"] and left == 0.0
    assert "ETA whole run not known yet (pretraining and evaluation not measured)" in clock.line()
    assert "pretrain 1/3 variants" in clock.line()

    clock.done_stage("prepare", 30.0)
    clock.done_variant("a", 100, 200.0)          # 2 s/step: b (unmeasured) is costed at the mean rate
    left, unknown = clock.remaining()
    assert unknown == ["evaluation"] and left == pytest.approx(100 * 2.0)
    assert "ETA whole run > 0:03:20 (evaluation not measured yet)" in lines[-1]
    clock.done_variant("b", 100, 400.0)
    clock.done_model("a@step50", 10.0)           # a checkpoint: finals are not costed from it
    assert clock.remaining()[1] == ["evaluation"]
    clock.done_model("a", 60.0)
    left, unknown = clock.remaining()
    assert unknown == [] and left == pytest.approx(60.0)  # b costed as a final model; report never measured: 0
    assert "evaluate 2/3 models" in lines[-1] and "ETA whole run 0:01:00" in lines[-1]

    # a resumed run starts from the stored measurements
    again = RunClock(tmp_path / "timings.json", ["prepare", "pretrain"], printer=lines.append)
    again.plan_pretraining({"b": 50})
    left, unknown = again.remaining()
    assert unknown == [] and left == pytest.approx(30.0 + 50 * 4.0)


def test_a_model_is_costed_by_its_own_parts_not_the_other_models_mean(tmp_path):
    """VECO's evaluation adds translation fine-tunings the other models do not get: costed by parts, the ETA of the
    models left prices each part as measured (its own model's, else the mean over the models measured on it)."""
    from metaxlm.run.clock import EvaluationPlanned, ModelEvaluated, PartEvaluated, RunEvents

    clock = RunClock(tmp_path / "timings.json", ["evaluate"], printer=lambda _: None)
    events = RunEvents([clock])
    common = ["task-sib", "retrieval-tatoeba"]
    events.emit(EvaluationPlanned({"mlm": True, "tlm": True, "veco": True, "veco2": True},
                                  {"mlm": common, "tlm": common, "veco": [*common, "task-mt_de"],
                                   "veco2": [*common, "task-mt_de"]}))
    for part, seconds in (("task-sib", 50.0), ("retrieval-tatoeba", 10.0)):
        events.emit(PartEvaluated("mlm", part, seconds))
    events.emit(ModelEvaluated("mlm", 60.0))
    left, unknown = clock.remaining()
    # tlm at its parts (60 s); veco's translation part is not measured yet: veco costed at the model mean (60 s)
    assert unknown == [] and left == pytest.approx(60.0 * 3)
    for part, seconds in (("task-sib", 40.0), ("retrieval-tatoeba", 10.0), ("task-mt_de", 600.0)):
        events.emit(PartEvaluated("veco", part, seconds))
    assert clock.remaining()[0] == pytest.approx(55.0 + 0.0 + 655.0)  # tlm, veco (its parts done), veco2
    events.emit(ModelEvaluated("veco", 650.0))
    left, _ = clock.remaining()
    assert left == pytest.approx((45.0 + 10.0) + (45.0 + 10.0 + 600.0))  # tlm, and veco2 with its translation
    stored = json.loads((tmp_path / "timings.json").read_text())["seconds_per_part"]["final"]
    assert stored["task-mt_de"] == {"veco": 600.0} and stored["task-sib"] == {"mlm": 50.0, "veco": 40.0}


def test_run_clock_ignores_an_unreadable_timings_file(tmp_path):
    (tmp_path / "timings.json").write_text("{not json")
    clock = RunClock(tmp_path / "timings.json", ["report"], printer=lambda _: None)
    clock.done_stage("report", 1.0)
    assert json.loads((tmp_path / "timings.json").read_text())["stages"] == {"report": 1.0}


# -- a multi-variant run, killed and resumed -------------------------------------------------------------------
def _run_config(run_template, tmp_path, name: str) -> Path:
    import shutil

    run = tmp_path / name
    shutil.copytree(run_template, run)
    cfg = {"output_dir": str(run), "stages": ["pretrain"],
           "data": {"languages": ["en", "de", "ru", "zh"], "mono": "unused/{lang}"}, "model": TINY,
           "train": {"steps": 30, "batch_size": 8, "seq_len": 32, "warmup_steps": 2, "lr": 1e-3, "log_every": 1,
                     "eval_every": 10, "save_every": 5, "keep_checkpoints": 10, "eval_sequences": 2,
                     "precision": "fp32"},
           # b continues a: the order matters, and b's start must be a's final model after any kill
           "variants": {"a": {}, "b": {"start_from": "a", "train": {"lr": 5e-4}}}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _kill_when(cfg: Path, ready, timeout: float = 180) -> None:
    proc = warm_cli.popen(["run", str(cfg), "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if ready():
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"


def test_multi_variant_run_killed_between_and_inside_variants_resumes_exactly(run_template, tmp_path):
    ref = _run_config(run_template, tmp_path, "ref")
    done = cli("run", str(ref), "--no-progress")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ETA whole run" in done.stdout
    info = json.loads((tmp_path / "ref" / "run_info.json").read_text())
    assert info["cpu"]["model"] and info["wall_seconds"] > 0 and set(info["stage_seconds"]) == {"pretrain"}

    cfg = _run_config(run_template, tmp_path, "run")
    a, b = tmp_path / "run" / "pretrain" / "a", tmp_path / "run" / "pretrain" / "b"
    # 1. between variants: a has finished, b has not saved a checkpoint yet
    _kill_when(cfg, lambda: (a / "summary.json").exists())
    assert not (b / "summary.json").exists()
    # 2. inside b: after one of its checkpoints
    _kill_when(cfg, lambda: (b / "ckpt" / "latest").exists()
               and int((b / "ckpt" / "latest").read_text().split("_")[1]) >= 10)
    assert not (b / "summary.json").exists()
    resumed = cli("run", str(cfg), "--no-progress", zygote=1)  # another hash seed than the ref's
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "pretrain a: already done" in resumed.stdout
    info = json.loads((tmp_path / "run" / "run_info.json").read_text())  # the two killed invocations are kept
    assert info["run_invocations"] == 3 and info["run_interrupted_invocations"] == 2
    assert info["run_seconds"] >= info["wall_seconds"] > 0

    for variant in ("a", "b"):
        ra, rb = metrics(tmp_path / "ref" / "pretrain" / variant), metrics(tmp_path / "run" / "pretrain" / variant)
        assert [r["step"] for r in ra] == [r["step"] for r in rb], variant  # no duplicated or missing lines
        for x, y in zip(ra, rb, strict=True):
            assert {k: v for k, v in x.items() if k != "tokens_per_s"} == \
                {k: v for k, v in y.items() if k != "tokens_per_s"}, (variant, x["step"])
        wa, wb = final_weights(tmp_path / "ref" / "pretrain" / variant), final_weights(tmp_path / "run" / "pretrain" /
                                                                                         variant)
        assert wa.keys() == wb.keys()
        for k in wa:
            assert (wa[k] == wb[k]).all(), (variant, k)  # bit-exact
