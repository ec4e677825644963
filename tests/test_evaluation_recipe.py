"""The evaluate and report stages end to end on a tiny run: which models are evaluated (variants, checkpoints,
extra model dirs), the results.json schema, resuming from stored parts, recomputing changed parts, the report."""

import json
import random
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from metaxlm.config import load_config
from metaxlm.errors import ConfigError, MetaXLMError
from metaxlm.evaluation import recipe
from metaxlm.evaluation.recipe import planned_evaluation
from metaxlm.metrics import lowest_aer_layer
from metaxlm.pipeline import run
from metaxlm.pretrain.variant import export_for_evaluation
from metaxlm.vocab import load_tokenizer

WORDS = "the house is small and the cat sleeps on the red chair near an open window".split()
WORDS_DE = "das Haus ist klein und die Katze schläft auf dem roten Stuhl am offenen Fenster".split()


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def save_tiny_mlm(tokenizer_dir: Path, out: Path, seed: int) -> None:
    from metaxlm.config import ModelConfig
    from metaxlm.models import build_mlm

    tok = load_tokenizer(tokenizer_dir)
    model = build_mlm(ModelConfig(layers=2, hidden=32, heads=2, ffn=64, max_positions=64), tok, seed=seed)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))


@pytest.fixture
def tiny_run(tokenizer_dir, tmp_path) -> Path:
    """A run dir as the pretrain stage leaves it (vocab, one variant with final/ and two checkpoints), plus a
    tiny classification task, retrieval pairs and a gold alignment."""
    run_dir = tmp_path / "run"
    shutil.copytree(tokenizer_dir, run_dir / "vocab")
    variant = run_dir / "pretrain" / "xlm"
    save_tiny_mlm(tokenizer_dir, variant / "final", seed=0)
    for step in (2, 4):
        save_tiny_mlm(tokenizer_dir, variant / "ckpt" / f"step_{step:08d}", seed=step)
    (variant / "summary.json").write_text(json.dumps({"steps": 4}))
    rng = random.Random(0)
    data = tmp_path / "data"
    (data / "task").mkdir(parents=True)
    for split, langs in (("train", ["en"]), ("dev", ["en"]), ("test", ["en", "de"])):
        for lang in langs:
            words = WORDS if lang == "en" else WORDS_DE
            rows = [{"id": f"p{i % 5}#{i}", "text": " ".join(rng.choices(words, k=6)), "label": "ab"[i % 2]}
                    for i in range(24)]
            (data / "task" / f"{split}.{lang}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pairs = [(" ".join(rng.choices(WORDS, k=5)), " ".join(rng.choices(WORDS_DE, k=5))) for _ in range(12)]
    (data / "retrieval.en-de.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in pairs))
    (data / "align.en").write_text("".join(a + "\n" for a, _ in pairs))
    (data / "align.de").write_text("".join(b + "\n" for _, b in pairs))
    (data / "gold.txt").write_text("".join("0-0 1-1 2p2\n" for _ in pairs))
    cfg = {
        "output_dir": str(run_dir), "stages": ["evaluate", "report"],
        "data": {"languages": ["en", "de"]}, "train": {"steps": 4},  # what summary.json says it was trained for
        "variants": {"xlm": {}},
        "evaluate": {
            "tasks": {"toy": {"task": "demo_module", "languages": ["en", "de"], "max_train_items": 24,
                              "train": str(data / "task" / "train.{lang}.jsonl"),
                              "dev": str(data / "task" / "dev.{lang}.jsonl"),
                              "test": str(data / "task" / "test.{lang}.jsonl"),
                              "hyperparameters": {"max_steps": 3, "batch_size": 8, "max_seq_len": 32}}},
            "seeds": [0, 1],
            "retrieval": {"toy": {"path": str(data / "retrieval.en-{lang}.tsv")}},
            "alignment": {"toy": {"src": str(data / "align.en"), "tgt": str(data / "align.de"),
                                  "gold": str(data / "gold.txt")}},
            "checkpoints": True, "checkpoint_tasks": [],
        },
    }
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    export_for_evaluation(load_config(tmp_path / "cfg.yaml"), "xlm", progress=False)  # as the pretrain stage does
    return tmp_path / "cfg.yaml"


def test_evaluate_and_report_stages(tiny_run):
    cfg = load_config(tiny_run)
    run(cfg, progress=False)
    eval_dir = Path(cfg.output_dir) / "eval"
    assert sorted(p.name for p in eval_dir.iterdir()) == ["xlm", "xlm@step2"]  # step 4 is the final model
    final = json.loads((eval_dir / "xlm" / "results.json").read_text())
    assert final["variant"] == "xlm" and final["step"] == 4
    toy = final["tasks"]["toy"]
    assert toy["scenario"] == "zero_shot" and toy["seeds"] == [0, 1]
    assert set(toy["per_language"]) == {"en", "de"} and len(toy["per_language"]["de"]["runs"]) == 2
    gap = toy["per_language"]["en"]["mean"] - toy["per_language"]["de"]["mean"]
    assert toy["transfer_gap"]["mean"] == pytest.approx(gap)
    retrieval = final["retrieval"]["toy"]
    assert retrieval["layers"] == [0, 1, 2] and len(retrieval["average"]) == 3
    # 12 pairs: the first 4 are dev (where the layer is chosen), the 8 others test
    assert retrieval["per_language"]["de"]["pairs"] == 8 and retrieval["split"]["dev_pairs"] == {"de": 4}
    assert retrieval["chosen_on"] == "dev" and retrieval["chosen_layer"] in retrieval["layers"]
    alignment = final["alignment"]["toy"]  # 12 pairs: the first ceil(0.3 · 12) = 4 are dev
    assert alignment["method"] == "ot" and alignment["split"] == {"dev_fraction": 0.3, "dev_pairs": 4,
                                                                  "test_pairs": 8}
    assert len(alignment["dev"]["aer"]) == len(alignment["test"]["aer"]) == 3
    assert all(0.0 <= a <= 1.0 for a in alignment["test"]["aer"] + alignment["dev"]["aer"])
    assert alignment["chosen_on"] == "dev"
    assert alignment["chosen_layer"] == lowest_aer_layer(alignment["layers"], alignment["dev"]["aer"])
    checkpoint = json.loads((eval_dir / "xlm@step2" / "results.json").read_text())
    assert "tasks" not in checkpoint and checkpoint["step"] == 2  # checkpoint_tasks: [] -> probes only
    report = Path(cfg.output_dir) / "report"
    assert (report / "report.html").exists() and "toy" in (report / "report.md").read_text()


def test_alignment_dev_fraction_per_set(tiny_run):
    """`dev_fraction: 0` scores the whole set as test at the fixed default layer, which must then be evaluated."""
    probes_only = ["evaluate.checkpoints=false", "evaluate.tasks={}", "evaluate.retrieval={}"]
    cfg = load_config(tiny_run, [*probes_only, "evaluate.alignment.toy.dev_fraction=0"])
    [result] = recipe.evaluate_run(cfg, progress=False)
    whole = result["alignment"]["toy"]
    assert "dev" not in whole and whole["split"] == {"dev_fraction": 0, "dev_pairs": 0, "test_pairs": 12}
    assert (whole["chosen_layer"], whole["chosen_on"]) == (1, "fixed default")  # round(2 · 7/12)
    cfg = load_config(tiny_run, [*probes_only, "evaluate.alignment.toy.dev_fraction=0", "evaluate.layers=[0,2]"])
    with pytest.raises(ConfigError, match=r"evaluate.alignment.toy: without a dev part .* default layer 1"):
        recipe.evaluate_run(cfg, progress=False)
    with pytest.raises(ConfigError, match="dev_fraction"):
        load_config(tiny_run, ["evaluate.alignment.toy.dev_fraction=1.0"])


def test_alignment_max_pairs_scores_the_first_pairs(tiny_run, tmp_path):
    """`max_pairs: 5` scores exactly what a set of the file's first 5 pairs scores (dev and test split among them),
    and the stored part is recomputed when it changes."""
    probes_only = ["evaluate.checkpoints=false", "evaluate.tasks={}", "evaluate.retrieval={}"]
    cfg = load_config(tiny_run, [*probes_only, "evaluate.alignment.toy.max_pairs=5"])
    spec = cfg.evaluate.alignment["toy"]
    head = {}
    for side in ("src", "tgt", "gold"):
        head[side] = tmp_path / Path(getattr(spec, side)).name
        head[side].write_text("".join(Path(getattr(spec, side)).read_text().splitlines(keepends=True)[:5]))
    [limited] = recipe.evaluate_run(cfg, progress=False)
    limited = limited["alignment"]["toy"]
    assert limited["pairs"] == 5 and limited["split"] == {"dev_fraction": 0.3, "dev_pairs": 2, "test_pairs": 3}
    first_five = load_config(tiny_run, [*probes_only,
                                        *(f"evaluate.alignment.toy.{side}={path}" for side, path in head.items())])
    [whole] = recipe.evaluate_run(first_five, progress=False)
    assert whole["alignment"]["toy"]["test"] == limited["test"] and whole["alignment"]["toy"]["dev"] == limited["dev"]
    [all_pairs] = recipe.evaluate_run(load_config(tiny_run, probes_only), progress=False)
    assert all_pairs["alignment"]["toy"]["pairs"] == 12


def test_checkpoints_of_the_named_variants_only(tiny_run, tokenizer_dir):
    run_dir = load_config(tiny_run).output_dir
    save_tiny_mlm(tokenizer_dir, Path(run_dir) / "pretrain" / "other" / "final", seed=3)
    save_tiny_mlm(tokenizer_dir, Path(run_dir) / "pretrain" / "other" / "ckpt" / "step_00000002", seed=5)
    both = ["variants={xlm: {}, other: {}}"]
    export_for_evaluation(load_config(tiny_run, both), "other", progress=False)
    names = [m.name for m in recipe.models_to_evaluate(load_config(tiny_run, both))]
    assert names == ["xlm@step2", "xlm", "other@step2", "other"]
    only = load_config(tiny_run, [*both, "evaluate.checkpoint_variants=[other]"])
    assert [m.name for m in recipe.models_to_evaluate(only)] == ["xlm", "other@step2", "other"]
    assert list(planned_evaluation(only)) == ["xlm", "other@step2", "other"]  # the ETA's prediction agrees
    with pytest.raises(ConfigError, match="checkpoint_variants: no variant 'nope'"):
        recipe.models_to_evaluate(load_config(tiny_run, ["evaluate.checkpoint_variants=[nope]"]))


def test_finished_parts_are_reused_and_changed_ones_recomputed(tiny_run, monkeypatch):
    cfg = load_config(tiny_run, ["evaluate.checkpoints=false", "evaluate.tasks={}"])
    recipe.evaluate_run(cfg, progress=False)
    calls = []
    original = recipe.evaluate_retrieval
    monkeypatch.setattr(recipe, "evaluate_retrieval", lambda *a, **k: calls.append(1) or original(*a, **k))
    recipe.evaluate_run(cfg, progress=False)
    assert calls == []  # resumed: the stored part is used
    changed = load_config(tiny_run, ["evaluate.checkpoints=false", "evaluate.tasks={}",
                                     "evaluate.retrieval.toy.max_pairs=6"])
    results = recipe.evaluate_run(changed, progress=False)
    assert calls == [1] and results[0]["retrieval"]["toy"]["per_language"]["de"]["pairs"] == 4  # 6: 2 dev, 4 test
    # the probes' precision changes their numbers: a part of another precision is not reused
    recipe.evaluate_run(load_config(tiny_run, ["evaluate.checkpoints=false", "evaluate.tasks={}",
                                               "evaluate.retrieval.toy.max_pairs=6", "evaluate.precision=fp32"]),
                        progress=False)
    assert calls == [1, 1]


def test_the_run_clock_measures_only_a_model_evaluated_in_full(tiny_run, tmp_path):
    """A resumed run reuses a model's stored evaluation in a second: that is not the model's cost (the ETA of the
    remaining models, and timings.json, would otherwise say seconds for hours of work)."""
    from metaxlm.run.clock import RunClock, RunEvents

    cfg = load_config(tiny_run, ["evaluate.checkpoints=false", "evaluate.tasks={}"])
    (recipe.eval_dir(cfg) / "xlm" / "parts").mkdir(parents=True)  # a directory stores nothing: still a measurement
    clock = RunClock(tmp_path / "timings.json", ["evaluate"], printer=lambda _: None)
    recipe.evaluate_run(cfg, progress=False, events=RunEvents([clock]))
    measured = json.loads((tmp_path / "timings.json").read_text())["seconds_per_model"]["final"]
    assert set(measured) == {"xlm"} and measured["xlm"] > 0
    for partly in (False, True):  # resumed with every part stored; with one part stored, the rest computed
        if partly:
            parts = recipe.eval_dir(cfg) / "xlm" / "parts"
            for part in sorted(parts.iterdir())[1:]:
                part.unlink()
        again = RunClock(tmp_path / "timings.json", ["evaluate"], printer=lambda _: None)
        recipe.evaluate_run(cfg, progress=False, events=RunEvents([again]))
        assert json.loads((tmp_path / "timings.json").read_text())["seconds_per_model"]["final"] == measured
        assert again.eval_left == {}  # counted as done all the same


def test_bad_evaluation_configs_are_named(tiny_run, tmp_path):
    with pytest.raises(ConfigError, match="evaluate.tasks.toy"):
        recipe.evaluate_run(load_config(tiny_run, ["evaluate.tasks.toy.metric=bleu"]), progress=False)
    with pytest.raises(ConfigError, match="nothing to evaluate"):
        recipe.evaluate_run(load_config(tiny_run, ["evaluate.tasks={}", "evaluate.retrieval={}",
                                                   "evaluate.alignment={}"]), progress=False)
    with pytest.raises(ConfigError, match="evaluate.models.other"):
        recipe.models_to_evaluate(load_config(tiny_run, [f"evaluate.models.other={tmp_path}"]))
    missing = load_config(tiny_run, [f"output_dir={tmp_path / 'empty'}"])
    with pytest.raises(MetaXLMError, match="run the pretrain stage first"):
        recipe.models_to_evaluate(missing)


def test_extra_model_dirs_are_evaluated(tiny_run, tokenizer_dir, tmp_path):
    save_tiny_mlm(tokenizer_dir, tmp_path / "other", seed=7)
    cfg = load_config(tiny_run, ["evaluate.variants=[]", f"evaluate.models.other={tmp_path / 'other'}",
                                 "evaluate.tasks={}", "evaluate.alignment={}"])
    models = recipe.models_to_evaluate(cfg)
    assert [m.name for m in models] == ["other"]
    (result,) = recipe.evaluate_run(cfg, progress=False)
    assert result["model_name"] == "other" and "retrieval" in result


def test_a_task_runs_on_the_models_it_names_with_its_own_seeds(tiny_run, tokenizer_dir, tmp_path):
    save_tiny_mlm(tokenizer_dir, tmp_path / "other", seed=7)
    cfg = load_config(tiny_run, ["evaluate.checkpoints=false", f"evaluate.models.other={tmp_path / 'other'}",
                                 "evaluate.retrieval={}", "evaluate.alignment={}",
                                 "evaluate.tasks.toy.models=[other]", "evaluate.tasks.toy.seeds=[5]"])
    results = {r["model_name"]: r for r in recipe.evaluate_run(cfg, progress=False)}
    assert "tasks" not in results["xlm"]                       # not named: not run
    assert results["other"]["tasks"]["toy"]["seeds"] == [5]     # the entry's seeds, not evaluate.seeds [0, 1]
    with pytest.raises(ConfigError, match=r"evaluate.tasks.toy.models: no model 'nope'"):
        recipe.evaluate_run(load_config(tiny_run, ["evaluate.tasks.toy.models=[nope]"]), progress=False)


def test_a_transfer_matrix_is_keyed_by_the_seeds_it_ran_with(tiny_run, monkeypatch):
    """The matrix runs at evaluate.seeds (a task's own seeds are for its main scenario): changing evaluate.seeds
    recomputes it, even when the task's own seeds keep the task's part unchanged."""
    base = ["evaluate.checkpoints=false", "evaluate.retrieval={}", "evaluate.alignment={}",
            "evaluate.tasks.toy.seeds=[5]", "evaluate.transfer_matrix=[toy]"]
    first = recipe.evaluate_run(load_config(tiny_run, [*base, "evaluate.seeds=[0]"]), progress=False)[0]
    import metaxlm.finetune.runner as runner

    calls = []
    original = runner.run_task
    monkeypatch.setattr(runner, "run_task", lambda *a, **k: calls.append(k["scenario"]) or original(*a, **k))
    again = recipe.evaluate_run(load_config(tiny_run, [*base, "evaluate.seeds=[0]"]), progress=False)[0]
    assert calls == [] and again["transfer_matrix"] == first["transfer_matrix"]
    changed = recipe.evaluate_run(load_config(tiny_run, [*base, "evaluate.seeds=[1]"]), progress=False)[0]
    assert calls == ["transfer_matrix"]  # the task's part (seeds [5]) is reused, the matrix is not
    assert changed["tasks"]["toy"]["seeds"] == [5]


def test_a_changed_model_is_evaluated_again(tiny_run, tokenizer_dir, monkeypatch):
    """Stored parts belong to the model they were computed on: retraining a variant (new weights in final/)
    recomputes them, however unchanged the settings."""
    cfg = load_config(tiny_run, ["evaluate.checkpoints=false", "evaluate.tasks={}", "evaluate.alignment={}"])
    first = recipe.evaluate_run(cfg, progress=False)[0]["retrieval"]
    calls = []
    original = recipe.evaluate_retrieval
    monkeypatch.setattr(recipe, "evaluate_retrieval", lambda *a, **k: calls.append(1) or original(*a, **k))
    recipe.evaluate_run(cfg, progress=False)
    assert calls == []
    save_tiny_mlm(tokenizer_dir, Path(cfg.output_dir) / "pretrain" / "xlm" / "final", seed=11)
    again = recipe.evaluate_run(cfg, progress=False)[0]["retrieval"]
    assert calls == [1] and again != first


def test_a_variants_start_model_in_the_runs_vocabulary(tiny_run, tokenizer_dir, tmp_path):
    """`start_of:<variant>`: the model a start_from variant starts from, written once with the run's tokenizer."""
    save_tiny_mlm(tokenizer_dir, tmp_path / "source", seed=5)
    cfg = load_config(tiny_run, [f"variants={{xlm: {{}}, cont: {{start_from: {tmp_path / 'source'}}}}}",
                                 "evaluate.variants=[]", "evaluate.models.start=start_of:cont",
                                 "evaluate.tasks={}", "evaluate.alignment={}"])
    with pytest.raises(MetaXLMError, match="no start model of cont .* the pretrain stage exports it"):
        recipe.models_to_evaluate(cfg)  # evaluation only reads: the pretrain stage writes it
    export_for_evaluation(cfg, "cont", progress=False)
    (model,) = recipe.models_to_evaluate(cfg)
    assert model.name == "start" and model.model_dir == Path(cfg.output_dir) / "pretrain" / "cont" / "start_model"
    from safetensors.torch import load_file

    saved, source = (load_file(d / "model.safetensors") for d in (model.model_dir, tmp_path / "source"))
    assert all(torch.equal(saved[k], v) for k, v in source.items() if k in saved)
    assert ((model.model_dir / "tokenizer.json").read_bytes()
            == (Path(cfg.output_dir) / "vocab" / "tokenizer.json").read_bytes())
    stamp = (model.model_dir / "start_of.json").stat().st_mtime_ns
    export_for_evaluation(cfg, "cont", progress=False)
    recipe.models_to_evaluate(cfg)
    assert (model.model_dir / "start_of.json").stat().st_mtime_ns == stamp  # reused, not rewritten
    (result,) = recipe.evaluate_run(cfg, progress=False)
    assert result["model_name"] == "start" and "retrieval" in result
    with pytest.raises(ConfigError, match="start_of:xlm: no variant 'xlm' with start_from"):
        recipe.models_to_evaluate(load_config(tiny_run, ["evaluate.models.start=start_of:xlm"]))


def test_checkpoints_are_evaluated_from_what_pretraining_exported(tiny_run):
    """Evaluation reads the checkpoints pretraining listed in exports.json, and without that list says which stage
    writes it instead of writing into the pretraining directory itself."""
    cfg = load_config(tiny_run)
    exports = Path(cfg.output_dir) / "pretrain" / "xlm" / "exports.json"
    assert json.loads(exports.read_text()) == {"checkpoints": {"2": {"model": "pretrain/xlm/ckpt/step_00000002",
                                                                     "tokenizer": "vocab"}}}
    exports.unlink()
    with pytest.raises(MetaXLMError, match=r"exports\.json, which the pretrain stage writes"):
        recipe.models_to_evaluate(cfg)
    assert [m.name for m in recipe.models_to_evaluate(load_config(tiny_run, ["evaluate.checkpoints=false"]))] == ["xlm"]


def test_the_plan_resolves_each_tasks_scenario_and_seeds_once(tiny_run):
    """A task entry's own seeds > evaluate.checkpoint_seeds (intermediate checkpoints) > evaluate.seeds; the matrix
    runs at evaluate.seeds, on final models only; the part's cache key holds the seeds the plan chose."""
    base = ["evaluate.seeds=[0, 1]", "evaluate.checkpoint_seeds=[7]", "evaluate.checkpoint_tasks=null",
            "evaluate.transfer_matrix=[toy]"]
    model = Path(load_config(tiny_run).output_dir) / "pretrain" / "xlm" / "final"
    final = recipe.ModelToEvaluate("xlm", model, model, "xlm", 4)
    checkpoint = recipe.ModelToEvaluate("xlm@step2", model, model, "xlm", 2, final=False)
    cfg = load_config(tiny_run, base)
    (task,) = recipe.plan_tasks(cfg, final)
    assert (task.name, task.scenario, task.seeds, task.matrix_seeds) == ("toy", "zero_shot", [0, 1], [0, 1])
    (task,) = recipe.plan_tasks(cfg, checkpoint)
    assert (task.seeds, task.matrix_seeds) == ([7], None)
    own = load_config(tiny_run, [*base, "evaluate.tasks.toy.seeds=[5]"])
    assert [(t.seeds, t.matrix_seeds) for t in recipe.plan_tasks(own, final)] == [([5], [0, 1])]
    assert [t.seeds for t in recipe.plan_tasks(own, checkpoint)] == [[7]]
    assert recipe.plan_tasks(load_config(tiny_run, [*base, "evaluate.checkpoint_tasks=[]"]), checkpoint) == []


def test_a_part_computed_by_other_code_is_computed_again(tiny_run, monkeypatch, capsys):
    """Parts are keyed by the code that computes them too (metaxlm.run.code): after a fix, a stored part is computed
    again, saying so. The finished fine-tuning runs are reused (they cost hours) and the task's entry names those
    made by other code; each records the code and commit it was made by."""
    from metaxlm.finetune import runner, summaries
    from metaxlm.run import code as run_code

    cfg = load_config(tiny_run, ["evaluate.checkpoints=false", "evaluate.seeds=[0]"])
    first = recipe.evaluate_run(cfg, progress=False)[0]
    parts = recipe.eval_dir(cfg) / "xlm" / "parts"
    record = recipe.eval_dir(cfg) / "xlm" / "finetune" / "toy" / "zero_shot-runs" / "en-seed0.json"
    made_by = json.loads(record.read_text())["detail"]["code"]
    assert made_by["fingerprint"] == run_code.code_fingerprint(*summaries.RUN_CODE) and "commit" in made_by
    assert "other fine-tuning code" not in first["tasks"]["toy"]["note"]
    calls = []
    original = recipe.evaluate_retrieval
    monkeypatch.setattr(recipe, "evaluate_retrieval", lambda *a, **k: calls.append(1) or original(*a, **k))
    monkeypatch.setattr(runner, "finetune", lambda *a, **k: pytest.fail("a finished run was trained again"))
    recipe.evaluate_run(cfg, progress=False)
    assert calls == []  # the same code: every part reused
    capsys.readouterr()
    monkeypatch.setattr(run_code, "code_fingerprint", lambda *modules: "f1xed-c0de")  # a fix, say
    again = recipe.evaluate_run(cfg, progress=False)[0]
    assert calls == [1]
    assert "retrieval-toy.json was computed by other code" in capsys.readouterr().out
    assert {json.loads(p.read_text())["code"] for p in parts.glob("*.json")} == {"f1xed-c0de"}
    assert again["tasks"]["toy"]["per_language"] == first["tasks"]["toy"]["per_language"]  # the run, reused
    commit = (made_by["commit"] or "?")[:7] + (" dirty" if made_by["dirty"] else "")
    assert (f"runs made by other fine-tuning code than this one's, reused: en seed 0 (commit {commit})"
            in again["tasks"]["toy"]["note"])
    stored = json.loads((parts / "alignment-toy.json").read_text())
    stored.pop("code")  # a part stored before parts recorded their code: computed again
    (parts / "alignment-toy.json").write_text(json.dumps(stored))
    recipe.evaluate_run(cfg, progress=False)
    assert "alignment-toy.json was computed by other code (code not recorded" in capsys.readouterr().out
