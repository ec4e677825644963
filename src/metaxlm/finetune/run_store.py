"""The finished fine-tuning runs of a task's scenario, and a task entry from them alone.

Each finished run (label, seed) is recorded as `<label>-seed<seed>.json` ({"key": what it was computed from,
"detail": its results and details}) in the run's own store (`<out>/<scenario>-runs/`, beside its checkpoints and
outputs) and in the archive (`evaluate.finished_runs/.../<scenario>-runs/`, results only), where a rerun on another
machine finds it: `RunStore`, which the training runner (metaxlm.finetune.runner) reuses runs from and records them
in. `RecordReader` replays a scenario's runs from such records without training (a `TaskRunner`), and
`recorded_task_entry` makes a task's entry of them: `metaxlm report --finished-runs`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from metaxlm.errors import DataError, MetaXLMError
from metaxlm.finetune.checkpoint import Checkpoints
from metaxlm.finetune.scenarios import SCENARIO_RUNS
from metaxlm.finetune.spec import TaskSpec
from metaxlm.finetune.summaries import entry_notes, task_entry
from metaxlm.finetune.task_data import TaskData, task_languages
from metaxlm.finetune.tasks import Task
from metaxlm.io import atomic_write_text, json_safe
from metaxlm.records import json_text


def run_name(label: str, seed: int) -> str:
    """The file name (without suffix) of the run of (label, seed): its record and its checkpoints."""
    return f"{label.replace(' ', '_').replace('/', '_')}-seed{seed}"


def record_name(label: str, seed: int) -> str:
    """The file name of the finished-run record of (label, seed), in a run's store and in an archive alike."""
    return f"{run_name(label, seed)}.json"


def read_record(path: Path) -> tuple[str, dict]:
    """(key, detail) of a finished-run record, or a DataError naming the file."""
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        key, detail = kept["key"], kept["detail"]
        dict(detail["scores"])
        int(detail["seed"])
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as err:
        raise DataError(path, None, f"not a finished-run record ({type(err).__name__}: {err})") from None
    return key, detail


def _record_text(key: str | None, detail: dict) -> str:
    return json_text(json_safe({"key": key, "detail": detail}))


class RunStore:
    """Where a scenario's runs are kept: `folder` (the run's own store: records, checkpoints, outputs, locks; None:
    none) and `archive` (records only; None: none). Records are written and reused only with a `key` (what the runs
    are computed from): a rerun with the same key reuses a finished run, so an interrupted task resumes after its
    last finished (language, seed)."""

    def __init__(self, folder: Path | None = None, key: str | None = None, archive: Path | None = None):
        self.folder, self.key, self.archive = folder, key, archive

    def files(self, label: str, seed: int) -> list[Path]:
        """Where a finished run is stored: the run's own store, then the archive (evaluate.finished_runs)."""
        if self.key is None:
            return []
        return [folder / record_name(label, seed) for folder in (self.folder, self.archive) if folder is not None]

    def checkpoints(self, label: str, seed: int) -> Checkpoints | None:
        """Where the run of (label, seed) keeps its checkpoints (beside its finished-run record); None when the
        store keeps no runs."""
        if self.folder is None or self.key is None:
            return None
        return Checkpoints(self.folder / f"{run_name(label, seed)}.ckpt", self.key)

    def reusable(self, label: str, seed: int, *, saving_models: bool) -> tuple[dict, Path] | None:
        """A stored run of (label, seed) computed from exactly this key (and with its saved model when models are
        saved), and the file it came from."""
        for path in self.files(label, seed):
            if not path.exists():
                continue
            key, detail = read_record(path)
            saved = detail.get("saved_model")
            if key == self.key and (not saving_models or (saved and Path(saved).exists())):
                return detail, path
        return None

    def keep(self, path: Path, detail: dict) -> None:
        """A run reused from the archive (`path`): the run's own store keeps it too."""
        if path.parent != self.folder and self.folder is not None:
            atomic_write_text(self.folder / path.name, _record_text(self.key, detail))

    def check_archive(self, label: str, seed: int) -> None:
        """Before training: the archive's record of (label, seed), when it has one, was computed from this key.
        A record of other task settings or model files (e.g. a pretraining redone on another CPU kind, which gives
        other bytes) is never replaced: the archive's records of one task must stay one series."""
        if self.archive is None or self.key is None:
            return
        path = self.archive / record_name(label, seed)
        if not path.exists() or (key := read_record(path)[0]) == self.key:
            return
        raise DataError(path, None, f"holds a finished run of other task settings or model files (key {key}; this "
                                    f"run's is {self.key}), which this run would replace: records of two "
                                    f"series are never mixed. Point evaluate.finished_runs at another directory "
                                    f"for this series, or remove the old records")

    def record(self, label: str, seed: int, detail: dict) -> None:
        """The finished run of (label, seed), in the run's own store and the archive."""
        for path in self.files(label, seed):
            atomic_write_text(path, _record_text(self.key, detail))


class RecordReader:
    """A runner that trains nothing (a TaskRunner): each (label, seed) run the scenario asks for is read from its
    finished-run record in `folder` (`evaluate.finished_runs`), or listed in `missing` (its scores NaN). The scenario
    functions decide which runs a task has, here as when it runs."""

    def __init__(self, spec: TaskSpec, folder: Path):
        self.spec, self.folder = spec, folder
        self.details: list[dict] = []
        self.missing: list[tuple[str, int]] = []
        self.first: tuple[str, Path] | None = None  # the first record's key and file: every other must have that key

    def new_task(self, train_items: list) -> Task:
        raise MetaXLMError(f"task {self.spec.name}: code-switched items need the model's tokenizer; its entry cannot "
                           "be assembled from finished-run records alone")

    def train_and_test(self, train_items: list, tests: dict[str, list], seed: int, label: str) -> dict[str, float]:
        path = self.folder / record_name(label, seed)
        if not path.exists():
            self.missing.append((label, seed))
            return {lang: math.nan for lang in tests}
        key, detail = read_record(path)
        scores = dict(detail["scores"])
        self.first = self.first or (key, path)
        if key != self.first[0]:  # runs of other settings or another model: never averaged together
            raise DataError(path, None, f"the finished runs of task {self.spec.name} were computed from different "
                                        f"task settings or model files (key {self.first[0]} in {self.first[1].name}, "
                                        f"{key} in {path.name}); keep the runs of one")
        self.details.append(detail)
        return scores


def recorded_task_entry(spec: TaskSpec, folder: str | Path, *, scenario: str, seeds: Sequence[int],
                        languages: Sequence[str] | None = None) -> dict:
    """A task's entry of the results schema from the finished-run records in `folder` (the task's
    `evaluate.finished_runs/<model>/<task>/` directory; its `<scenario>-runs/` files) — the runs `run_task` would
    make, those recorded so far. With runs missing, the entry's `to_come` lists them ("fr seed 0") and the averages
    over languages are left out (they would mix seeds); with none recorded, it has no scores.
    The records' key is not checked against a model (none is read), only that every record has the same one."""
    if scenario not in SCENARIO_RUNS:
        raise MetaXLMError(f"task {spec.name}: an entry from finished-run records covers the scenarios "
                           f"{', '.join(SCENARIO_RUNS)}, not {scenario}")
    seeds = list(seeds)
    langs = task_languages(spec, languages)
    notes = [spec.note] if spec.note else []
    reader = RecordReader(spec, Path(folder) / f"{scenario}-runs")
    runs = SCENARIO_RUNS[scenario](reader, TaskData(spec), langs, seeds, notes)
    runs = {lang: kept for lang, scores in runs.items() if (kept := [s for s in scores if not math.isnan(s)])}
    recorded = sorted({detail["seed"] for detail in reader.details})  # the seeds its cells average over
    entry = task_entry(spec, scenario, recorded, runs, reader.details)
    if reader.missing:
        for key in ("average", "target_average", "transfer_gap"):
            entry.pop(key, None)
        entry["to_come"] = [f"{label} seed {seed}" for label, seed in reader.missing]
    entry.update(entry_notes(spec, notes, reader.details, {}))  # no chance levels: they need the model's tokenizer
    return entry
