import math

import numpy as np
import pytest

from metaxlm.data.sampling import LanguageSampler, allocate, sampling_probs

SIZES = {"en": 1_000_000, "de": 100_000, "hi": 1_000}


def test_probs_by_hand():
    # p_i = N_i^a / sum_j N_j^a
    p = sampling_probs({"a": 100, "b": 1}, 0.5)
    assert p["a"] == pytest.approx(10 / 11) and p["b"] == pytest.approx(1 / 11)
    assert sampling_probs(SIZES, 0.0) == pytest.approx({k: 1 / 3 for k in SIZES})
    total = sum(SIZES.values())
    assert sampling_probs(SIZES, 1.0) == pytest.approx({k: n / total for k, n in SIZES.items()})


def test_alpha_boosts_small_languages_monotonically():
    shares = [sampling_probs(SIZES, a)["hi"] for a in (1.0, 0.7, 0.5, 0.3, 0.0)]
    assert shares == sorted(shares)
    assert sum(sampling_probs(SIZES, 0.7).values()) == pytest.approx(1.0)


def test_huge_counts_do_not_overflow():
    p = sampling_probs({"a": 10**15, "b": 10**3}, 0.7)
    assert math.isfinite(p["a"]) and p["a"] > p["b"] > 0


def test_empirical_frequencies_match_p():
    sampler = LanguageSampler(SIZES, 0.7, seed=123)
    n = 200_000
    draws = sampler.sample(n)
    for lang, p in sampler.probs.items():
        freq = draws.count(lang) / n
        # 5 standard errors of a binomial proportion
        assert abs(freq - p) < 5 * math.sqrt(p * (1 - p) / n), (lang, freq, p)


def test_sampler_state_resumes_exactly():
    a = LanguageSampler(SIZES, 0.7, seed=1)
    a.sample(100)
    state = a.state_dict()
    expected = a.sample(50)
    b = LanguageSampler(SIZES, 0.7, seed=999)
    b.load_state_dict(state)
    assert b.sample(50) == expected


def test_allocate_sums_and_follows_p():
    counts = allocate(SIZES, 0.7, 10_001)
    assert sum(counts.values()) == 10_001
    p = sampling_probs(SIZES, 0.7)
    for k in SIZES:
        assert abs(counts[k] - p[k] * 10_001) <= 1


def test_errors():
    with pytest.raises(ValueError, match="empty corpora"):
        sampling_probs({"en": 10, "de": 0}, 0.7)
    with pytest.raises(ValueError, match="alpha"):
        sampling_probs({"en": 10}, 1.5)
    with pytest.raises(ValueError, match="no corpora"):
        sampling_probs({}, 0.7)
    assert np.isclose(sum(sampling_probs({"x": 3}, 0.7).values()), 1)
