"""results.json as typed records, shared by its writers (the evaluation, `metaxlm finetune`) and its reader (the
report): a writer cannot write a file the report would reject, and the report names the file and the key that is
wrong instead of failing deep in a plot.

    {"model_name": "metaxlm@step200", "variant": "metaxlm", "step": 200, "model_dir": "...",
     "tasks": {"<task>": {"type": "classification", "metric": "accuracy", "scenario": "zero_shot", "source": "en",
         "seeds": [0, 1], "per_language": {"en": {"mean": 0.8, "std": 0.01, "runs": [0.79, 0.81]}, ...},
         "average": {"mean": .., "std": ..}, "target_average": {..}, "transfer_gap": {..}, "note": "free text",
         "report_hints": {..},  # how the report shows it, as the task type declares (finetune/tasks/base.py)
         "collapsed": {"de": [{"seed": 0, "trained_on": "en", "what": "predicts one class ('x') for 100% of
                                test items"}]},  # only runs whose model gives one answer to ~every item
         "to_come": ["fr seed 0"],  # assembled from finished-run records: the runs not finished yet
         "items": {"accuracy": {"kind": "mean", "per_language": {"en": {"seeds": [0, 1],
                                                                         "rows": [[[1], [0], ..], [[1], [1], ..]]}}}}}},
     "transfer_matrix": {"<task>": {"languages": ["en", "de"], "scores": [[..], [..]]}},  # rows source, cols target
     "retrieval": {"<set>": {"layers": [0, 1, ..], "average": [..],
                             "per_language": {"de": {"src2tgt": [..], "tgt2src": [..], "mean": [..]}},
                             "items": {"kind": "rank", "per_language": {"de": {"layers": [0, 1, ..],
                                                                               "rows": [[[1, 3], [1, 1], ..], ..]}}}}},
     "alignment": {"<set>": {"method": "ot", "pairs": 508, "settings": {..}, "layers": [..],
                             "split": {"dev_fraction": 0.3, "dev_pairs": 153, "test_pairs": 355},
                             "dev": {"aer": [..], "precision": [..], "recall": [..], "f1": [..]},  # per layer
                             "test": {"aer": [..], "precision": [..], "recall": [..], "f1": [..]},
                             "chosen_layer": 7, "chosen_on": "dev",
                             "items": {"kind": "aer", "layers": [..], "rows": [[[3, 4, 5, 4], ..], ..]}}}}

`items` are the per-item outcomes the report's paired bootstrap resamples: one row of numbers per test item, whose
column sums give the score (metaxlm.metrics: ITEM_KINDS, metric_from_sums). A task's are per metric name (its `metric`,
and translation's "bleu" and "chrf"), per language the rows of each fine-tuning seed (`seeds` says whose), the items in
the test set's order; a probe's are per layer: each pair's [rank src→tgt, rank tgt→src] (1: retrieved first) for
retrieval, each test pair's [|A∩S|, |A∩P|, |A|, |S|] for alignment. Files written before them have none.

Every key but model_name is optional, and records keep keys they do not name (a task type's own scores, settings);
numbers may be null (the evaluation writes NaN, e.g. a language without data, as null). Alignment results written
before the dev/test split have the whole set's "aer", "precision", ... at the top level and no "test".
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationError,
    model_validator,
)

from metaxlm.config import validation_problems
from metaxlm.errors import DataError
from metaxlm.io import atomic_write_text, json_safe

RESULTS_FILE = "results.json"  # <run>/eval/<model>/results.json; `metaxlm finetune`: <out>/results.json
# A task entry's `report_hints` (declared by its task type, metaxlm.finetune.tasks.base.Task): `percent`: the scores
# already are percent; `scores`: further scores curves and headline columns show, `names` to print them;
# `directional`: one result per translation direction. These are the defaults a type changes.
DEFAULT_REPORT_HINTS: dict[str, Any] = {"percent": False, "scores": [], "names": {}, "directional": False}
CHOSEN_ON_DEV, FIXED_DEFAULT = "dev", "fixed default"


def _number(value: Any) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ValueError("expected a number or null")
    return value


Number = Annotated[float | None, BeforeValidator(_number)]


class Record(BaseModel):
    model_config = ConfigDict(extra="allow")


class Stat(Record):
    mean: Number
    std: Number = None
    runs: list[Number] | None = None


# Per-item outcomes ("items"): one row of numbers per test item, whose column sums give the metric
# (metaxlm.metrics.ITEM_KINDS, metric_from_sums): what the report's paired bootstrap resamples.
Rows = Annotated[list[list[StrictFloat]], Field(min_length=1)]


def _check_rows(kind: str, rows: list[list[float]], where: str) -> None:
    """`rows` are one test set's item rows of `kind`: each as long as every other, and as the kind's rows are."""
    from metaxlm.metrics import ITEM_KINDS, item_statistics  # imports torch: only for a file that has items

    if kind not in ITEM_KINDS:
        raise ValueError(f"kind: unknown item kind {kind!r} (kinds: {', '.join(ITEM_KINDS)})")
    if len(widths := {len(row) for row in rows}) > 1:
        raise ValueError(f"{where}: rows of {' and '.join(map(str, sorted(widths)))} numbers (one row per test item, "
                         f"each as long)")
    try:
        item_statistics(kind, rows)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


class SeedItems(Record):
    seeds: list[StrictInt]
    rows: list[Rows]  # per seed (in the order of `seeds`), the rows of the test items (the test set's order)

    @model_validator(mode="after")
    def _one_test_set(self) -> SeedItems:
        if len(self.rows) != len(self.seeds):
            raise ValueError(f"rows: {len(self.rows)} lists of rows for {len(self.seeds)} seeds")
        if len(sizes := {len(rows) for rows in self.rows}) > 1:
            raise ValueError(f"rows: the seeds have {' and '.join(map(str, sorted(sizes)))} test items, not the same "
                             f"items")
        return self


class TaskItems(Record):
    kind: str
    per_language: dict[str, SeedItems]

    @model_validator(mode="after")
    def _kind_rows(self) -> TaskItems:
        for lang, items in self.per_language.items():
            for k, rows in enumerate(items.rows):
                _check_rows(self.kind, rows, f"per_language.{lang}.rows[{k}]")
        return self


class TaskResult(Record):
    type: str | None = None
    metric: str | None = None
    per_language: dict[str, Stat]
    average: Stat | None = None
    target_average: Stat | None = None
    transfer_gap: Stat | None = None
    to_come: list[str] | None = None  # a comparison under way (report --finished-runs): its runs not finished yet
    items: dict[str, TaskItems] | None = None  # per metric name: each test item's outcome per seed

    @model_validator(mode="after")
    def _items_of_the_scores(self) -> TaskResult:
        if self.items is None:
            return self
        if self.metric is not None and self.metric not in self.items:
            raise ValueError(f"items: no rows of the task's metric {self.metric!r} (has {', '.join(self.items)})")
        for name, items in self.items.items():
            if unscored := sorted(set(items.per_language) - set(self.per_language)):
                raise ValueError(f"items.{name}: rows for {', '.join(unscored)}, which per_language has no score of")
        return self


class MatrixResult(Record):
    languages: list[str]
    scores: list[list[Number]]

    @model_validator(mode="after")
    def _square(self) -> MatrixResult:
        n = len(self.languages)
        if len(self.scores) != n:
            raise ValueError(f"scores: expected {n} rows (one per source language)")
        for i, row in enumerate(self.scores):
            if len(row) != n:
                raise ValueError(f"scores[{i}]: expected {n} columns (one per target language)")
        return self


Layers = Annotated[list[StrictInt], Field(min_length=1)]


def _per_layer(values: list | None, n: int, where: str) -> None:
    if values is not None and len(values) != n:
        raise ValueError(f"{where}: has {len(values)} values for {n} layers")


class LayerItems(Record):
    layers: Layers
    rows: list[Rows]  # per layer, the rows of the test pairs (the set's order)

    @model_validator(mode="after")
    def _one_test_set(self) -> LayerItems:
        _per_layer(self.rows, len(self.layers), "rows")
        if len(sizes := {len(rows) for rows in self.rows}) > 1:
            raise ValueError(f"rows: the layers have {' and '.join(map(str, sorted(sizes)))} pairs, not the same pairs")
        for k, rows in enumerate(self.rows):
            _check_rows(self.kind, rows, f"rows[{k}]")
        return self


class RetrievalLanguageItems(LayerItems):
    kind: ClassVar[str] = "rank"  # the kind of the set's `items`, which the rows are checked as


class RetrievalItems(Record):
    kind: Literal["rank"]
    per_language: dict[str, RetrievalLanguageItems]


class RetrievalResult(Record):
    layers: Layers
    average: list[Number]  # with a dev/test split (chosen_layer given): the test part's
    dev_average: list[Number] | None = None
    chosen_layer: StrictInt | None = None  # None: written before the dev/test split
    chosen_on: str | None = None
    items: RetrievalItems | None = None  # per language, each (test) pair's ranks at each layer

    @model_validator(mode="after")
    def _per_layer(self) -> RetrievalResult:
        _per_layer(self.average, len(self.layers), "average")
        _per_layer(self.dev_average, len(self.layers), "dev_average")
        for lang, items in (self.items.per_language if self.items is not None else {}).items():
            if items.layers != self.layers:
                raise ValueError(f"items.per_language.{lang}.layers: {items.layers}, "
                                 f"not the set's layers {self.layers}")
        if self.chosen_layer is None:
            return self
        if self.chosen_layer not in self.layers:
            raise ValueError(f"chosen_layer: expected one of the layers {self.layers}")
        if self.chosen_on not in (CHOSEN_ON_DEV, FIXED_DEFAULT):
            raise ValueError(f"chosen_on: expected {CHOSEN_ON_DEV!r} or {FIXED_DEFAULT!r}")
        if self.chosen_on == CHOSEN_ON_DEV and self.dev_average is None:
            raise ValueError("dev_average: a layer chosen on dev needs the dev scores")
        return self


class AlignmentScores(Record):
    aer: list[Number]
    precision: list[Number] | None = None
    recall: list[Number] | None = None
    f1: list[Number] | None = None

    def check_layers(self, n: int, where: str) -> None:
        for key in ("aer", "precision", "recall", "f1"):
            _per_layer(getattr(self, key), n, f"{where}{key}")


class AlignmentItems(LayerItems):
    kind: Literal["aer"]


class AlignmentResult(Record):
    layers: Layers
    test: AlignmentScores | None = None  # None: written before the dev/test split (scores at the top level)
    dev: AlignmentScores | None = None
    chosen_layer: StrictInt | None = None
    chosen_on: str | None = None
    items: AlignmentItems | None = None  # each test pair's counts at each layer

    @model_validator(mode="after")
    def _consistent(self) -> AlignmentResult:
        n = len(self.layers)
        if self.items is not None:
            if self.items.layers != self.layers:
                raise ValueError(f"items.layers: {self.items.layers}, not the set's layers {self.layers}")
            tested = ((self.model_extra or {}).get("split") or {}).get("test_pairs")
            if isinstance(tested, int) and len(self.items.rows[0]) != tested:
                raise ValueError(f"items.rows: {len(self.items.rows[0])} pairs per layer, but the test part has "
                                 f"{tested} (split.test_pairs)")
        if self.test is None:
            try:
                AlignmentScores.model_validate(self.model_extra or {}).check_layers(n, "")
            except ValidationError as err:
                raise ValueError("; ".join(validation_problems(err))) from None
            return self
        self.test.check_layers(n, "test.")
        if self.dev is not None:
            self.dev.check_layers(n, "dev.")
        if self.chosen_layer not in self.layers:
            raise ValueError(f"chosen_layer: expected one of the layers {self.layers}")
        if self.chosen_on not in (CHOSEN_ON_DEV, FIXED_DEFAULT):
            raise ValueError(f"chosen_on: expected {CHOSEN_ON_DEV!r} or {FIXED_DEFAULT!r}")
        if self.chosen_on == CHOSEN_ON_DEV and self.dev is None:
            raise ValueError("dev: a layer chosen on dev needs the dev scores")
        return self


class Results(Record):
    """One model's results.json."""

    model_name: Annotated[str, Field(min_length=1)]
    variant: str | None = None
    step: StrictInt | None = None
    tasks: dict[str, TaskResult] = Field(default_factory=dict)
    transfer_matrix: dict[str, MatrixResult] = Field(default_factory=dict)
    retrieval: dict[str, RetrievalResult] = Field(default_factory=dict)
    alignment: dict[str, AlignmentResult] = Field(default_factory=dict)


def check_results(data: Any, path: Path) -> dict:
    """`data` (a results.json's content) checked against the records: a DataError naming the file and each wrong key."""
    try:
        Results.model_validate(data)
    except ValidationError as err:
        raise DataError(path, None, "; ".join(validation_problems(err))) from None
    return data


def _item_rows(value: Any) -> bool:
    """`value` is a list of item rows (lists of numbers): one seed's or one layer's."""
    return isinstance(value, list) and bool(value) and all(
        isinstance(row, list) and all(isinstance(x, int | float) and not isinstance(x, bool) for x in row)
        for row in value)


def json_text(obj: Any) -> str:
    """`obj` as the JSON text `atomic_write_json` writes (indented by 2), except that under an "items" key each list of
    item rows (one seed's, one layer's) is one line: indented, every number would take a line of its own, which makes
    the items of a demo-size results.json 0.5 MB instead of 65 KB. For results.json and every file that keeps items
    (finished-run records, the evaluation's parts)."""
    compact: list[str] = []
    token = uuid.uuid4().hex  # the placeholders' own: no string of `obj` is one

    def marked(value: Any, inside: bool) -> Any:
        if isinstance(value, dict):
            return {k: marked(v, inside or k == "items") for k, v in value.items()}
        if isinstance(value, list):
            if inside and _item_rows(value):
                compact.append(json.dumps(value, separators=(",", ":")))
                return f"{token}:{len(compact) - 1}"
            return [marked(v, inside) for v in value]
        return value

    text = json.dumps(marked(obj, False), indent=2, ensure_ascii=False)
    return re.sub(f'"{token}:(\\d+)"', lambda m: compact[int(m[1])], text) + "\n"


def write_results(path: Path, results: dict) -> Path:
    """Write a results.json (NaN as null), checked first: a writer's mistake fails here, not in the report."""
    # when it was written, inside the file: a report made from a copy (a clone, docs/results/) shows the evaluation's
    # time, not the copy's
    data = json_safe({**results, "written": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")})
    check_results(data, path)
    atomic_write_text(path, json_text(data))
    return path
