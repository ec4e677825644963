import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tools.above_chance import above_chance, main

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "reproduce-metaxlm-10x" / "results.xlm.json"


@pytest.fixture(scope="module")
def spans():
    return json.loads(RESULTS.read_text(encoding="utf-8"))["tasks"]["spans"]


def test_without_items_the_interval_is_the_seeds_t_interval_around_score_minus_chance(spans):
    entry = copy.deepcopy(spans)
    entry.pop("items", None)
    score, chance, diff = above_chance(entry)
    targets = [lang for lang in entry["per_language"] if lang != entry["source"]]
    per_seed = [100 * np.mean([entry["per_language"][lang]["runs"][i] for lang in targets]) for i in range(3)]
    assert score == pytest.approx(np.mean(per_seed)) and diff.estimate == pytest.approx(score - chance)
    half = stats.t.ppf(0.975, 2) * np.std(per_seed, ddof=1) / math.sqrt(3)
    assert diff.basis == "seeds only" and diff.half_width == pytest.approx(half)


def test_the_items_widen_it_and_a_model_at_chance_is_not_shown_above_it(spans, tmp_path, capsys):
    _, _, seeds_only = above_chance({k: v for k, v in spans.items() if k != "items"})
    _, chance, with_items = above_chance(spans)
    assert with_items.basis == "items and seeds" and with_items.half_width > seeds_only.half_width
    assert chance == 0.0 and with_items.low > 0  # XLM's spans at 10x: just above the empty answer
    at_chance = copy.deepcopy(spans)
    at_chance["chance"] = {lang: at_chance["target_average"]["mean"] for lang in at_chance["per_language"]}
    (tmp_path / "results.m.json").write_text(json.dumps({"tasks": {"spans": at_chance}}), encoding="utf-8")
    assert main([str(tmp_path), "m", "spans"]) == 0
    assert "not shown (the interval holds chance)" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no task 'qa'"):
        main([str(tmp_path), "m", "qa"])
