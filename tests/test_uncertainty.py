"""The 95% interval of a difference (report/uncertainty.py): calibrated on simulated scores — false positives at most
5% when the true difference is 0, and the power it states at the difference it calls detectable — and exact on what
it recomputes (corpus metrics from per-item statistics)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metaxlm.metrics import item_statistics, metric_from_sums
from metaxlm.report.uncertainty import (
    BINOMIAL,
    ITEMS,
    ITEMS_AND_SEEDS,
    NO_INTERVAL,
    ONE_SEED,
    SEEDS_ONLY,
    LanguageItems,
    Sample,
    difference,
    item_variance,
    task_sample,
)

DRAWS = 600          # simulated experiments per rate: a rate's sampling error is about 0.9 points at 5%
RESAMPLES = 300      # per bootstrap in the simulation (the report uses 1,000; the variance estimate barely moves)
LANGS, ITEMS_PER_LANG, SEEDS = 2, 120, 3
ITEM_SD, SEED_SD, NOISE_SD = 20.0, 2.0, 10.0  # per-item scores in points, like QA F1


def _simulated(rng, difficulty, shift: float, seeds: int = SEEDS) -> Sample:
    """One model's per-item scores ("mean" kind, points): item difficulty (shared by both models: paired), a
    per-seed offset, per (item, seed) noise, and the model's true shift."""
    items = {}
    for lang in range(LANGS):
        offsets = rng.normal(0, SEED_SD, size=(seeds, 1))
        scores = difficulty[lang][None, :] + offsets + rng.normal(0, NOISE_SD, size=(seeds, ITEMS_PER_LANG)) + shift
        items[f"l{lang}"] = LanguageItems("mean", scores[:, :, None])
    weights = {lang: 1 / LANGS for lang in items}
    per_seed = tuple(sum(w * items[lang].scores()[s] for lang, w in weights.items()) for s in range(seeds))
    return Sample(per_seed, items, weights, 1.0, seeded=True)


def _experiment(rng, true_difference: float):
    difficulty = [rng.normal(50, ITEM_SD, size=ITEMS_PER_LANG) for _ in range(LANGS)]
    a = _simulated(rng, difficulty, true_difference)
    b = _simulated(rng, difficulty, 0.0)
    return difference(a, b, resamples=RESAMPLES, seed=int(rng.integers(1 << 31)))


def _rate(hits: int, draws: int) -> tuple[float, float]:
    p = hits / draws
    return p, math.sqrt(max(p * (1 - p), 1e-4) / draws)


def test_false_positive_rate_is_at_most_five_percent():
    rng = np.random.default_rng(1)
    results = [_experiment(rng, 0.0) for _ in range(DRAWS)]
    assert all(r.basis == ITEMS_AND_SEEDS for r in results)
    rate, error = _rate(sum(r.significant for r in results), DRAWS)
    assert rate <= 0.05 + 2 * error, f"false-positive rate {rate:.3f} (± {error:.3f}) above 5%"


def test_power_at_the_stated_detectable_difference():
    """At a true difference equal to the detectable difference the null experiments state, the interval excludes 0
    in about 80% of experiments (the rule's promise), and clearly less at half of it."""
    rng = np.random.default_rng(2)
    detectable = float(np.median([_experiment(rng, 0.0).detectable for _ in range(100)]))
    found = [_experiment(rng, detectable) for _ in range(DRAWS)]
    rate, error = _rate(sum(r.significant and r.estimate > 0 for r in found), DRAWS)
    assert abs(rate - 0.80) <= 3 * error + 0.03, f"power {rate:.3f} at the stated detectable {detectable:.2f}"
    half = [_experiment(rng, detectable / 2) for _ in range(200)]
    assert sum(r.significant for r in half) / 200 < 0.6


def test_seed_noise_without_seed_part_would_not_be_calibrated():
    """The check has teeth: the items' interval alone (seed spread ignored, as a one-seed report would need to
    assume) gives far more than 5% false positives when seeds vary."""
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(300):
        difficulty = [rng.normal(50, ITEM_SD, size=ITEMS_PER_LANG) for _ in range(LANGS)]
        a, b = _simulated(rng, difficulty, 0.0), _simulated(rng, difficulty, 0.0)
        half = 1.959964 * math.sqrt(item_variance(a, b, resamples=RESAMPLES))
        hits += abs(a.mean - b.mean) > half
    assert hits / 300 > 0.10


def test_one_seed_never_decides():
    rng = np.random.default_rng(4)
    difficulty = [rng.normal(50, ITEM_SD, size=ITEMS_PER_LANG) for _ in range(LANGS)]
    a, b = _simulated(rng, difficulty, 30.0, seeds=1), _simulated(rng, difficulty, 0.0, seeds=3)
    d = difference(a, b)
    assert d.basis == ONE_SEED and not d.significant and not d.decides
    assert not math.isnan(d.half_width)  # the items' part is still shown, as the least the noise is
    assert d.text().endswith("(one seed)")


def test_seeds_only_and_no_interval_for_results_without_items():
    a, b = Sample((50.0, 52.0, 51.0)), Sample((40.0, 41.0, 42.0))
    d = difference(a, b)
    assert d.basis == SEEDS_ONLY and d.significant and d.text().endswith("†")
    # Welch's t at 4 degrees of freedom: 10 ± 2.776 · sqrt(1/3 + 1/3)
    assert d.half_width == pytest.approx(2.7764451 * math.sqrt(2 / 3), rel=1e-6)
    assert difference(Sample((1.0,), seeded=False), Sample((2.0,), seeded=False)).basis == NO_INTERVAL
    probe = difference(Sample((60.0,), seeded=False, binomial_variance=4.0),
                       Sample((50.0,), seeded=False, binomial_variance=5.0))
    assert probe.basis == BINOMIAL and probe.half_width == pytest.approx(1.959964 * 3.0, rel=1e-5)
    assert math.isnan(difference(Sample((math.nan,)), b).half_width)
    # every seed the same on both sides (the demo's module task: all at the majority class): not a zero-width
    # interval that would call them exactly equal, but none
    same = difference(Sample((27.0, 27.0, 27.0)), Sample((27.0, 27.0, 27.0)))
    assert same.basis == NO_INTERVAL and not same.decides


def test_identical_models_on_identical_items_have_zero_item_variance():
    """Paired: the same items resampled for both sides, so two copies of one model differ by exactly 0."""
    rows = [[1], [0], [1], [1], [0]]
    items = {"de": LanguageItems.of("mean", [rows])}
    a = Sample((0.6,), items, {"de": 1.0}, 100.0, seeded=False)
    d = difference(a, a)
    assert d.basis == ITEMS and d.estimate == 0 and d.half_width == 0


@pytest.mark.parametrize("kind,rows", [
    ("f1", [[2, 1, 0], [0, 0, 3], [1, 2, 1], [4, 0, 0]]),
    ("aer", [[3, 4, 5, 4], [1, 1, 3, 2], [0, 1, 2, 2]]),
    ("ratio", [[3, 4], [5, 5], [0, 2]]),
    ("rank", [[1, 2], [1, 1], [3, 1]]),
])
def test_corpus_metrics_resampled_from_item_statistics(kind, rows):
    """A resample that draws every item once is the full set: the corpus metric itself, not a mean of per-item
    metrics (span F1 and AER are not averages over sentences)."""
    items = LanguageItems.of(kind, [rows])
    once = np.ones((1, len(rows)))
    full = metric_from_sums(kind, item_statistics(kind, rows).sum(axis=0), len(rows))
    assert items.scores(once)[0, 0] == pytest.approx(full)
    assert items.scores()[0] == pytest.approx(full)
    twice_first = np.zeros((1, len(rows)))
    twice_first[0, 0] = 2
    assert items.scores(twice_first)[0, 0] == pytest.approx(
        metric_from_sums(kind, item_statistics(kind, rows[:1]).sum(axis=0) * 2, 2))


def test_task_sample_reads_items_of_the_headline_languages():
    entry = {"metric": "accuracy", "source": "en", "seeds": [0, 1],
             "per_language": {"en": {"runs": [1.0, 0.5]}, "de": {"runs": [0.5, 0.0]}, "fr": {"runs": [1.0, 1.0]}},
             "items": {"accuracy": {"kind": "mean", "per_language": {
                 lang: {"seeds": [0, 1], "rows": rows} for lang, rows in {
                     "en": [[[1], [1]], [[1], [0]]], "de": [[[1], [0]], [[0], [0]]],
                     "fr": [[[1], [1]], [[1], [1]]]}.items()}}}}
    s = task_sample(entry, "target_average", 100.0)
    assert s.per_seed == (75.0, 50.0) and set(s.items) == {"de", "fr"}
    assert s.resampled({lang: np.ones((1, 2)) for lang in s.items})[0] == pytest.approx(s.mean)
    gap = task_sample(entry, "transfer_gap", 100.0)
    assert gap.per_seed == (25.0, 0.0)
    entry["items"]["accuracy"]["per_language"]["fr"]["seeds"] = [1, 0]  # rows of other seeds: not these scores
    assert task_sample(entry, "target_average", 100.0).items is None
    del entry["items"]["accuracy"]["per_language"]["fr"]
    assert task_sample(entry, "target_average", 100.0).items is None  # a language without items: none used
