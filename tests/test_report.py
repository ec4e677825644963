import json
import math
import re
import statistics
from pathlib import Path

import pytest

from metaxlm.errors import DataError, MetaXLMError
from metaxlm.report.evaluation import format_task_table, write_report

LANGS = ["en", "de", "ru"]
# Final (step 100) scores: en = base + 0.1, de = base, ru = base - drop; the step-50 checkpoint is 0.1 lower.
VARIANTS = {"xlm": (0.60, 0.15), "metaxlm": (0.70, 0.05), "metaxlm_dict": (0.75, 0.0)}


def _stat(runs: list[float]) -> dict:
    return {"mean": statistics.mean(runs), "std": statistics.stdev(runs) if len(runs) > 1 else 0.0, "runs": runs}


def _task(means: dict[str, float], seeds: list[int], note: str | None = None) -> dict:
    offsets = [-0.01, 0.01][: len(seeds)] if len(seeds) > 1 else [0.0]
    per_seed = [{lang: m + off for lang, m in means.items()} for off in offsets]
    targets = [lang for lang in means if lang != "en"]
    task = {"type": "classification", "metric": "accuracy", "scenario": "zero_shot", "source": "en", "seeds": seeds,
            "per_language": {lang: _stat([s[lang] for s in per_seed]) for lang in means},
            "average": _stat([statistics.mean(s.values()) for s in per_seed]),
            "target_average": _stat([statistics.mean(s[t] for t in targets) for s in per_seed]),
            "transfer_gap": _stat([s["en"] - statistics.mean(s[t] for t in targets) for s in per_seed])}
    return {**task, "note": note} if note else task


def alignment_entry(layers: list[int], test: dict[str, list[float]], dev_aer: list[float] | None) -> dict:
    """An alignment entry as evaluate_alignment writes it: dev (AER only here) and test scores, the layer chosen on
    dev (the lowest dev AER), or with no dev part the fixed default layer (here the middle one)."""
    entry = {"method": "ot", "pairs": 508, "layers": layers, "test": test,
             "split": {"dev_fraction": 0.3 if dev_aer else 0.0, "dev_pairs": 153 if dev_aer else 0,
                       "test_pairs": 355 if dev_aer else 508}}
    if dev_aer is None:
        return {**entry, "chosen_layer": layers[len(layers) // 2], "chosen_on": "fixed default"}
    return {**entry, "dev": {"aer": dev_aer}, "chosen_layer": layers[dev_aer.index(min(dev_aer))], "chosen_on": "dev"}


def _results(variant: str, step: int, final: bool) -> dict:
    base, drop = VARIANTS[variant]
    base -= 0 if final else 0.1
    means = {"en": base + 0.1, "de": base, "ru": base - drop}
    layers = [0, 1, 2, 3]
    peak = [0.2, 0.5, base, 0.4]  # retrieval peaks (and AER dips) in the middle layer, as in the paper
    data = {"model_name": variant if final else f"{variant}@step{step}", "variant": variant, "step": step,
            "model_dir": f"/models/{variant}/{step}",
            "tasks": {"module": _task(means, [0, 1]),
                      "spans": _task({k: v - 0.1 for k, v in means.items()}, [0], note="test = held-out articles")},
            # test accuracy peaks at layer 2, dev accuracy at layer 1: the report must show layer 1's test score
            "retrieval": {"demo": {"layers": layers, "average": peak, "dev_average": [0.3, 0.6, 0.55, 0.2],
                                   "chosen_layer": 1, "chosen_on": "dev",
                                   "split": {"dev_fraction": 0.3, "dev_pairs": {"de": 30}, "test_pairs": {"de": 70}},
                                   "per_language": {"de": {"src2tgt": peak, "tgt2src": peak, "mean": peak}}}},
            # test AER dips at layer 2, dev AER at layer 3: the report must show layer 3's test scores
            "alignment": {"de-en": alignment_entry(layers, test={"aer": [1 - p for p in peak], "precision": peak,
                                                                 "recall": peak, "f1": peak},
                                                   dev_aer=[0.9, 0.7, 0.65, 0.5])}}
    if final:
        data["transfer_matrix"] = {"module": {"languages": LANGS,
                                              "scores": [[base + (0.1 if i == j else 0.0) - 0.02 * j for j in range(3)]
                                                         for i in range(3)]}}
    return data


def _write(run_dir: Path, data: dict) -> Path:
    path = run_dir / "eval" / data["model_name"] / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def run(tmp_path) -> Path:
    run = tmp_path / "run"
    (run).mkdir()
    (run / "config.yaml").write_text("variants:\n  xlm: {}\n  metaxlm: {}\n  metaxlm_dict: {}\n")
    for variant in VARIANTS:
        _write(run, _results(variant, 50, final=False))
        _write(run, _results(variant, 100, final=True))
    return run


def test_report_tables_figures_and_sections(run):
    written = write_report([run])
    md = written["markdown"].read_text()
    # Final models only, in config order; mean ± std over two seeds; the gap is lower-better. Bold: the best of a
    # column whose interval against the runner-up excludes 0 — ru and avg (+20 over metaxlm's 55 / 58.3 − 20), not
    # en and de (+5, inside two seeds' interval) nor the gap (every seed the same: no interval).
    module = md[md.index("### Task module"):md.index("### Task spans")]
    rows = [line for line in module.splitlines() if line.startswith("| ")]
    assert rows[0] == "| model | en | de | ru | avg | gap |"
    assert [r.split(" | ")[0] for r in rows[1:]] == ["| xlm", "| metaxlm", "| metaxlm_dict"]
    assert rows[1] == "| xlm | 70.0 ± 1.4 | 60.0 ± 1.4 | 45.0 ± 1.4 | 58.3 ± 1.4 | 17.5 ± 0.0 |"
    assert rows[3] == "| metaxlm_dict | 85.0 ± 1.4 | 75.0 ± 1.4 | **75.0 ± 1.4** | **78.3 ± 1.4** | 10.0 ± 0.0 |"
    # One seed: no "± std", and nothing bold (one seed decides nothing).
    assert "| metaxlm_dict | 75.0 | 65.0 | 65.0 | 68.3 | 10.0 |" in md
    # Steps section: every checkpoint, with target average and gap.
    assert "| metaxlm@step50 | 50 | 57.5 ± 1.4 | 12.5 ± 0.0 |" in md
    # Retrieval: the test accuracy at the layer chosen on dev (1: dev 60.0, test 50.0), not at the best test layer
    # (2: 75 % for metaxlm_dict); the last layer's beside it.
    assert "| metaxlm_dict | demo | 30 / 70 | 1 | dev | 60.0 | 50.0 | 40.0 |" in md
    # Alignment: the test scores at the layer chosen on dev (3: dev AER 50.0), not at the best test layer (2,
    # test AER 25.0); the table says where the layer comes from.
    section = md[md.index("## Word alignment against layer"):]
    assert "Test scores at the layer chosen on dev" in section and "test AER against layer" in section
    assert ("| model | set | method | dev / test pairs | layer | layer chosen on | dev AER (%) | test AER (%) | "
            "test precision (%) | test recall (%) | test F1 (%) | test AER (%) at last layer |") in section
    assert "| metaxlm_dict | de-en | ot | 153 / 355 | 3 | dev | 50.0 | 60.0 | 40.0 | 40.0 | 40.0 | 60.0 |" in section
    # Transfer matrix: source rows, target columns.
    assert "| en | 85.0 | 73.0 | 71.0 |" in md
    assert "test = held-out articles" in md and str(run / "eval" / "xlm" / "results.json") in md
    names = {p.name for p in written["figures"]}
    assert {"task_module.png", "task_spans.png", "retrieval.png", "alignment.png", "steps_module.png",
            "steps_spans.png", "transfer_module_metaxlm_dict.png"} <= names
    for path in written["figures"]:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](figures/{path.name})" in md
    # Reproducible: a second report gives the same figure bytes.
    first = {p.name: p.read_bytes() for p in written["figures"]}
    again = write_report([run])
    assert {p.name: p.read_bytes() for p in again["figures"]} == first


def test_html_is_self_contained(run, tmp_path):
    written = write_report([run], tmp_path / "out")
    assert written["html"].parent == tmp_path / "out"
    html = written["html"].read_text()
    sources = re.findall(r'\ssrc="([^"]*)"', html)
    assert len(sources) == len(written["figures"])
    assert all(s.startswith("data:image/png;base64,") for s in sources)
    assert all(h.startswith("#") for h in re.findall(r'\shref="([^"]*)"', html))  # in-page table of contents only
    assert "<link" not in html and "<script" not in html and "url(" not in html
    assert "<td><strong>78.3 ±&nbsp;1.4</strong></td>" in html  # may break before "±", never after


def test_only_retrieval_gives_only_that_section(tmp_path):
    data = _results("metaxlm", 100, final=True)
    for key in ("tasks", "alignment", "transfer_matrix"):
        del data[key]
    _write(tmp_path, data)
    written = write_report([tmp_path])
    md = written["markdown"].read_text()
    assert "Sentence retrieval" in md
    assert "Fine-tuning tasks" not in md and "Word alignment" not in md and "Transfer directions" not in md
    assert [p.name for p in written["figures"]] == ["retrieval.png"]


def test_same_model_in_two_runs_is_prefixed(tmp_path):
    for name in ("a", "b"):
        _write(tmp_path / name, _results("xlm", 100, final=True))
    md = write_report([tmp_path / "a", tmp_path / "b"])["markdown"].read_text()
    assert "| a/xlm |" in md and "| b/xlm |" in md


def test_pretraining_comparison_is_included(run):
    from metaxlm.report.pretraining import compare_variants

    for variant, (base, _) in VARIANTS.items():
        metrics = run / "pretrain" / variant / "metrics.jsonl"
        metrics.parent.mkdir(parents=True)
        metrics.write_text("".join(json.dumps({"step": s, "heldout_loss/en": 5 - base - s / 100,
                                               "heldout_loss/de": 6 - base - s / 100}) + "\n" for s in (50, 100)))
    compare_variants(run, list(VARIANTS))
    written = write_report([run])
    md = written["markdown"].read_text()
    assert "## Pretraining comparison" in md and "| de | 4.400 | 4.300 | 4.250 |" in md
    assert (written["markdown"].parent / "figures" / "pretraining_run_heldout_curves.png").exists()


def test_empty_run_dir_is_a_clear_error(tmp_path):
    with pytest.raises(MetaXLMError, match="nothing to report: no eval/\\*/results.json"):
        write_report([tmp_path])
    with pytest.raises(MetaXLMError, match="no such run directory"):
        write_report([tmp_path / "missing"])


def test_bad_results_name_the_file(run):
    path = run / "eval" / "metaxlm" / "results.json"
    path.write_text('{"model_name": "metaxlm",\n "tasks": {')
    with pytest.raises(DataError, match=re.escape(f"{path}:2: not valid JSON")):
        write_report([run])
    data = _results("metaxlm", 100, final=True)
    data["tasks"]["module"]["per_language"]["de"]["mean"] = "high"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match=re.escape(f"{path}: tasks.module.per_language.de")):
        write_report([run])
    data = _results("metaxlm", 100, final=True)
    data["alignment"]["de-en"]["test"]["aer"] = [0.5]
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match="alignment.de-en.test.aer: has 1 values for 4 layers"):
        write_report([run])
    data = _results("metaxlm", 100, final=True)
    data["alignment"]["de-en"]["chosen_layer"] = 9
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match=re.escape("alignment.de-en.chosen_layer: expected one of the layers")):
        write_report([run])


def test_alignment_without_dev_part_and_results_from_before_the_split(tmp_path):
    """A set scored whole at the fixed default layer says so; results written before the dev/test split (the
    whole set's scores at the top level, no "test") still load, at their best layer, labelled as such."""
    data = _results("metaxlm", 100, final=True)
    layers, aer = [0, 1, 2, 3], [0.8, 0.3, 0.5, 0.6]
    data["alignment"] = {"grc-en": alignment_entry(layers, {"aer": aer}, dev_aer=None),
                         "de-en": {"method": "ot", "pairs": 508, "layers": layers, "aer": aer,
                                   "precision": [0.1, 0.7, 0.5, 0.4], "recall": aer, "f1": aer}}
    _write(tmp_path, data)
    md = write_report([tmp_path])["markdown"].read_text()
    assert "| metaxlm | grc-en | ot | 0 / 508 | 2 | fixed default (no dev part) | – | 50.0 | – | – | – | 60.0 |" in md
    assert ("| metaxlm | de-en | ot | no split (508) | 1 | "
            "the scored sentences (older results, no dev split) | – | 30.0 | "
            "70.0 | 30.0 | 30.0 | 60.0 |") in md


def test_format_task_table_with_missing_scores():
    task = _task({"en": 0.9, "de": 0.8}, [0])
    task["per_language"]["de"] = {"mean": None, "std": None}  # the evaluation writes NaN as null
    text = format_task_table("module", {"m": task})
    assert "| m | 90.0 | – |" in text and "±" not in text.split("\n\n")[1]


def test_scores_against_fine_tuning_steps(tmp_path):
    """Translation entries with a curve (eval_steps): one line per model and task in a BLEU and a chrF panel per
    language pair, and a table of the scores at every step."""
    def mt(bleu: list[float]) -> dict:
        steps = [25, 50, 100]
        return {"type": "translation", "metric": "bleu", "scenario": "supervised", "source": "en", "seeds": [0],
                "per_language": {"de": _stat([bleu[-1]])},
                "curve": {"de": {"steps": steps, "bleu": [_stat([b]) for b in bleu],
                                 "chrf": [_stat([3 * b]) for b in bleu]}}}
    _write(tmp_path, {"model_name": "veco", "variant": "veco", "step": 100,
                      "tasks": {"mt_veco": {**mt([1.0, 4.0, 9.0]), "curve_items": 250},
                                "mt_random": mt([0.0, 0.5, 1.5])}})
    written = write_report([tmp_path])
    md = written["markdown"].read_text()
    assert "## Against fine-tuning steps" in md
    # a curve on a subset of the test items says so (hyperparameters.curve_items); one on every item says nothing
    assert "every item): mt_veco: 250 test items per language." in md and "mt_random: 250" not in md
    assert "| model · task | language | metric | step 25 | step 50 | step 100 |" in md
    assert "| veco · mt_veco | en→de | bleu | 1.0 | 4.0 | 9.0 |" in md
    assert "| veco · mt_random | en→de | chrf | 0.0 | 1.5 | 4.5 |" in md
    assert "finetune_curves.png" in {p.name for p in written["figures"]}


def test_a_reverse_task_is_labelled_by_the_way_it_translates_and_examples_sit_side_by_side(tmp_path):
    """direction: reverse (de→en) gets its own curve panel and label, never the en→de one's; the example outputs of
    every model · task on the same test items share a table per language pair, item by item."""
    def mt(bleu: float, direction: str, outputs: list[str], source_side: str) -> dict:
        rows = [{"id": str(i), "source": f"{source_side} {i}", "reference": f"ref {source_side} {i}", "output": o}
                for i, o in enumerate(outputs)]
        return {"type": "translation", "metric": "bleu", "scenario": "supervised", "source": "en", "seeds": [0, 1],
                "direction": direction, "per_language": {"de": _stat([bleu])},
                "curve": {"de": {"steps": [10, 20], "bleu": [_stat([bleu / 2]), _stat([bleu])]}},
                "examples": {"de": {"seed": 0, "rows": rows}},
                "training": {"runs": 2, "steps": [2000], "train_seconds": {"mean": 9000.0, "std": 600.0},
                             "machines": {"AMD EPYC · 1 thread · fp32": 1, "Intel Xeon · 1 thread · bf16": 1}}}
    random = mt(1.0, "forward", ["x", "y"], "en")  # written with each kind of machine's own time: a row each
    random["training"]["train_seconds_by_machine"] = {"AMD EPYC · 1 thread · fp32": {"mean": 9600.0, "std": math.nan},
                                                      "Intel Xeon · 1 thread · bf16": {"mean": 8400.0, "std": math.nan}}
    _write(tmp_path, {"model_name": "veco", "variant": "veco", "step": 100,
                      "tasks": {"mt_veco": mt(9.0, "forward", ["Hallo", "Welt"], "en"),
                                "mt_random": random,
                                "mt_veco_reverse": mt(12.0, "reverse", ["Hello"], "de")}})
    md = write_report([tmp_path])["markdown"].read_text()
    assert "| veco · mt_veco | en→de | bleu | 4.5 | 9.0 |" in md
    assert "| veco · mt_veco_reverse | de→en | bleu | 6.0 | 12.0 |" in md
    assert "supervised into en" in md and "supervised from en" in md
    assert "## Example outputs" in md
    en_de = md.split("| # | en→de | text |")[1].split("\n\n")[0]
    assert [line for line in en_de.splitlines() if line.startswith("| 2 ")] == [
        "| 2 | source | en 1 |", "| 2 | reference | ref en 1 |", "| 2 | veco · mt_veco (seed 0) | Welt |",
        "| 2 | veco · mt_random (seed 0) | y |"]
    de_en = md.split("| # | de→en | text |")[1].split("\n\n")[0]
    assert "| 1 | veco · mt_veco_reverse (seed 0) | Hello |" in de_en and "mt_random" not in de_en
    assert ("| veco · mt_veco | AMD EPYC · 1 thread · fp32 (1); Intel Xeon · 1 thread · bf16 (1) | 2 | 2000 | "
            "150.0 ± 10.0 |") in md  # results written before the split: the pooled time, the kinds counted
    assert "| veco · mt_random | AMD EPYC · 1 thread · fp32 | 1 | 2000 | 160.0 |" in md
    assert "| veco · mt_random | Intel Xeon · 1 thread · bf16 | 1 | 2000 | 140.0 |" in md


def test_curve_leaders_say_who_is_highest_and_whether_beyond_noise():
    from metaxlm.report.evaluation import curve_leaders

    def point(step, *runs):
        return (step, sum(runs) / len(runs), float("nan"), runs)

    panels = {  # three seeds a line: Welch's interval at about 4 degrees of freedom
        "bleu · en→de": {"veco": [point(500, 7.5, 8.0, 8.5), point(1000, 11.5, 12.0, 12.5),
                                  point(2000, 14.5, 15, 15.5)],
                         "random": [point(500, 7.3, 7.8, 8.3), point(1000, 5.5, 6.0, 6.5), point(2000, 8.5, 9, 9.5)]},
        "bleu · en→fr": {"veco": [point(500, 4.8, 5.0, 5.2), point(1000, 8.8, 9.0, 9.2)],
                         "random": [point(500, 5.8, 6.0, 6.2), point(1000, 6.8, 7.0, 7.2)]},
        "chrf · en→de": {"veco": [point(500, 30.0)], "random": [point(500, 20.0)]},
        "chrf · en→fr": {"veco": [point(500, 30.0, 31.0)]},  # one line: nothing to compare
    }
    assert curve_leaders(panels) == [
        "bleu · en→de: veco highest at every step (500, 1000, 2000); beyond noise at 2 of 3 (not at 500)",
        "bleu · en→fr: the highest changes — step 500: random (beyond noise), step 1000: veco (beyond noise)",
        "chrf · en→de: veco highest at every step (500); one seed each: nothing decided"]
    # the old rule's case: 11 against 10, std 0.28 each over two seeds — the mean ± std intervals apart, but at one
    # degree of freedom a side the difference's interval is ± 1.2: not beyond noise
    close = {"p": {"a": [point(1, 10.8, 11.2)], "b": [point(1, 9.8, 10.2)]}}
    assert curve_leaders(close) == ["p: a highest at every step (1); beyond noise at 0 of 1"]


def test_objective_losses_are_read_per_objective_and_plotted(tmp_path):
    """objective_losses.png: each logged `loss/<name>` against steps, per variant; nothing for a run without them."""
    import json

    from metaxlm.report.pretraining import objective_curves, plot_objective_losses

    variant = tmp_path / "pretrain" / "xa"
    variant.mkdir(parents=True)
    rows = [{"step": 0, "heldout_loss/en": 5.0}, {"step": 10, "loss": 4.0, "loss/mlm": 3.0, "loss/dwa": 1.0},
            {"step": 20, "loss": 3.5, "loss/mlm": 2.8, "loss/dwa": 0.7, "eval/dwa/links_per_pair": 4.0},
            {"step": 20, "eval/veco/is_mlm": 5.5, "eval/veco/cs_mlm": 6.2}]  # terms logged apart: own panels
    (variant / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert objective_curves(variant) == {"mlm": ([10, 20], [3.0, 2.8]), "dwa": ([10, 20], [1.0, 0.7]),
                                         "veco IS-MLM": ([20], [5.5]), "veco CS-MLM": ([20], [6.2])}
    assert plot_objective_losses(tmp_path, ["xa"], tmp_path / "o.png", {"xa": "#000000"})
    assert (tmp_path / "o.png").stat().st_size > 0
    assert not plot_objective_losses(tmp_path, ["missing"], tmp_path / "none.png", {})


def test_retrieval_written_before_the_split_is_named_so(tmp_path):
    """Results without a dev part (written before the dev/test split): the best layer is on the pairs scored, and
    the report says the accuracy is not a test score."""
    data = _results("metaxlm", 100, final=True)
    data["retrieval"]["demo"] = {k: v for k, v in data["retrieval"]["demo"].items()
                                 if k not in ("dev_average", "chosen_layer", "chosen_on", "split")}
    _write(tmp_path, data)
    md = write_report([tmp_path])["markdown"].read_text()
    assert "| metaxlm | demo | – | 2 | the scored pairs (older results, no dev split) | – | 70.0 | 40.0 |" in md
    assert "flatters the model and is not a test score" in md
