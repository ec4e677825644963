"""How sure a difference between two models' scores is: a 95% interval from the test items and the fine-tuning seeds.

A score in the report is a mean over fine-tuning seeds of a metric on a fixed set of test items (for the probes, a
metric on fixed test pairs, without seeds). It varies for two reasons, and the interval of a difference A − B takes
both into account:
- **the test items**: another sample of items from the same distribution gives another score. A **paired bootstrap
  over the items** (Koehn 2004; sacreBLEU's `--paired-bs`) resamples each language's items with replacement — the
  same resample for both models where they were tested on the same items — and recomputes every metric from the
  resampled per-item statistics (results.json `items`, metaxlm.metrics `metric_from_sums`; corpus-level metrics such
  as span F1, AER, BLEU and chrF included). Its variance over `RESAMPLES` resamples (of the seed-averaged scores) is
  the item part, V_items.
- **the fine-tuning seeds**: another seed gives another fine-tuned model. With n seeds of per-seed scores of sample
  variance s², the mean's variance is s²/n (per model: the two models' seeds are independent runs), V_seeds.
The difference's standard error is sqrt(V_items + V_seeds_A + V_seeds_B) and its interval difference ± t · SE with
t the 97.5% quantile of Student's t at the Welch–Satterthwaite degrees of freedom of the seed parts (n − 1 each;
the item part counts as many degrees of freedom: hundreds of items). This is the stated equivalent of resampling
seeds and items together: a bootstrap over 2–5 seeds would understate their spread (a resample of 3 values has 10
distinct outcomes), while the t quantile at their degrees of freedom keeps the false-positive rate at 5%
(tests/test_uncertainty.py checks it on simulated scores, with its power).

What each interval rests on (`Difference.basis`, shown in the tables):
- ITEMS_AND_SEEDS: both parts, from per-item outcomes recorded per seed;
- SEEDS_ONLY: results written before per-item outcomes were recorded: the seeds' part alone (the interval is too
  narrow by the item noise it leaves out; tables mark it †); when every seed scored the same on both sides (all at
  the majority class, say) it would be a single point, so there is none (NO_INTERVAL);
- ITEMS: the probes (retrieval, word alignment), which have no seeds: the item part alone;
- BINOMIAL: a probe scored before per-pair outcomes were recorded, with accuracy@1 over a known number of pairs: the
  binomial variance p(1 − p)/pairs of each model, unpaired (conservative when the models err on the same pairs);
- ONE_SEED: a fine-tuned score from one seed on either side: the seeds' part is unknown, so nothing is decided
  ("inconclusive: one seed"); the items' interval is shown where it is known, as the least the noise is;
- NO_INTERVAL: nothing recorded to make one from.

The smallest difference a comparison could have detected (`Difference.detectable`) is (t_97.5% + t_80%) · SE: a true
difference that large is found (interval excludes 0 on its side) with 80% probability — so an inconclusive
comparison with a small detectable difference says "no effect of that size", one with a large one "too small a run".

The bootstrap draws from a fixed seed: a report is a function of its results, the same on every machine.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from metaxlm.metrics import item_statistics, metric_from_sums

CONFIDENCE = 0.95
POWER = 0.80
RESAMPLES = 1000
BOOTSTRAP_SEED = 20_041  # fixed (Koehn 2004): the same interval from the same results on every machine

ITEMS_AND_SEEDS, SEEDS_ONLY, ITEMS, BINOMIAL, ONE_SEED, NO_INTERVAL = (
    "items and seeds", "seeds only", "items", "binomial", "one seed", "no interval")
# the bases whose interval leaves out a source of noise the score has: marked in the tables
PARTIAL_BASES = (SEEDS_ONLY, BINOMIAL)
MARK = {SEEDS_ONLY: "†", BINOMIAL: "‡"}


@dataclass(frozen=True)
class LanguageItems:
    """One language's (or probe set's) per-item statistics: shape (seeds, items, statistics) of `kind`."""

    kind: str
    stats: np.ndarray

    @classmethod
    def of(cls, kind: str, rows_per_seed: Sequence[Sequence[Sequence[float]]]) -> LanguageItems:
        return cls(kind, np.stack([item_statistics(kind, rows) for rows in rows_per_seed]))

    @property
    def items(self) -> int:
        return self.stats.shape[1]

    def scores(self, counts: np.ndarray | None = None) -> np.ndarray:
        """The metric per seed on all items (counts None: shape (seeds,)) or per resample (counts (resamples,
        items) of how often each item is drawn: shape (resamples, seeds))."""
        if counts is None:
            return metric_from_sums(self.kind, self.stats.sum(axis=1), self.items)
        sums = np.einsum("ri,sik->rsk", counts, self.stats)
        return metric_from_sums(self.kind, sums, counts.sum(axis=1)[:, None])


@dataclass(frozen=True)
class Sample:
    """One side of a comparison: a headline score per seed (report units) and, where recorded, the per-item statistics
    it is made of, as Σ weights[lang] · metric(lang) (a target average: 1/T per target; a transfer gap: +1 source,
    −1/T per target)."""

    per_seed: tuple[float, ...]
    items: Mapping[str, LanguageItems] | None = None
    weights: Mapping[str, float] = field(default_factory=dict)
    scale: float = 1.0         # report units per metric unit (100: fractions shown in percent)
    seeded: bool = True        # the score depends on a fine-tuning seed (the probes': no)
    binomial_variance: float = math.nan  # a probe without items: p(1 − p)/pairs averaged as the score is

    @property
    def mean(self) -> float:
        values = [v for v in self.per_seed if not math.isnan(v)]
        return math.fsum(values) / len(values) if values else math.nan

    @property
    def seeds(self) -> int:
        return len(self.per_seed)

    @property
    def seed_variance_of_mean(self) -> float:
        """s²/n over the seeds (NaN for fewer than two)."""
        if self.seeds < 2:
            return math.nan
        return float(np.var(self.per_seed, ddof=1)) / self.seeds

    def resampled(self, counts: Mapping[str, np.ndarray]) -> np.ndarray:
        """The headline per resample (mean over the seeds), `counts` per language as LanguageItems.scores takes."""
        assert self.items is not None
        total = 0.0
        for lang, w in self.weights.items():
            total = total + w * self.items[lang].scores(counts[lang]).mean(axis=1)
        return np.asarray(total) * self.scale


@dataclass(frozen=True)
class Difference:
    """A − B with its 95% interval (± half_width around the estimate), what the interval rests on, and the smallest
    difference detectable at 80% power; half_width NaN: no interval."""

    estimate: float
    half_width: float
    basis: str
    detectable: float = math.nan
    se: float = math.nan
    df: float = math.nan

    @property
    def low(self) -> float:
        return self.estimate - self.half_width

    @property
    def high(self) -> float:
        return self.estimate + self.half_width

    @property
    def decides(self) -> bool:
        """Whether the interval may decide a verdict: it exists and covers every source of noise it can know of
        (one seed on a seeded score: the seeds' part is unknown)."""
        return self.basis not in (ONE_SEED, NO_INTERVAL) and not math.isnan(self.half_width)

    @property
    def significant(self) -> bool:
        """The 95% interval excludes 0 (and may decide)."""
        return self.decides and (self.low > 0 or self.high < 0)

    def text(self, digits: int = 1) -> str:
        """"+2.3 ± 1.1" (the interval's half-width), marked † / ‡ when it leaves out a source of noise; "+2.3 (one
        seed)" when nothing decides."""
        shown = round(self.estimate, digits)
        estimate = f"{0.0:.{digits}f}" if shown == 0 else f"{shown:+.{digits}f}"  # never "-0.0"
        if self.basis == ONE_SEED:
            return f"{estimate} (one seed)"
        if math.isnan(self.half_width):
            return estimate
        return f"{estimate} ± {self.half_width:.{digits}f}{MARK.get(self.basis, '')}"


def _quantile(p: float, df: float) -> float:
    from scipy.stats import norm, t  # imported here: scipy.stats takes a moment to import

    return float(norm.ppf(p) if math.isinf(df) else t.ppf(p, df))


def _counts(rng: np.random.Generator, items: int, resamples: int) -> np.ndarray:
    """How often each of `items` items is drawn in each of `resamples` resamples with replacement."""
    drawn = rng.integers(0, items, size=(resamples, items))
    counts = np.zeros((resamples, items))
    np.add.at(counts, (np.arange(resamples)[:, None], drawn), 1.0)
    return counts


def item_variance(a: Sample, b: Sample, *, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> float:
    """The paired bootstrap's variance of A − B over the test items (NaN when a side has no items): a language both
    were tested on with the same number of items is resampled identically for both (the same items: results.json
    lists them in the test set's order), any other independently."""
    if a.items is None or b.items is None:
        return math.nan
    rng = np.random.default_rng(seed)
    counts_a: dict[str, np.ndarray] = {}
    counts_b: dict[str, np.ndarray] = {}
    for lang in sorted(set(a.weights) | set(b.weights)):
        sizes = {side: s.items[lang].items for side, s in (("a", a), ("b", b)) if lang in s.weights}
        if len(sizes) == 2 and sizes["a"] == sizes["b"]:
            counts_a[lang] = counts_b[lang] = _counts(rng, sizes["a"], resamples)
        else:
            if "a" in sizes:
                counts_a[lang] = _counts(rng, sizes["a"], resamples)
            if "b" in sizes:
                counts_b[lang] = _counts(rng, sizes["b"], resamples)
    return float(np.var(a.resampled(counts_a) - b.resampled(counts_b), ddof=1))


def difference(a: Sample, b: Sample, *, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
               confidence: float = CONFIDENCE, power: float = POWER) -> Difference:
    """A − B with its interval: rules in the module docstring."""
    estimate = a.mean - b.mean
    if math.isnan(estimate):
        return Difference(estimate, math.nan, NO_INTERVAL)
    v_items = item_variance(a, b, resamples=resamples, seed=seed)
    seeded = [s for s in (a, b) if s.seeded]
    one_seed = any(s.seeds < 2 for s in seeded)
    seed_parts = [(s.seed_variance_of_mean, s.seeds - 1) for s in seeded if s.seeds >= 2]
    if one_seed:
        basis = ONE_SEED
        parts = [(v_items, math.inf)] if not math.isnan(v_items) else []
    elif not math.isnan(v_items):
        basis = ITEMS_AND_SEEDS if seeded else ITEMS
        parts = [(v_items, math.inf), *seed_parts]
    elif seeded:
        basis = SEEDS_ONLY
        parts = seed_parts
    elif not any(math.isnan(s.binomial_variance) for s in (a, b)):
        basis = BINOMIAL
        parts = [(a.binomial_variance, math.inf), (b.binomial_variance, math.inf)]
    else:
        return Difference(estimate, math.nan, NO_INTERVAL)
    if not parts:
        return Difference(estimate, math.nan, basis)
    variance = math.fsum(v for v, _ in parts)
    if variance == 0 and basis == SEEDS_ONLY:
        # every seed scored the same on both sides (e.g. all at the majority class): the seeds say nothing about
        # the test items' noise, which is then all the noise there is, and this interval leaves it out
        return Difference(estimate, math.nan, NO_INTERVAL)
    finite = math.fsum(v * v / df for v, df in parts if not math.isinf(df) and df > 0)
    df = variance * variance / finite if finite > 0 else math.inf
    se = math.sqrt(variance)
    t_half = _quantile(1 - (1 - confidence) / 2, df)
    return Difference(estimate, t_half * se, basis, (t_half + _quantile(power, df)) * se, se, df)


# -- samples from results.json entries ----------------------------------------------------------------------------

def _per_seed(per_language: Mapping[str, dict], weights: Mapping[str, float]) -> list[float]:
    """The weighted headline per seed from each language's per-seed "runs" (as the evaluation averages them: over
    the seeds every language has)."""
    runs = {lang: (per_language.get(lang) or {}).get("runs") or [] for lang in weights}
    n = min((len(r) for r in runs.values()), default=0)
    return [math.fsum(w * float(runs[lang][i] if runs[lang][i] is not None else math.nan)
                      for lang, w in weights.items()) for i in range(n)]


def headline_weights(entry: dict, headline: str) -> dict[str, float]:
    """The languages a task entry's headline averages, with their weights: "average" (every language),
    "target_average" (every language but the source), "transfer_gap" (source − mean target) or one language."""
    langs = list(entry.get("per_language", {}))
    source = entry.get("source")
    targets = [lang for lang in langs if lang != source]
    if headline == "average":
        return {lang: 1 / len(langs) for lang in langs} if langs else {}
    if headline == "target_average":
        return {lang: 1 / len(targets) for lang in targets} if targets else {}
    if headline == "transfer_gap":
        if source not in langs or not targets:
            return {}
        return {source: 1.0, **{lang: -1 / len(targets) for lang in targets}}
    return {headline: 1.0} if headline in langs else {}


def task_sample(entry: dict, headline: str, scale: float, metric: str | None = None) -> Sample:
    """A fine-tuning task entry's headline (see `headline_weights`) as a Sample in report units; `metric` a further
    score of the entry's `reports` (translation: chrF) instead of its main metric. Items are used when the entry
    records them for that metric, for every language of the headline, with the seeds of its scores."""
    weights = headline_weights(entry, headline)
    if headline in ("average", "target_average", "transfer_gap") and metric is None and headline in entry \
            and (entry[headline] or {}).get("mean") is None:
        weights = {}  # the entry records the headline as missing: so is the sample
    main = metric is None or metric == entry.get("metric")
    per_language = entry.get("per_language", {}) if main else {
        lang: report.get(metric) or {} for lang, report in entry.get("reports", {}).items()}
    per_seed = _per_seed(per_language, weights) if weights else []
    recorded = (entry.get("items") or {}).get(entry.get("metric") if main else metric) or {}
    by_language = recorded.get("per_language") or {}
    items = None
    n = len(per_seed)
    expected = list(entry.get("seeds") or [])[:n]
    # items only when every seed of the scores has its rows (a run recorded before rows were has none), in order
    if n and weights and all(lang in by_language and len(by_language[lang]["rows"]) >= n
                             and (not expected or list(by_language[lang]["seeds"])[:n] == expected)
                             for lang in weights):
        items = {lang: LanguageItems.of(recorded["kind"], by_language[lang]["rows"][:n]) for lang in weights}
    return Sample(tuple(v * scale for v in per_seed), items, weights, scale, seeded=True)


def retrieval_sample(entry: dict, layer: int) -> Sample:
    """A retrieval set's accuracy@1 (percent) at `layer`, averaged over its languages as the entry's "average"."""
    index = entry["layers"].index(layer)
    value = entry["average"][index]
    per_language = entry.get("per_language", {})
    weights = {lang: 1 / len(per_language) for lang in per_language}
    recorded = ((entry.get("items") or {}).get("per_language")) or {}
    items = None
    if weights and all(lang in recorded for lang in weights):
        items = {lang: LanguageItems.of("rank", [recorded[lang]["rows"][recorded[lang]["layers"].index(layer)]])
                 for lang in weights}
    binomial = math.nan
    pairs = {lang: (stat or {}).get("pairs") for lang, stat in per_language.items()}
    means = {lang: (stat or {}).get("mean") for lang, stat in per_language.items()}
    if weights and all(pairs.values()) and all(isinstance(m, list) for m in means.values()):
        # the mean of n languages' accuracies: Σ p(1 − p)/pairs / n², each language's p at this layer
        binomial = math.fsum(means[lang][index] * (1 - means[lang][index]) / pairs[lang] for lang in weights
                             if means[lang][index] is not None) * 100 ** 2 / len(weights) ** 2
    return Sample((math.nan if value is None else float(value) * 100,), items, weights, 100.0, seeded=False,
                  binomial_variance=binomial)


def alignment_sample(entry: dict, layer: int, test_aer: float) -> Sample:
    """An alignment set's test AER (percent) at `layer`, from its test pairs' counts where recorded."""
    recorded = entry.get("items") or {}
    items = None
    if recorded.get("rows") is not None and layer in recorded.get("layers", []):
        items = {"pairs": LanguageItems.of(recorded.get("kind", "aer"),
                                           [recorded["rows"][recorded["layers"].index(layer)]])}
    return Sample((test_aer * 100,), items, {"pairs": 1.0}, 100.0, seeded=False)
