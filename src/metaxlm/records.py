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
         "to_come": ["fr seed 0"]}},  # assembled from finished-run records: the runs not finished yet
     "transfer_matrix": {"<task>": {"languages": ["en", "de"], "scores": [[..], [..]]}},  # rows source, cols target
     "retrieval": {"<set>": {"layers": [0, 1, ..], "average": [..],
                             "per_language": {"de": {"src2tgt": [..], "tgt2src": [..], "mean": [..]}}}},
     "alignment": {"<set>": {"method": "ot", "pairs": 508, "settings": {..}, "layers": [..],
                             "split": {"dev_fraction": 0.3, "dev_pairs": 153, "test_pairs": 355},
                             "dev": {"aer": [..], "precision": [..], "recall": [..], "f1": [..]},  # per layer
                             "test": {"aer": [..], "precision": [..], "recall": [..], "f1": [..]},
                             "chosen_layer": 7, "chosen_on": "dev"}}}

Every key but model_name is optional, and records keep keys they do not name (a task type's own scores, settings);
numbers may be null (the evaluation writes NaN, e.g. a language without data, as null). Alignment results written
before the dev/test split have the whole set's "aer", "precision", ... at the top level and no "test".
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    model_validator,
)

from metaxlm.config import validation_problems
from metaxlm.errors import DataError
from metaxlm.io import atomic_write_json, json_safe

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


class TaskResult(Record):
    type: str | None = None
    metric: str | None = None
    per_language: dict[str, Stat]
    average: Stat | None = None
    target_average: Stat | None = None
    transfer_gap: Stat | None = None
    to_come: list[str] | None = None  # a comparison under way (report --finished-runs): its runs not finished yet


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


class RetrievalResult(Record):
    layers: Layers
    average: list[Number]

    @model_validator(mode="after")
    def _per_layer(self) -> RetrievalResult:
        _per_layer(self.average, len(self.layers), "average")
        return self


class AlignmentScores(Record):
    aer: list[Number]
    precision: list[Number] | None = None
    recall: list[Number] | None = None
    f1: list[Number] | None = None

    def check_layers(self, n: int, where: str) -> None:
        for key in ("aer", "precision", "recall", "f1"):
            _per_layer(getattr(self, key), n, f"{where}{key}")


class AlignmentResult(Record):
    layers: Layers
    test: AlignmentScores | None = None  # None: written before the dev/test split (scores at the top level)
    dev: AlignmentScores | None = None
    chosen_layer: StrictInt | None = None
    chosen_on: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> AlignmentResult:
        n = len(self.layers)
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


def write_results(path: Path, results: dict) -> Path:
    """Write a results.json (NaN as null), checked first: a writer's mistake fails here, not in the report."""
    # when it was written, inside the file: a report made from a copy (a clone, docs/results/) shows the evaluation's
    # time, not the copy's
    data = json_safe({**results, "written": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")})
    check_results(data, path)
    atomic_write_json(path, data)
    return path
