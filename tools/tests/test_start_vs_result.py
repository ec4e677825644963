"""The README's start-vs-result table: its intervals are the report's, its verdicts follow their sign."""

import shutil
from pathlib import Path

import pytest

from tools.start_vs_result import main, rows

PUBLISHED = Path(__file__).resolve().parents[2] / "docs/results/align-encoder"


def test_swapping_the_models_negates_every_difference_and_flips_better_to_worse():
    forward = {r[0].split(",")[0]: r for r in rows(PUBLISHED, "align", "start")}
    backward = {r[0].split(",")[0]: r for r in rows(PUBLISHED, "start", "align")}
    assert forward.keys() == backward.keys() and len(forward) == 7
    flip = {"better": "worse", "worse": "better", "within the noise": "within the noise"}
    for name, (_, start, result, diff, verdict) in forward.items():
        _, start_b, result_b, diff_b, verdict_b = backward[name]
        assert (start, result) == (result_b, start_b)
        assert float(diff.split()[0]) == -float(diff_b.split()[0])
        assert verdict_b == flip[verdict]


def test_a_model_against_itself_is_within_the_noise(tmp_path):
    shutil.copy(PUBLISHED / "results.start.json", tmp_path / "results.start.json")
    shutil.copy(PUBLISHED / "results.start.json", tmp_path / "results.copy.json")
    for _, start, result, diff, verdict in rows(tmp_path, "copy", "start"):
        assert start == result and float(diff.split()[0]) == 0 and verdict == "within the noise"


def test_the_published_run_is_better_on_retrieval_and_mean_aer(capsys):
    table = {r[0].split(" (")[0]: r[4] for r in rows(PUBLISHED, "align", "start")}
    assert table["tatoeba acc@1"] == "better" and table["mean AER of de-en, en-fr, grc-en"] == "better"
    assert main([str(PUBLISHED)]) == 0 and "| tatoeba acc@1" in capsys.readouterr().out


def test_a_missing_results_file_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="results.align.json not found"):
        rows(tmp_path, "align", "start")
