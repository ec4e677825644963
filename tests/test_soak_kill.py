"""Kill soak, small (issue 13): a pretraining run with MLM + TLM + DWA + MoCo and an evaluation run (fine-tuning and
probes) are SIGKILLed several times and resumed; each must end bit-identical to an uninterrupted run. Every kill is
aimed at an event the child reports (bench/_killsoak.py pauses it there), never at a time: half of a checkpoint's
optimizer.pt written, a checkpoint renamed into place before `latest` moves, inside the in-training evaluation,
inside the final export after the last checkpoint, inside fine-tuning. The full soak is `python bench/soak_kill.py`.

Also the two resume bugs the soak found: a run killed after its last checkpoint but before the export was "already
done" for `metaxlm run` (no final/, no summary.json), and a run resumed at its last step wrote `"last": {}`.
"""

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import warm_cli
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import _killsoak as ks  # noqa: E402
import soak_kill  # noqa: E402

STEPS, SAVE_EVERY, EVAL_EVERY = 12, 3, 4
# what the pretraining kills aim at, in order: every one is a paused event, so each lands where it is aimed
PRETRAIN_AIMS = ["checkpoint-half", "eval", "checkpoint-unpublished", "export"]


@pytest.fixture(scope="module", autouse=True)
def warm_attempts():
    """The soak's attempts forked warm (see warm_cli) in the workers' one-thread environment, from the second warm
    process: another hash seed than the reference runs'. Module-wide: the module's fixtures soak too."""
    def launch(cmd, *, stdout, stderr, env):
        assert cmd[0] == sys.executable, cmd
        return warm_cli.popen(cmd[2:], script=cmd[1], stdout=stdout, stderr=stderr, zygote=1)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ks, "launch", launch)
        yield


def plain_cli(*args: str) -> subprocess.CompletedProcess:
    """A reference run: forked warm (see warm_cli) in the workers' environment, which has the soaked runs' one
    thread; its hash seed is not the soaked runs' (they start fresh interpreters)."""
    done = warm_cli.run(list(args))
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def pretraining(parallel_template, tmp_path_factory):
    """The uninterrupted reference and the soaked run of one config; the soaked run's directory is also copied as
    the export kill left it (killed after the last checkpoint, before final/ and summary.json)."""
    work = tmp_path_factory.mktemp("soak_pretrain")
    cfg = soak_kill.pretrain_config({"languages": ["en", "de", "ru", "zh"], "mono": "unused/{lang}"}, steps=STEPS,
                                    save_every=SAVE_EVERY, eval_every=EVAL_EVERY)
    cfg["train"]["objectives"]["moco"]["queue_size"] = 10
    config = work / "cfg.yaml"
    config.write_text(yaml.safe_dump(cfg))
    ref, run = work / "ref", work / "run"
    shutil.copytree(parallel_template, ref)
    shutil.copytree(parallel_template, run)
    plain_cli("pretrain", str(config), f"output_dir={ref}", "--no-progress")
    snapshot = work / "killed_after_last_checkpoint"

    def keep_export_kill(attempt: ks.Attempt) -> None:
        if attempt.plan["event"] == "export":
            shutil.copytree(run, snapshot)

    soak = ks.pretrain_soak(config, run, "xlm", steps=STEPS, save_every=SAVE_EVERY, eval_every=EVAL_EVERY,
                            kills=len(PRETRAIN_AIMS), seed=0, work=work, aims=PRETRAIN_AIMS, timeout=300,
                            after_kill=keep_export_kill, say=lambda _: None)
    return {"config": config, "ref": ref / "pretrain" / "xlm", "run": run / "pretrain" / "xlm", "soak": soak,
            "snapshot": snapshot}


def test_pretraining_killed_in_every_phase_ends_bit_identical(pretraining):
    soak = pretraining["soak"]
    attempts = soak["attempts"]
    assert soak["finished"], attempts[-1]["stderr_tail"]
    assert [a["plan"]["event"] for a in attempts if a["killed"]] == PRETRAIN_AIMS
    assert all(a["planned_event_came"] for a in attempts if a["killed"])  # each kill landed where it was aimed
    assert [a["last_event"].split()[0] for a in attempts if a["killed"]] == PRETRAIN_AIMS
    # the half-written optimizer.pt was really in a hidden checkpoint directory when the kill came
    assert ".tmp-step_" in next(a["last_event"] for a in attempts if a["plan"]["event"] == "checkpoint-half")
    comparison = ks.compare_pretraining(pretraining["ref"], pretraining["run"])
    for prop in ("checkpoints", "model_weights", "objectives_state", "optimizer_state", "scheduler_state",
                 "trainer_state", "metrics_lines", "summary"):
        assert comparison[prop] is True, (prop, comparison[prop])


def test_objective_state_is_really_compared(pretraining):
    """The comparison sees the MoCo queue and the DWA head (so `objectives_state: True` means something)."""
    from safetensors.torch import load_file

    state = load_file(str(pretraining["run"] / "final" / "objectives.safetensors"))
    assert any(k.startswith("moco.") and "queue" in k for k in state), sorted(state)
    assert any(k.startswith("dwa.") for k in state), sorted(state)


def test_resume_at_the_last_step_reports_the_last_logged_step(pretraining):
    """The soak's last run resumed at step STEPS (the export kill came after the last checkpoint): the loop did not
    run, and summary.json's `last` is still the last step's line, as in the uninterrupted run."""
    last_attempt = pretraining["soak"]["attempts"][-1]
    assert last_attempt["plan"]["resumed_at"] == STEPS
    summary = json.loads((pretraining["run"] / "summary.json").read_text())
    reference = json.loads((pretraining["ref"] / "summary.json").read_text())
    assert summary["last"]["step"] == STEPS and "loss" in summary["last"]
    assert ks.without_timing(summary["last"]) == ks.without_timing(reference["last"])


def test_run_exports_a_variant_killed_after_its_last_checkpoint(pretraining, tmp_path):
    """`metaxlm run` must not take a variant with every checkpoint but no summary.json for finished."""
    run = tmp_path / "run"
    shutil.copytree(pretraining["snapshot"], run)
    vdir = run / "pretrain" / "xlm"
    assert ks.resume_point(vdir) == STEPS and not (vdir / "summary.json").exists()
    assert not (vdir / "final" / "config.json").exists()
    done = plain_cli("run", str(pretraining["config"]), f"output_dir={run}", "stages=[pretrain]", "--no-progress")
    assert "already done" not in done.stdout
    comparison = ks.compare_pretraining(pretraining["ref"], vdir)
    assert comparison["model_weights"] is True and comparison["summary"] is True, comparison


# -- evaluation ---------------------------------------------------------------------------------------------------

WORDS = "the house is small and the cat sleeps on the red chair near an open window".split()
WORDS_DE = "das Haus ist klein und die Katze schläft auf dem roten Stuhl am offenen Fenster".split()
FINETUNE_STEPS, SEEDS = 6, [0, 1]


def evaluation_config(data: Path, model: Path, out: Path) -> dict:
    task = {"task": "demo_module", "languages": ["en", "de"], "max_train_items": 24,
            "train": str(data / "train.{lang}.jsonl"), "dev": str(data / "dev.{lang}.jsonl"),
            "test": str(data / "test.{lang}.jsonl"),
            "hyperparameters": {"max_steps": FINETUNE_STEPS, "batch_size": 8, "max_seq_len": 32}}
    return {"output_dir": str(out), "data": {"languages": ["en", "de"]}, "variants": {"xlm": {}},
            "evaluate": {"variants": [], "models": {"tiny": str(model)}, "precision": "fp32", "seeds": SEEDS,
                         "tasks": {"toy": task, "toy2": {**task, "hyperparameters": {**task["hyperparameters"],
                                                                                     "lr": 1e-4}}},
                         "retrieval": {"toy": {"path": str(data / "retrieval.en-{lang}.tsv")}},
                         "alignment": {"toy": {"src": str(data / "align.en"), "tgt": str(data / "align.de"),
                                               "gold": str(data / "gold.txt")}}}}


def write_task_data(data: Path) -> None:
    rng = random.Random(0)
    data.mkdir(parents=True)
    for split, langs in (("train", ["en"]), ("dev", ["en"]), ("test", ["en", "de"])):
        for lang in langs:
            words = WORDS if lang == "en" else WORDS_DE
            rows = [{"id": f"p{i % 5}#{i}", "text": " ".join(rng.choices(words, k=6)), "label": "ab"[i % 2]}
                    for i in range(24)]
            (data / f"{split}.{lang}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pairs = [(" ".join(rng.choices(WORDS, k=5)), " ".join(rng.choices(WORDS_DE, k=5))) for _ in range(12)]
    (data / "retrieval.en-de.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in pairs))
    (data / "align.en").write_text("".join(a + "\n" for a, _ in pairs))
    (data / "align.de").write_text("".join(b + "\n" for _, b in pairs))
    (data / "gold.txt").write_text("".join("0-0 1-1 2p2\n" for _ in pairs))


def test_evaluation_killed_in_fine_tuning_ends_with_the_same_results(pretraining, tmp_path):
    model = pretraining["ref"] / "final"  # the uninterrupted pretraining's model
    write_task_data(tmp_path / "data")
    ref_cfg = evaluation_config(tmp_path / "data", model, tmp_path / "ref")
    cfg = evaluation_config(tmp_path / "data", model, tmp_path / "soak")
    (tmp_path / "ref.yaml").write_text(yaml.safe_dump(ref_cfg))
    (tmp_path / "soak.yaml").write_text(yaml.safe_dump(cfg))
    plain_cli("evaluate", str(tmp_path / "ref.yaml"), "--no-progress")
    parts = soak_kill.expected_parts(cfg)
    assert parts["task-toy"] == {"finetune": FINETUNE_STEPS * len(SEEDS)}
    soak = ks.evaluation_soak(tmp_path / "soak.yaml", parts_dir=tmp_path / "soak" / "eval" / "tiny" / "parts",
                              parts=parts, reference_seconds=10.0, kills=2, seed=0, work=tmp_path,
                              aims=[("task-toy", "finetune"), ("task-toy2", "finetune")], timeout=300,
                              say=lambda _: None)
    attempts = soak["attempts"]
    assert soak["finished"], attempts[-1]["stderr_tail"]
    # both kills paused inside fine-tuning (an event the child reported), so where they landed is not luck
    assert [a["phase"] for a in attempts if a["killed"]] == ["fine-tuning", "fine-tuning"]
    assert all(a["last_event"].startswith("finetune ") for a in attempts if a["killed"])
    comparison = ks.compare_results(tmp_path / "ref" / "eval" / "tiny" / "results.json",
                                    tmp_path / "soak" / "eval" / "tiny" / "results.json")
    assert comparison["identical"], comparison
    results = json.loads((tmp_path / "soak" / "eval" / "tiny" / "results.json").read_text())
    assert set(results["tasks"]) == {"toy", "toy2"} and results["retrieval"] and results["alignment"]


def test_kill_plans_spread_over_the_work_left():
    """The pretraining schedule has every kind of kill and ends with the export; occurrences are drawn among the
    next ones. The evaluation schedule sweeps the parts in order, fine-tuning parts twice as often."""
    aims = ks.pretrain_schedule(24, random.Random(0))
    assert len(aims) == 24 and aims[-1] == "export"
    assert {"checkpoint-half", "checkpoint-unpublished", "eval", "random", "startup"} <= set(aims)
    assert aims.count("checkpoint-half") >= 4 and aims.count("eval") >= 4
    rng = random.Random(1)
    assert all(1 <= ks.nth_within(40, 10, rng) <= 8 for _ in range(200))
    assert ks.nth_within(0, 3, rng) == 1
    parts = {"task-a": {"finetune": 10}, "task-b": {"finetune": 10}, "retrieval-r": {"finetune": 0},
             "alignment-w": {"finetune": 0}}
    schedule = ks.evaluation_schedule(parts, 12)
    assert [p for p, _ in schedule] == ["task-a"] * 4 + ["task-b"] * 4 + ["retrieval-r"] * 2 + ["alignment-w"] * 2
    assert [k for p, k in schedule if p == "task-a"] == ["finetune", "random"] * 2
    assert {k for p, k in schedule if not p.startswith("task-")} == {"random"}
