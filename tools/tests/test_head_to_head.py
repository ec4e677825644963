import json
import shutil
from pathlib import Path

from tools.head_to_head import head_to_head, main

ROOT = Path(__file__).resolve().parents[2]
RUNS = [ROOT / "docs/results/compare", ROOT / "docs/results/compare-from-metaxlm"]


def _readme_table() -> str:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| model | 1: SIB-200"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return "\n".join(lines[start:end])


def test_the_readme_table_is_the_committed_results():
    assert _readme_table() == head_to_head(RUNS)


def _copy(run: Path, tmp_path: Path) -> Path:
    out = tmp_path / run.name
    shutil.copytree(run, out, ignore=shutil.ignore_patterns("figures", "*.md"))
    return out


def _edit(run: Path, model: str, change) -> None:
    path = run / f"results.{model}.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _row(table: str, label: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(f"| {label} "))
    return [c.strip() for c in line.strip("|").split("|")][1:]


def test_marks_follow_seed_spread_and_chance(tmp_path):
    run = _copy(RUNS[0], tmp_path)

    def to_chance(data):  # MLM only's SIB-200 target average onto its majority-class level
        task = data["tasks"]["sib200"]
        targets = [lang for lang in task["per_language"] if lang != task["source"]]
        task["target_average"] = {"mean": sum(task["chance"][lang] for lang in targets) / len(targets), "std": 0.001,
                                  "runs": None}

    def as_control(data):  # XLM-Align's UD POS exactly the control's: no difference, so no bold
        control = json.loads((run / "results.mlm_only.json").read_text())
        data["tasks"]["udpos"]["target_average"] = control["tasks"]["udpos"]["target_average"]

    _edit(run, "xlm_align", as_control)
    _edit(run, "mlm_only", to_chance)
    _edit(run, "ppa", lambda data: data["retrieval"].pop("tatoeba"))
    table = head_to_head([run])
    control, align, ppa = (_row(table, label) for label in ("MLM only (control)", "XLM-Align", "PPA"))
    assert control[0].startswith("*") and not control[0].startswith("**")  # at chance, no difference to itself
    assert not align[1].startswith("*")
    assert ppa[2] == "–"
    assert head_to_head([RUNS[0]]).count("**") > 0  # the unedited run has differences beyond the seed spread


def test_a_run_directory_gives_the_published_table(tmp_path):
    run = tmp_path / "compare"
    run.mkdir()
    shutil.copy(RUNS[0] / "config.yaml", run / "config.yaml")
    for path in RUNS[0].glob("results.*.json"):
        model = path.name.split(".")[1]
        (run / "eval" / model).mkdir(parents=True)
        shutil.copy(path, run / "eval" / model / "results.json")
    assert head_to_head([run]) == head_to_head([RUNS[0]])


def test_no_results_is_one_clear_error(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "results" in err


def test_a_control_that_is_no_model_is_one_clear_error(tmp_path, capsys):
    run = _copy(RUNS[0], tmp_path)
    config = (run / "config.yaml").read_text().replace("control: mlm_only", "control: nobody")
    (run / "config.yaml").write_text(config)
    assert main([str(run)]) == 2
    assert "report.control 'nobody'" in capsys.readouterr().err
