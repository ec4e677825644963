import html
import json
import math
import statistics
from pathlib import Path

import pytest

from metaxlm.errors import DataError
from metaxlm.report.evaluation import write_report
from metaxlm.report.findings import (
    ABOUT_EQUAL,
    AT_CHANCE,
    AT_FLOOR,
    GREATER,
    INCONCLUSIVE,
    INCONCLUSIVE_NO_INTERVAL,
    INCONCLUSIVE_ONE_SEED,
    LESS,
    NO_DATA,
    NOT_REPRODUCED,
    NOT_RUN,
    REPRODUCED,
    TITLE,
    Measurement,
    ablation_figure,
    check_findings,
    combine,
    compare,
    compare_gap_trends,
    compare_layers,
    judge,
    limits_section,
    table1_figure,
)
from metaxlm.report.results import ModelResult
from metaxlm.report.uncertainty import ITEMS, NO_INTERVAL, ONE_SEED, SEEDS_ONLY, Difference, Sample

M = Measurement


# -- the verdict rules ---------------------------------------------------------------------------------------

def D(estimate, half_width, basis=SEEDS_ONLY):  # noqa: N802 - reads as a value
    return Difference(estimate, half_width, basis)


@pytest.mark.parametrize(("d", "claim", "margin", "verdict"), [
    (D(0.10, 0.05), GREATER, None, REPRODUCED),
    (D(-0.10, 0.05), GREATER, None, NOT_REPRODUCED),
    (D(0.02, 0.05), GREATER, None, INCONCLUSIVE),        # holds, but the interval contains 0
    (D(0.05, 0.05), GREATER, None, INCONCLUSIVE),        # an interval touching 0 does not exclude it
    (D(-0.10, 0.05), LESS, None, REPRODUCED),
    (D(0.10, 0.05), LESS, None, NOT_REPRODUCED),
    (D(0.10, 0.01, ONE_SEED), GREATER, None, INCONCLUSIVE_ONE_SEED),  # items alone never decide a seeded score
    (D(0.10, math.nan, ONE_SEED), GREATER, None, INCONCLUSIVE_ONE_SEED),
    (D(0.10, math.nan, NO_INTERVAL), GREATER, None, INCONCLUSIVE_NO_INTERVAL),
    (D(0.10, 0.02, ITEMS), GREATER, None, REPRODUCED),   # probes: the items decide
    (D(0.2, 0.5), ABOUT_EQUAL, 0.9, REPRODUCED),         # [-0.3, 0.7] inside ±0.9
    (D(0.2, 0.8), ABOUT_EQUAL, 0.9, INCONCLUSIVE),       # [-0.6, 1.0] reaches past the margin
    (D(2.0, 0.5), ABOUT_EQUAL, 0.9, NOT_REPRODUCED),     # [1.5, 2.5] outside it
    (D(-2.0, 0.5), ABOUT_EQUAL, 0.9, NOT_REPRODUCED),
    (D(0.0, 0.0, ONE_SEED), ABOUT_EQUAL, 0.9, INCONCLUSIVE_ONE_SEED),  # identical single seeds prove nothing
    (D(math.nan, math.nan, NO_INTERVAL), GREATER, None, NO_DATA),
])
def test_judge(d, claim, margin, verdict):
    assert judge(d, claim, margin) == verdict


def test_judge_needs_a_known_claim_and_a_margin():
    with pytest.raises(ValueError, match="unknown claim"):
        judge(D(1.0, 0.1), "bigger")
    with pytest.raises(ValueError, match="margin"):
        judge(D(1.0, 0.1), ABOUT_EQUAL)


def test_compare_on_seed_samples():
    """Three seeds a side, no items: Welch's interval; the old rule (mean ± std intervals not overlapping) called
    this reproduced, the interval does not."""
    a, b = Sample((66.0, 67.0, 68.0)), Sample((59.0, 60.0, 61.0))
    verdict, d = compare(a, b, GREATER)
    assert d.basis == SEEDS_ONLY and d.estimate == pytest.approx(7.0) and verdict == REPRODUCED
    # 63 ± 1.5 against 60 ± 1: the mean ± std intervals do not overlap, the difference's interval contains 0
    verdict, d = compare(Sample((61.5, 63.0, 64.5)), Sample((59.0, 60.0, 61.0)), GREATER)
    assert verdict == INCONCLUSIVE and d.low < 0 < d.high and d.detectable > d.half_width
    assert compare(Sample((70.0,)), Sample((60.0, 61.0)), GREATER)[0] == INCONCLUSIVE_ONE_SEED
    assert compare(Sample(()), Sample((60.0, 61.0)), GREATER)[0] == NO_DATA


def _probe(values: dict[int, float], pairs: int = 1000) -> dict[int, Sample]:
    """layer -> accuracy (%) over `pairs` pairs, with the binomial variance a probe without items gets."""
    return {layer: Sample((v * 100,), seeded=False, binomial_variance=v * (1 - v) / pairs * 100 ** 2)
            for layer, v in values.items()}


def test_compare_layers():
    layers = [0, 1, 2, 3]
    base = _probe(dict.fromkeys(layers, 0.5))
    every = compare_layers(_probe({0: 0.6, 1: 0.7, 2: 0.8, 3: 0.6}), base, GREATER)
    assert (every.verdict, every.holds_at, every.considered) == (REPRODUCED, layers, layers)
    # the other side beyond noise at more than half of the layers: not reproduced; at exactly half: inconclusive
    assert compare_layers(_probe({0: 0.6, 1: 0.4, 2: 0.4, 3: 0.4}), base, GREATER).verdict == NOT_REPRODUCED
    half = compare_layers(_probe({0: 0.6, 1: 0.6, 2: 0.4, 3: 0.4}), base, GREATER)
    assert (half.verdict, half.holds_at, half.opposite_at) == (INCONCLUSIVE, [0, 1], [2, 3])
    # higher at every layer, but within the noise of 1,000 pairs at one of them: inconclusive
    assert compare_layers(_probe({0: 0.6, 1: 0.51, 2: 0.6, 3: 0.6}), base, GREATER).verdict == INCONCLUSIVE
    # AER: lower at every layer but the excluded embedding layer 0.
    aer = _probe({0: 0.6, 1: 0.3, 2: 0.2, 3: 0.3})
    assert compare_layers(aer, base, LESS).verdict == INCONCLUSIVE
    assert compare_layers(aer, base, LESS, exclude=(0,)).considered == [1, 2, 3]
    assert compare_layers(aer, base, LESS, exclude=(0,)).verdict == REPRODUCED
    # Only layers both models have a value for count; none left: no data.
    partial = compare_layers(_probe({1: 0.6, 5: 0.9}) | {2: Sample((math.nan,), seeded=False)}, base, GREATER)
    assert (partial.verdict, partial.considered) == (REPRODUCED, [1])
    assert compare_layers(_probe({7: 0.6}), base, GREATER).verdict == NO_DATA
    # no interval at any layer (AER results without per-pair counts): nothing decided
    bare = {layer: Sample((v,), seeded=False) for layer, v in {1: 30.0, 2: 20.0}.items()}
    assert compare_layers(bare, {1: Sample((50.0,), seeded=False), 2: Sample((50.0,), seeded=False)},
                          LESS).verdict == INCONCLUSIVE_NO_INTERVAL
    with pytest.raises(ValueError):
        compare_layers(base, base, ABOUT_EQUAL)


def test_combine():
    assert combine([REPRODUCED, REPRODUCED]) == REPRODUCED
    assert combine([REPRODUCED, INCONCLUSIVE]) == INCONCLUSIVE
    assert combine([REPRODUCED, INCONCLUSIVE_ONE_SEED]) == INCONCLUSIVE_ONE_SEED
    assert combine([INCONCLUSIVE, NOT_REPRODUCED]) == NOT_REPRODUCED
    assert combine([NOT_REPRODUCED, NO_DATA]) == NO_DATA


def _seeds(mean: float, std: float) -> Sample:
    return Sample((mean - std, mean, mean + std))


def test_checkpoint_rule():
    falls = [(50, _seeds(30.0, 1.0)), (75, _seeds(25.0, 1.0)), (100, _seeds(15.0, 1.0))]
    rises = [(50, _seeds(5.0, 1.0)), (100, _seeds(20.0, 1.0))]
    assert compare_gap_trends(falls, rises) == (REPRODUCED, REPRODUCED, REPRODUCED)
    # Only the first and the last checkpoint count.
    assert compare_gap_trends([falls[0], (75, _seeds(40.0, 1.0)), falls[2]], rises)[0] == REPRODUCED
    # MetaXLM's gap grows: not reproduced, whatever XLM does.
    assert compare_gap_trends(falls[::-1], rises)[:2] == (NOT_REPRODUCED, NOT_REPRODUCED)
    # XLM's gap within the noise: inconclusive.
    assert compare_gap_trends(falls, [(50, _seeds(10.0, 5.0)), (100, _seeds(12.0, 5.0))]) == (
        INCONCLUSIVE, REPRODUCED, INCONCLUSIVE)
    # One checkpoint is no trend.
    assert compare_gap_trends(falls[:1], rises)[0] == NO_DATA


def test_paper_figures():
    assert table1_figure("both", "xlm", GREATER) == "Avg 55.7 vs 49.2; higher on 6 of 7 tasks"
    assert table1_figure("both_dict", "both", GREATER) == "Avg 59.3 vs 55.7; higher on 7 of 7 tasks"
    assert ablation_figure("both", "emb", GREATER) == ("59.4 vs 50.2 (mean of XQuAD, MLQA, TyDiQA, XNLI, PAWS-X); "
                                                       "higher on 5 of 5 tasks")
    assert ablation_figure("both", "body", GREATER).startswith("59.4 vs 47.5 ")
    assert ablation_figure("frozen", "both", LESS) == ("50.4 vs 59.4 (mean of XQuAD, MLQA, TyDiQA, XNLI, PAWS-X); "
                                                       "lower on 5 of 5 tasks")
    assert ablation_figure("distill", "xlm", ABOUT_EQUAL).endswith("50.3 vs 49.9 (mean of XQuAD, MLQA, TyDiQA, "
                                                                   "XNLI, PAWS-X); within 0.9 on every task")


# -- the findings on constructed results ---------------------------------------------------------------------

def _stat(runs: list[float]) -> dict:
    return {"mean": statistics.mean(runs), "std": statistics.stdev(runs) if len(runs) > 1 else 0.0, "runs": runs}


def _task(target: list[float], gap: list[float], scenario: str = "zero_shot") -> dict:
    """A task entry: `target` and `gap` per seed (English = target + gap)."""
    return {"type": "classification", "metric": "accuracy", "scenario": scenario, "source": "en",
            "seeds": list(range(len(target))),
            "per_language": {"en": _stat([t + g for t, g in zip(target, gap, strict=True)]), "de": _stat(target)},
            "target_average": _stat(target), "transfer_gap": _stat(gap)}


LAYERS = [0, 1, 2, 3]


def _data(name: str, variant: str, step: int | None, target: list[float], gap: list[float],
          retrieval: list | None = None, aer: list | None = None) -> dict:
    data = {"model_name": name, "variant": variant, "step": step, "tasks": {"xnli": _task(target, gap)}}
    if retrieval:  # 1,000 pairs in one language: the binomial interval of results without per-pair ranks
        data["retrieval"] = {"tatoeba": {"layers": LAYERS, "average": retrieval,
                                         "per_language": {"de": {"pairs": 1000, "mean": retrieval}}}}
    if aer:  # per-layer claims read the test AER (dev: 0.9 everywhere, so any difference would show)
        data["alignment"] = {"de-en": {"method": "ot", "layers": LAYERS, "test": {"aer": aer},
                                       "dev": {"aer": [0.9] * len(LAYERS)}, "chosen_layer": 0, "chosen_on": "dev",
                                       "items": _aer_items(aer)}}
    return data


def _aer_items(aer: list[float], pairs: int = 200) -> dict:
    """Per-pair counts [|A∩S|, |A∩P|, |A|, |S|] whose corpus AER at each layer is `aer`: 10 predicted and 10 sure
    links per pair, the matches alternating one above and one below the layer's mean."""
    rows = []
    for value in aer:
        k = (1 - value) * 10
        rows.append([[k + d, k + d, 10, 10] for d in (1, -1) * (pairs // 2)])
    return {"kind": "aer", "layers": LAYERS, "rows": rows}


def _models() -> list[dict]:
    """XLM and MetaXLM at a step-50 checkpoint and final (step 100); MetaXLM+Dict final only. MetaXLM above XLM
    in target average, retrieval at every layer and AER at every layer but 0; MetaXLM's gap falls, XLM's rises."""
    return [
        _data("xlm@step50", "xlm", 50, [0.40, 0.42], [0.05, 0.06]),
        _data("xlm", "xlm", 100, [0.50, 0.52], [0.20, 0.21], [0.10, 0.20, 0.30, 0.20], [0.50, 0.60, 0.55, 0.60]),
        _data("metaxlm@step50", "metaxlm", 50, [0.55, 0.57], [0.30, 0.31]),
        _data("metaxlm", "metaxlm", 100, [0.60, 0.62], [0.15, 0.16], [0.15, 0.30, 0.45, 0.30],
              [0.55, 0.40, 0.35, 0.40]),
        _data("metaxlm_dict", "metaxlm_dict", 100, [0.61, 0.63], [0.14, 0.15]),
    ]


def _results(models: list[dict]) -> list[ModelResult]:
    return [ModelResult(d["model_name"], d["variant"], d["step"], d, Path(f"/run/eval/{d['model_name']}/results.json"))
            for d in models]


def _by_claim(checks) -> dict:
    return {c.finding.claim: c for c in checks}


def test_findings_on_constructed_results():
    checks = check_findings({"xlm": "xlm", "both": "metaxlm", "both_dict": "metaxlm_dict"}, _results(_models()))
    by_claim = _by_claim(checks)
    assert len(checks) == 9  # one task, one retrieval and one alignment set: one row per finding
    transfer = by_claim["zero-shot transfer: MetaXLM above XLM"]
    assert (transfer.on, transfer.verdict) == ("xnli (accuracy, target avg)", REPRODUCED)
    assert transfer.measured == "61.0 ± 1.4 vs 51.0 ± 1.4 (2 seed(s)); difference +10.0 ± 6.1† (95%, seeds only)"
    assert transfer.models == {"both": "metaxlm", "xlm": "xlm"}
    dictionary = by_claim["zero-shot transfer: MetaXLM+Dict above MetaXLM"]  # 62 ± 1.4 vs 61 ± 1.4
    assert dictionary.verdict == INCONCLUSIVE and dictionary.measured.endswith("; smallest detectable 7.6")
    retrieval = by_claim["sentence retrieval acc@1: MetaXLM above XLM at every layer"]
    assert (retrieval.verdict, retrieval.measured) == (
        REPRODUCED, "higher at 4 of 4 layers, beyond noise at 4, the opposite beyond noise at 0 (95% intervals: "
                    "binomial); mean over layers 30.0 vs 20.0 (%)")
    aer = by_claim["word alignment AER: MetaXLM below XLM at every layer but 0"]
    assert (aer.verdict, aer.numbers["layers"], aer.on) == (REPRODUCED, [1, 2, 3], "de-en (test AER)")
    gap = by_claim["transfer gap across checkpoints: MetaXLM's falls, XLM's rises"]
    assert gap.verdict == REPRODUCED
    assert gap.measured == ("MetaXLM gap 30.5 ± 0.7 → 15.5 ± 0.7 (step 50 → 100), change -15.0 ± 3.0†: falls "
                            "reproduced; XLM gap 5.5 ± 0.7 → 20.5 ± 0.7 (step 50 → 100), change +15.0 ± 3.0†: rises "
                            "reproduced")
    frozen = by_claim["frozen body below full training (MetaXLM)"]
    assert (frozen.verdict, frozen.measured, frozen.on) == (NOT_RUN, "role frozen not set", "–")


def test_findings_degenerate_cases():
    models = _models()
    # One seed (points), the other direction, a NaN target average, a role naming a model without results.
    models[1]["tasks"]["xnli"] = _task([0.70], [0.0])
    models[2]["tasks"]["xnli"] = _task([0.55], [0.30])  # a checkpoint with one seed (the final has two)
    models[4]["tasks"]["xnli"]["target_average"] = {"mean": None, "std": None}
    models.append({"model_name": "xlm@step75", "variant": "xlm", "step": 75, "tasks": {}})  # a checkpoint without it
    roles = {"xlm": "xlm", "both": "metaxlm", "both_dict": "metaxlm_dict", "distill": "xlm_kd"}
    by_claim = _by_claim(check_findings(roles, _results(models)))
    transfer = by_claim["zero-shot transfer: MetaXLM above XLM"]
    assert (transfer.verdict, transfer.measured) == (
        INCONCLUSIVE_ONE_SEED, "61.0 ± 1.4 vs 70.0 (2 / 1 seed(s)); difference -9.0 (one seed)")
    dictionary = by_claim["zero-shot transfer: MetaXLM+Dict above MetaXLM"]
    assert (dictionary.verdict, dictionary.measured) == (NO_DATA, "– vs 61.0 ± 1.4 (2 seed(s))")
    distill = by_claim["distillation (XLM+KD) about equal to XLM"]
    assert (distill.verdict, distill.measured) == (NOT_RUN, "no results for xlm_kd")
    # One seed at a checkpoint of each: neither trend is decided (the step-75 checkpoint has no xnli)
    gap = by_claim["transfer gap across checkpoints: MetaXLM's falls, XLM's rises"]
    assert gap.verdict == INCONCLUSIVE_ONE_SEED
    assert gap.measured.startswith("MetaXLM gap 30.0 → 15.5 ± 0.7 (step 50 → 100), change -14.5 (one seed): falls "
                                   "inconclusive: one seed; XLM gap ")


def test_alignment_findings_read_results_from_before_the_dev_test_split():
    models = _models()
    for data in models:  # the whole set's AER at the top level, as results were written before the split
        for entry in data.get("alignment", {}).values():
            del entry["items"]
            entry["aer"] = entry.pop("test")["aer"]
            del entry["dev"], entry["chosen_layer"], entry["chosen_on"]
    aer = _by_claim(check_findings({"xlm": "xlm", "both": "metaxlm"}, _results(models)))[
        "word alignment AER: MetaXLM below XLM at every layer but 0"]
    # read at every layer, but without per-pair counts there is no interval to judge by
    assert (aer.verdict, aer.on, aer.numbers["layers"]) == (INCONCLUSIVE_NO_INTERVAL, "de-en (AER, no dev split)",
                                                            [1, 2, 3])
    assert aer.numbers["a"][2] == pytest.approx(35.0)


def test_findings_without_the_data():
    models = [m for m in _models() if m["step"] == 100]  # no checkpoints
    models[0]["tasks"]["xnli"]["scenario"] = "supervised"  # not a zero-shot task
    by_claim = _by_claim(check_findings({"xlm": "xlm", "both": "metaxlm"}, _results(models)))
    assert by_claim["zero-shot transfer: MetaXLM above XLM"].verdict == NO_DATA
    assert by_claim["transfer gap across checkpoints: MetaXLM's falls, XLM's rises"].verdict == NO_DATA
    del models[0]["retrieval"]
    by_claim = _by_claim(check_findings({"xlm": "xlm", "both": "metaxlm"}, _results(models)))
    retrieval = by_claim["sentence retrieval acc@1: MetaXLM above XLM at every layer"]
    assert (retrieval.verdict, retrieval.measured) == (NO_DATA, "no retrieval set in both")
    assert check_findings({}, _results(models)) == []


def test_both_at_chance_cannot_be_judged_one_at_chance_can():
    """The distillation row of the demo: XLM+KD and XLM both at the majority-class score is no evidence that they
    are about equal; MetaXLM above a model at chance is still judged."""
    models = [m for m in _models() if m["step"] == 100]
    models.append(_data("xlm_kd", "xlm_kd", 100, [0.50, 0.50], [0.0, 0.0]))
    for m in models:
        m["tasks"]["xnli"]["chance"] = {"en": 0.5, "de": 0.5}  # a balanced binary test set
    models[0]["tasks"]["xnli"] = {**_task([0.50, 0.502], [0.0, 0.0]), "chance": {"en": 0.5, "de": 0.5}}  # XLM
    by_claim = _by_claim(check_findings({"xlm": "xlm", "both": "metaxlm", "distill": "xlm_kd"}, _results(models)))
    distill = by_claim["distillation (XLM+KD) about equal to XLM"]
    assert distill.verdict == AT_CHANCE and "; chance (majority class) 50.0;" in distill.measured
    # 61 vs 50: one side learned, so it is judged — and two seeds a side (t at about one degree of freedom) leave
    # +10.9 inside its interval
    assert by_claim["zero-shot transfer: MetaXLM above XLM"].verdict == INCONCLUSIVE
    # without recorded chance levels (results from before) the interval judges: −0.1 ± 1.3 reaches past the 0.9
    # margin, so two seeds cannot show that they are equal
    for m in models:
        del m["tasks"]["xnli"]["chance"]
    assert _by_claim(check_findings({"xlm": "xlm", "distill": "xlm_kd"}, _results(models)))[
        "distillation (XLM+KD) about equal to XLM"].verdict == INCONCLUSIVE


def test_retrieval_at_a_random_rankings_floor_cannot_be_judged():
    models = [m for m in _models() if m["step"] == 100]
    for m, values in zip(models[:2], ([0.01, 0.011, 0.012, 0.01], [0.012, 0.013, 0.014, 0.012]), strict=True):
        m["retrieval"]["tatoeba"] = {"layers": LAYERS, "average": values,
                                     "per_language": {"de": {"pairs": 100, "mean": values}}}
    retrieval = _by_claim(check_findings({"xlm": "xlm", "both": "metaxlm"}, _results(models)))[
        "sentence retrieval acc@1: MetaXLM above XLM at every layer"]
    assert retrieval.verdict == AT_FLOOR and "random ranking 1.0%" in retrieval.measured
    models[1]["retrieval"]["tatoeba"]["average"] = [0.01, 0.05, 0.10, 0.05]  # learned at some layers: judged
    retrieval = _by_claim(check_findings({"xlm": "xlm", "both": "metaxlm"}, _results(models)))[
        "sentence retrieval acc@1: MetaXLM above XLM at every layer"]
    assert retrieval.verdict != AT_FLOOR


def test_the_report_opens_with_what_the_run_can_and_cannot_show(tmp_path):
    models = [m for m in _models() if m["step"] == 100]
    for m in models:
        m["tasks"]["xnli"]["chance"] = {"en": 0.5, "de": 0.5}
    models[0]["tasks"]["xnli"] = {**_task([0.50, 0.50], [0.0, 0.0]), "chance": {"en": 0.5, "de": 0.5},
                                  "collapsed": {"de": [{"seed": 0, "trained_on": "en", "what": "predicts one class"}]}}
    (section,) = limits_section(_results(models))
    text = " ".join(str(b.items) for b in section.blocks if hasattr(b, "items"))
    assert "xnli: xlm at the task's chance level" in text and "fine-tuning collapsed" in text and "xlm (de)" in text
    assert limits_section(_results([m for m in _models() if m["step"] == 100])) == []  # nothing limited: no section
    probes = [m for m in _models() if m["step"] == 100]
    for i, m in enumerate(probes):  # XLM (the first) above the others at the last layer, every one best at layer 0
        values = [0.30, 0.25, 0.20, 0.21] if i == 0 else [0.25, 0.05, 0.03, 0.02]
        m.setdefault("retrieval", {})["tatoeba"] = {"layers": LAYERS, "average": values,
                                                    "per_language": {"de": {"pairs": 50, "mean": values}}}
    (section,) = limits_section(_results(probes))
    text = " ".join(str(b.items) for b in section.blocks if hasattr(b, "items"))
    assert "retrieval tatoeba: every model retrieves best from its embeddings (layer 0)" in text
    probes[1]["retrieval"]["tatoeba"]["average"] = [0.25, 0.35, 0.03, 0.02]  # one model's layer 1 beats its tokens
    assert limits_section(_results(probes)) == []
    run = tmp_path / "run"
    for data in models:
        path = run / "eval" / data["model_name"] / "results.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(data))
    md = write_report([run])["markdown"].read_text()
    assert md.index("## What this run can and cannot show") < md.index("## Overview")


# -- in the report -------------------------------------------------------------------------------------------

def _run(tmp_path: Path, report: str) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("variants:\n  xlm: {}\n  metaxlm: {}\n  metaxlm_dict: {}\n" + report)
    for data in _models():
        path = run / "eval" / data["model_name"] / "results.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(data))
    return run


def test_report_has_the_findings_section_and_json(tmp_path):
    run = _run(tmp_path, "report:\n  findings: {xlm: xlm, both: metaxlm, both_dict: metaxlm_dict}\n")
    written = write_report([run])
    md = written["markdown"].read_text()
    assert f"## {TITLE}" in md
    assert ("| zero-shot transfer: MetaXLM above XLM | xnli (accuracy, target avg) | Table 1: Avg 55.7 vs 49.2; "
            "higher on 6 of 7 tasks | 61.0 ± 1.4 vs 51.0 ± 1.4 (2 seed(s)); "
            "difference +10.0 ± 6.1† (95%, seeds only) | "
            "reproduced |") in md
    assert "| initialization: Both above Emb only | – | Table 5: 59.4 vs 50.2" in md
    assert "Verdicts: 4 reproduced, 1 inconclusive, 4 not run" in md
    assert html.escape(TITLE) in written["html"].read_text()
    findings = json.loads((written["markdown"].parent / "findings.json").read_text())
    assert findings["roles"] == {"xlm": "xlm", "both": "metaxlm", "both_dict": "metaxlm_dict"}
    assert findings["summary"] == {"reproduced": 4, "inconclusive": 1, "not run": 4}
    first = findings["findings"][0]
    assert (first["source"], first["verdict"], first["numbers"]["a"]["mean"]) == ("Table 1", "reproduced", 0.61)
    assert first["claim"] == {"a": "both", "direction": "greater", "b": "xlm"}


def test_report_without_roles_has_no_findings(tmp_path):
    run = _run(tmp_path, "")
    stale = run / "report" / "findings.json"
    stale.parent.mkdir()
    stale.write_text("{}")
    md = write_report([run])["markdown"].read_text()
    assert TITLE not in md and not stale.exists()


def test_unknown_role_is_a_clear_error(tmp_path):
    run = _run(tmp_path, "report:\n  findings: {metaxlm: metaxlm}\n")
    with pytest.raises(DataError, match="report.findings: unknown role\\(s\\) metaxlm \\(roles: xlm, body"):
        write_report([run])


def test_bad_report_section_is_a_clear_error(tmp_path):
    run = _run(tmp_path, "report:\n  findings: [xlm, metaxlm]\n")
    with pytest.raises(DataError, match=f"{run / 'config.yaml'}: report section: report\\.findings: "):
        write_report([run])
