"""Rebalanced language sampling, p_i ∝ N_i^α (XLM; Conneau & Lample 2019).

α=1 samples in proportion to corpus size, α=0 uniformly; α=0.7 (the default) boosts low-resource
languages while keeping high-resource ones ahead. The same rule serves monolingual and parallel data.
"""

from __future__ import annotations

import numpy as np


def sampling_probs(sizes: dict[str, int], alpha: float) -> dict[str, float]:
    if not sizes:
        raise ValueError("no corpora to sample from")
    bad = [k for k, n in sizes.items() if n <= 0]
    if bad:
        raise ValueError(f"empty corpora cannot be sampled: {', '.join(bad)}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    total = sum(sizes.values())
    # Work with shares q_i = N_i / N first: identical result, no overflow for huge N_i.
    weights = {k: (n / total) ** alpha for k, n in sizes.items()}
    z = sum(weights.values())
    return {k: w / z for k, w in weights.items()}


class LanguageSampler:
    """Draws language keys i.i.d. with p_i ∝ N_i^α from a seeded generator whose state can be saved."""

    def __init__(self, sizes: dict[str, int], alpha: float, seed: int = 0):
        self.probs = sampling_probs(sizes, alpha)
        self.keys = sorted(self.probs)
        self._p = np.array([self.probs[k] for k in self.keys])
        self.rng = np.random.default_rng(seed)

    def sample(self, n: int) -> list[str]:
        idx = self.rng.choice(len(self.keys), size=n, p=self._p)
        return [self.keys[i] for i in idx]

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]


def allocate(sizes: dict[str, int], alpha: float, total: int) -> dict[str, int]:
    """Split `total` draws over languages by p_i (largest-remainder rounding, so counts sum to `total`)."""
    probs = sampling_probs(sizes, alpha)
    raw = {k: p * total for k, p in probs.items()}
    counts = {k: int(v) for k, v in raw.items()}
    for k in sorted(raw, key=lambda k: raw[k] - counts[k], reverse=True)[: total - sum(counts.values())]:
        counts[k] += 1
    return counts
