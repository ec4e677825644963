"""Read and check `<run>/eval/<model>/results.json` files (their records: metaxlm.records).

A bad file stops the report with an error naming it (and the key that is wrong), rather than a KeyError deep in
a plot. Numbers may be null: the evaluation writes NaN (e.g. a language without data) as null.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml
from pydantic import ValidationError

from metaxlm.config import ReportConfig, read_yaml, validation_problems
from metaxlm.errors import DataError, MetaXLMError
from metaxlm.metrics import highest_accuracy_layer, lowest_aer_layer
from metaxlm.records import RESULTS_FILE, check_results
from metaxlm.run.layout import RunDir


@dataclass
class ModelResult:
    name: str            # unique across the report (prefixed with the run dir name when two runs collide)
    variant: str         # pretraining variant; the model name for models outside any variant
    step: int | None     # pretraining step, when known
    data: dict
    path: Path

    @property
    def run(self) -> Path:
        return self.path.parents[2]  # <run>/eval/<model>/results.json

    @property
    def own_variant(self) -> str:
        """The variant as its run calls it (`variant` may carry the run's name as a prefix)."""
        return self.data.get("variant") or self.data["model_name"]

    @property
    def modified(self) -> str:
        """When the results were written: as the file records it (records.write_results), else its mtime."""
        return self.data.get("written") or datetime.fromtimestamp(self.path.stat().st_mtime, UTC).strftime(
            "%Y-%m-%d %H:%M:%S UTC")


def number(value) -> float:
    """A score as float, NaN for null (so missing values drop out of plots and show as "–")."""
    return math.nan if value is None else float(value)


ALIGNMENT_METRICS = ("aer", "precision", "recall", "f1")
NO_DEV_SPLIT = "no dev split"


@dataclass(frozen=True)
class AlignmentResult:
    """One alignment set of a results.json as every section of the report shows it: the scores of its test part
    per layer and the reported layer, which was chosen on its dev part (`chosen_on` "dev"), is the aligner's
    fixed default (no dev part) or, in results written before the dev/test split (`NO_DEV_SPLIT`), is the lowest
    AER over the very sentences scored: those scores are not test scores, and the report says so."""

    layers: list[int]
    test: dict[str, list[float]]       # ALIGNMENT_METRICS per layer, fractions, NaN for null
    dev: dict[str, list[float]] | None
    layer: int | None                  # the reported layer (None: no AER at any layer)
    chosen_on: str                     # CHOSEN_ON_DEV, FIXED_DEFAULT or NO_DEV_SPLIT
    dev_pairs: int | None = None
    test_pairs: int | None = None

    @classmethod
    def of(cls, entry: dict) -> AlignmentResult:
        def curves(scores: dict) -> dict[str, list[float]]:
            return {k: [number(v) for v in scores[k]] for k in ALIGNMENT_METRICS if k in scores}

        layers = list(entry["layers"])
        if "test" not in entry:  # written before the split: one set of scores, the layer picked on them
            test = curves(entry)
            return cls(layers, test, None, lowest_aer_layer(layers, test["aer"]), NO_DEV_SPLIT, None,
                       entry.get("pairs"))
        split = entry.get("split") or {}
        return cls(layers, curves(entry["test"]), curves(entry["dev"]) if entry.get("dev") else None,
                   entry["chosen_layer"], entry["chosen_on"], split.get("dev_pairs"), split.get("test_pairs"))

    @property
    def is_test(self) -> bool:
        """Whether `test` holds scores on sentences the layer was not chosen on."""
        return self.chosen_on != NO_DEV_SPLIT

    def at_layer(self, metric: str, part: str = "test") -> float:
        """A metric (fraction) at the reported layer, on the test (or dev) part; NaN when missing."""
        scores = self.test if part == "test" else self.dev or {}
        if self.layer is None or metric not in scores:
            return math.nan
        return scores[metric][self.layers.index(self.layer)]


@dataclass(frozen=True)
class RetrievalResult:
    """One retrieval set of a results.json as every section of the report shows it: accuracy@1 (fraction, mean of
    both directions and of the languages) on its test part per layer, and the reported layer, chosen on its dev
    part (`chosen_on` "dev"), the last layer (no dev part: "fixed default") or, in results written before the
    dev/test split (`NO_DEV_SPLIT`), the best layer on the very pairs scored: those are not test scores, and the
    report says so."""

    layers: list[int]
    test: list[float]                  # accuracy@1 per layer, NaN for null
    dev: list[float] | None
    layer: int | None                  # the reported layer (None: no score at any layer)
    chosen_on: str                     # CHOSEN_ON_DEV, FIXED_DEFAULT or NO_DEV_SPLIT
    dev_pairs: int | None = None       # over the languages
    test_pairs: int | None = None

    @classmethod
    def of(cls, entry: dict) -> RetrievalResult:
        layers = list(entry["layers"])
        test = [number(v) for v in entry["average"]]
        if entry.get("chosen_layer") is None:  # written before the split: the layer picked on the scores shown
            return cls(layers, test, None, highest_accuracy_layer(layers, test), NO_DEV_SPLIT)
        split = entry.get("split") or {}
        return cls(layers, test, [number(v) for v in entry["dev_average"]] if entry.get("dev_average") else None,
                   entry["chosen_layer"], entry["chosen_on"], sum((split.get("dev_pairs") or {}).values()),
                   sum((split.get("test_pairs") or {}).values()))

    @property
    def is_test(self) -> bool:
        """Whether `test` holds scores on pairs the layer was not chosen on."""
        return self.chosen_on != NO_DEV_SPLIT

    def at_layer(self, part: str = "test") -> float:
        """accuracy@1 (fraction) at the reported layer on the test (or dev) part; NaN when missing."""
        scores = self.test if part == "test" else self.dev
        if self.layer is None or scores is None:
            return math.nan
        return scores[self.layers.index(self.layer)]


def load_results(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(path, err.lineno, f"not valid JSON: {err.msg}") from None
    except UnicodeDecodeError:
        raise DataError(path, None, "not UTF-8 text") from None
    return check_results(data, path)


def run_variants(run_dir: Path) -> dict[str, dict]:
    """The variants section of a run's resolved config.yaml, {name: settings} ({} without a readable one)."""
    try:
        variants = read_yaml(RunDir(run_dir).config.read_text(encoding="utf-8")).get("variants")
    except (OSError, yaml.YAMLError, AttributeError):
        return {}  # only used for ordering and budgets: without a readable config, neither is known
    if isinstance(variants, list):
        return {name: {} for name in variants if isinstance(name, str)}
    return {k: v if isinstance(v, dict) else {} for k, v in variants.items()} if isinstance(variants, dict) else {}


def run_languages(run_dir: Path) -> list[str]:
    """The data.languages of a run's resolved config.yaml, in its order ([] without a readable one)."""
    try:
        languages = (read_yaml(RunDir(run_dir).config.read_text(encoding="utf-8")).get("data") or {}).get("languages")
    except (OSError, yaml.YAMLError, AttributeError):
        return []  # only used for ordering: without a readable config, the order is the languages' own
    return [lang for lang in languages if isinstance(lang, str)] if isinstance(languages, list) else []


def variant_order(run_dir: Path) -> list[str]:
    """The run config's variant order (xlm, metaxlm, metaxlm_dict), so tables list models as the paper does."""
    return list(run_variants(run_dir))


def report_config(run_dir: Path) -> ReportConfig:
    """The `report:` section of a run's resolved config.yaml (comparison control, findings roles); the defaults
    (no comparison, no findings) when the run has no config (e.g. results written by `metaxlm finetune`)."""
    path = RunDir(run_dir).config
    if not path.exists():
        return ReportConfig()
    try:
        tree = read_yaml(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as err:
        raise DataError(path, None, f"cannot read the run's config: {err}") from None
    section = tree.get("report") if isinstance(tree, dict) else None
    try:
        return ReportConfig.model_validate(section or {})
    except ValidationError as err:
        raise DataError(path, None, f"report section: {'; '.join(validation_problems(err, 'report'))}") from None


def collect_results(run_dirs: list[Path]) -> list[ModelResult]:
    """Every `<run>/eval/*/results.json`, ordered by run, then variant (config order), then step."""
    found = []
    for index, run in enumerate(run_dirs):
        if not run.is_dir():
            raise MetaXLMError(f"{run}: no such run directory")
        order = variant_order(run)
        for path in sorted(RunDir(run).eval.glob(f"*/{RESULTS_FILE}")):
            data = load_results(path)
            variant = data.get("variant") or data["model_name"]
            rank = order.index(variant) if variant in order else len(order)
            step = data.get("step")
            found.append(((index, rank, variant, step is None, step or 0), run, path, data))
    found.sort(key=lambda item: item[0])
    counts = Counter(data["model_name"] for _, _, _, data in found)
    results, seen = [], {}
    for _, run, path, data in found:
        name, variant = data["model_name"], data.get("variant") or data["model_name"]
        if counts[name] > 1:  # the same model in two runs: the run directory's name tells them apart
            name, variant = f"{run.name}/{name}", f"{run.name}/{variant}"
        if name in seen:
            raise MetaXLMError(f"two results for model {name!r}: {seen[name]} and {path}")
        seen[name] = path
        results.append(ModelResult(name, variant, data.get("step"), data, path))
    return results


def final_models(results: list[ModelResult]) -> list[ModelResult]:
    """One result per variant, its final model: the one without a step (the recipe gives steps only to
    intermediate checkpoints when the final step is unknown), else the latest step."""
    final: dict[str, ModelResult] = {}
    for r in results:
        best = final.get(r.variant)
        if best is None or (best.step is not None and (r.step is None or r.step > best.step)):
            final[r.variant] = r
    return [r for r in results if r.step == final[r.variant].step]
