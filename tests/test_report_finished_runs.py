"""A comparison under way, reported from its finished-run records alone (`metaxlm report --finished-runs`): a task's
entry assembled from the records is the entry its evaluate stage writes; runs not finished are listed, never
averaged in; records of other settings or a damaged record stop it with the file named."""

import json
import math

import pytest
import yaml
from test_translation import PAIRS, hp, tiny_seq2seq

from metaxlm.cli import main
from metaxlm.errors import DataError
from metaxlm.finetune.run_store import recorded_task_entry
from metaxlm.finetune.runner import run_task
from metaxlm.finetune.spec import TaskSpec
from metaxlm.io import json_safe
from metaxlm.records import check_results

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def pairs_dir(tmp_path_factory):
    """en-de and en-fr training/test pairs (the same sentences on both sides: enough for the bookkeeping here)."""
    out = tmp_path_factory.mktemp("pairs")
    for lang in ("de", "fr"):
        (out / f"en-{lang}.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS), encoding="utf-8")
    return out


def task_fields(pairs_dir) -> dict:
    return {"name": "toy_mt", "type": "translation", "format": "parallel_tsv", "metric": "bleu",
            "languages": ["en", "de", "fr"], "source": "en", "train": str(pairs_dir / "en-{lang}.tsv"),
            "test": str(pairs_dir / "en-{lang}.tsv"),
            "hyperparameters": hp(max_steps=3, eval_steps=[2]).model_dump()}


@pytest.fixture(scope="module")
def finished(tokenizer, pairs_dir, tmp_path_factory):
    """Every run of the toy task (de, fr × seeds 0, 1) finished and recorded, and the entry run_task gave."""
    root = tmp_path_factory.mktemp("finished")
    model_dir = tiny_seq2seq(tokenizer, root / "model")
    spec = TaskSpec(**task_fields(pairs_dir))
    archive = root / "records" / "xlm" / "toy_mt"
    entry = run_task(spec, model_dir, root / "out", scenario="supervised", seeds=[0, 1], tokenizer_dir=model_dir,
                     progress=False, resume_key="k1", finished_runs=archive)
    return spec, archive, entry


def keep_only(archive, out, names: list[str]):
    """A copy of the records in task folder `out` with only `names` (e.g. ['de-seed0'])."""
    (out / "supervised-runs").mkdir(parents=True)
    for name in names:
        source = archive / "supervised-runs" / f"{name}.json"
        (out / "supervised-runs" / source.name).write_bytes(source.read_bytes())
    return out
    return out


def test_an_entry_from_every_record_is_the_entry_the_run_wrote(finished):
    spec, archive, entry = finished
    assembled = recorded_task_entry(spec, archive, scenario="supervised", seeds=[0, 1])
    assert "to_come" not in assembled
    assert json_safe(assembled) == json_safe(entry)  # scores, averages, reports, curves, examples, training


def test_runs_not_finished_are_listed_and_never_averaged_in(finished, tmp_path):
    spec, archive, entry = finished
    partial = keep_only(archive, tmp_path / "records", ["de-seed0", "de-seed1", "fr-seed1"])
    assembled = recorded_task_entry(spec, partial, scenario="supervised", seeds=[0, 1])
    assert assembled["to_come"] == ["fr seed 0"]
    assert assembled["per_language"]["de"] == entry["per_language"]["de"]
    assert assembled["per_language"]["fr"]["runs"] == entry["per_language"]["fr"]["runs"][1:]
    assert "average" not in assembled  # an average over languages would mix seeds
    assert assembled["curve"]["fr"]["bleu"][0]["runs"] == entry["curve"]["fr"]["bleu"][0]["runs"][1:]
    assert assembled["examples"]["fr"]["seed"] == 1  # the lowest seed finished
    check_results({"model_name": "m", "tasks": {"toy_mt": json_safe(assembled)}}, tmp_path / "results.json")


def test_a_task_with_no_finished_run_has_no_scores_and_every_run_to_come(finished, tmp_path):
    spec, archive, _ = finished
    assembled = recorded_task_entry(spec, tmp_path / "nothing", scenario="supervised", seeds=[0, 1])
    assert assembled["to_come"] == ["de seed 0", "de seed 1", "fr seed 0", "fr seed 1"]
    assert assembled["per_language"] == {}


def test_records_of_other_settings_are_not_mixed_in(finished, tmp_path):
    spec, archive, _ = finished
    records = keep_only(archive, tmp_path / "records", ["de-seed0", "de-seed1"])
    other = records / "supervised-runs" / "de-seed1.json"
    kept = json.loads(other.read_text(encoding="utf-8"))
    other.write_text(json.dumps({**kept, "key": "k2"}), encoding="utf-8")
    with pytest.raises(DataError, match=r"different task settings or model files.*de-seed0\.json.*de-seed1\.json"):
        recorded_task_entry(spec, records, scenario="supervised", seeds=[0, 1])


def test_a_damaged_record_is_named(finished, tmp_path):
    spec, archive, _ = finished
    records = keep_only(archive, tmp_path / "records", ["de-seed0"])
    (records / "supervised-runs" / "de-seed0.json").write_text('{"key": "k1", "detail": {"seed": 0', encoding="utf-8")
    with pytest.raises(DataError, match=r"de-seed0\.json: not a finished-run record"):
        recorded_task_entry(spec, records, scenario="supervised", seeds=[0])


def test_report_from_finished_runs_end_to_end(finished, pairs_dir, tmp_path, capsys):
    """`metaxlm report --finished-runs CONFIG --out DIR`: the model's results.json as the evaluate stage would
    write it from the runs finished so far, the report with the curves, and what is still to come."""
    spec, archive, entry = finished
    records = tmp_path / "records"
    keep_only(archive, records / "xlm" / "toy_mt", ["de-seed0", "de-seed1"])
    fields = {k: v for k, v in task_fields(pairs_dir).items() if k != "name"}
    config = tmp_path / "cmp.yaml"
    config.write_text(yaml.safe_dump({
        "output_dir": str(tmp_path / "run"), "data": {"languages": ["en", "de", "fr"]}, "variants": {"xlm": {}},
        "evaluate": {"seeds": [0, 1], "finished_runs": str(records),
                     "tasks": {"toy_mt": {"task": "translation_demo", **fields},
                               "toy_other": {"task": "translation_demo", **fields}}}}), encoding="utf-8")
    out = tmp_path / "so-far"
    assert main(["report", "--finished-runs", str(config), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "to come, xlm · toy_mt: fr seed 0, fr seed 1" in printed
    assert "to come, xlm · toy_other: de seed 0, de seed 1, fr seed 0, fr seed 1" in printed
    results = json.loads((out / "eval" / "xlm" / "results.json").read_text(encoding="utf-8"))
    assert results["tasks"]["toy_mt"]["per_language"]["de"] == json_safe(entry["per_language"]["de"])
    assert results["tasks"]["toy_other"]["per_language"] == {}
    report = (out / "report" / "report.md").read_text(encoding="utf-8")
    assert "Runs still to come (a comparison under way): xlm: fr seed 0, fr seed 1." in report
    assert "### Task toy_other\n\nNo run has finished yet." in report
    assert (out / "report" / "figures" / "finetune_curves.png").exists()
    assert (out / "config.yaml").exists()
    assert json.loads((out / "assembled-from.json").read_text())["to_come"]["xlm · toy_mt"] == ["fr seed 0",
                                                                                               "fr seed 1"]
    assert main(["report", "--finished-runs", str(config), "--out", str(out)]) == 0  # rewritten as runs land
    capsys.readouterr()
    a_run = tmp_path / "a-run"
    (a_run / "eval" / "m").mkdir(parents=True)
    (a_run / "eval" / "m" / "results.json").write_text("{}")
    assert main(["report", "--finished-runs", str(config), "--out", str(a_run)]) == 2
    assert "not written by `metaxlm report --finished-runs`" in capsys.readouterr().err
    assert (a_run / "eval" / "m" / "results.json").read_text() == "{}" and not (a_run / "config.yaml").exists()
    assert main(["report", "--finished-runs", str(config), "--out", str(tmp_path / "run")]) == 2  # its output_dir
    assert "is this config's own run directory" in capsys.readouterr().err
    assert main(["report", "--finished-runs", str(config), "--out", str(out), "runs/x"]) == 2
    assert "'runs/x' is not a key=value override" in capsys.readouterr().err
    assert main(["report", "--finished-runs", str(config)]) == 2
    assert "give --out DIR" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", "--finished-runs", str(config), f"evaluate.finished_runs={empty}", "--out", str(out)]) == 2
    assert "no finished run of this config's models and tasks recorded yet (8 to come)" in capsys.readouterr().err


def test_no_nan_leaks_from_a_missing_run_into_the_scores(finished, tmp_path):
    spec, archive, _ = finished
    partial = keep_only(archive, tmp_path / "records", ["de-seed1"])
    assembled = recorded_task_entry(spec, partial, scenario="supervised", seeds=[0, 1])
    runs = [v for stat in assembled["per_language"].values() for v in stat["runs"]]
    assert runs and not any(math.isnan(v) for v in runs)
    assert assembled["seeds"] == [1]


def test_records_of_another_series_fill_in_whole_models_never_mixed(finished, pairs_dir, tmp_path, capsys):
    """`--records DIR`: a model with no records in evaluate.finished_runs is read whole from the next directory that
    has it; a model in both comes from evaluate.finished_runs alone (two series' runs are never averaged)."""
    spec, archive, entry = finished
    published, controls = tmp_path / "published", tmp_path / "controls"
    keep_only(archive, published / "xlm" / "toy_mt", ["de-seed0", "de-seed1"])
    keep_only(archive, controls / "xlm" / "toy_mt", ["de-seed0", "de-seed1", "fr-seed0", "fr-seed1"])
    keep_only(archive, controls / "start" / "toy_mt", ["fr-seed0", "fr-seed1"])
    fields = {k: v for k, v in task_fields(pairs_dir).items() if k != "name"}
    config = tmp_path / "cmp.yaml"
    config.write_text(yaml.safe_dump({
        "output_dir": str(tmp_path / "run"), "data": {"languages": ["en", "de", "fr"]}, "variants": {"xlm": {}},
        "evaluate": {"seeds": [0, 1], "finished_runs": str(published), "models": {"start": str(tmp_path / "m")},
                     "tasks": {"toy_mt": {"task": "translation_demo", **fields}}}}), encoding="utf-8")
    out = tmp_path / "so-far"
    assert main(["report", "--finished-runs", str(config), "--records", str(controls), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "to come, xlm · toy_mt: fr seed 0, fr seed 1" in printed  # not filled in from the other series
    assert "to come, start · toy_mt: de seed 0, de seed 1" in printed
    xlm = json.loads((out / "eval" / "xlm" / "results.json").read_text(encoding="utf-8"))["tasks"]["toy_mt"]
    start = json.loads((out / "eval" / "start" / "results.json").read_text(encoding="utf-8"))["tasks"]["toy_mt"]
    assert list(xlm["per_language"]) == ["de"] and list(start["per_language"]) == ["fr"]
    assert start["per_language"]["fr"] == json_safe(entry["per_language"]["fr"])
    assembled = json.loads((out / "assembled-from.json").read_text(encoding="utf-8"))
    assert assembled["models_from"] == {"xlm": str(published), "start": str(controls)}
    assert main(["report", "--finished-runs", str(config), "--records", str(tmp_path / "nowhere"),
                 "--out", str(out)]) == 2
    assert "nowhere: no such directory (--records)" in capsys.readouterr().err
    assert main(["report", str(out), "--records", str(controls)]) == 2
    assert "--records goes with --finished-runs" in capsys.readouterr().err
