"""Progress and an ETA for a whole `metaxlm run`, not only the current stage's bar.

The run is a plan of work units: the small stages (vocab, prepare, stats, report), each variant's remaining
pretraining steps, and each model to evaluate. Costs come from measurements: seconds per pretraining step of each
variant (a variant not yet measured is costed at the mean rate of those that are), seconds per evaluated model
(final models and intermediate checkpoints, which run fewer tasks, apart). Measurements are kept in
`<run>/timings.json`, so a resumed run (or a rerun with another setting) starts with the last run's rates. Only
work done in full by this process is a measurement: a stage whose output was reused, a variant already trained and
a model whose evaluation was (partly) stored before count as done but keep the earlier measurement (a resumed run
would otherwise cost every remaining model at the seconds a reuse took). Until something of a kind has been
measured, the ETA says so and is a lower bound.

A model's evaluation is costed by its parts (each fine-tuning task, retrieval set and alignment set it gets, from
`evaluation.recipe.planned_parts`): a part at the seconds it took that model before, else at the mean of the models
(of its kind: final or checkpoint) it was measured on; so VECO's translation tasks, which the other models do not
get, are priced as themselves and not at the other models' mean. A model with a part never measured is costed at
the model-level estimate, as before parts were measured.

The clock is an observer: the pipeline and its stages emit events (`StageFinished`, `VariantPretrained`,
`EvaluationPlanned`, `PartEvaluated`, `ModelEvaluated`) to a `RunEvents`, which passes each to its observers (the clock;
the record of the stage's time so far). After every stage, variant and evaluated model the clock prints one line such as

    run: pretrain 3/7 variants · evaluate 0/9 models · elapsed 0:21:10 · ETA whole run 0:48:20 (05:58 UTC)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from metaxlm.io import atomic_write_json

SMALL_STAGES = ("vocab", "prepare", "stats", "select", "report")


# -- the events a run emits -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StageFinished:
    name: str
    seconds: float
    reused: bool = False       # the stage reused its stored output: its seconds are no cost


@dataclass(frozen=True)
class VariantPretrained:
    name: str
    steps: int                 # trained by this process (0: the variant was already done)
    seconds: float


@dataclass(frozen=True)
class PartEvaluated:
    model: str
    part: str                  # "task-<name>", "matrix-<name>", "retrieval-<name>", "alignment-<name>"
    seconds: float
    measured: bool = True      # False when the model's evaluation reused stored parts


@dataclass(frozen=True)
class EvaluationPlanned:
    """The models the evaluate stage found (it forecasts none: pretraining has made them), with their parts."""
    models: dict[str, bool]            # name -> final model (else an intermediate checkpoint)
    parts: dict[str, list[str]]


@dataclass(frozen=True)
class ModelEvaluated:
    name: str
    seconds: float
    measured: bool = True


Event = StageFinished | VariantPretrained | EvaluationPlanned | PartEvaluated | ModelEvaluated


class RunObserver(Protocol):
    def notify(self, event: Event) -> None: ...


class RunEvents:
    """Where a run's stages report what they finished: each event goes to every observer, in order."""

    def __init__(self, observers: Iterable[RunObserver] = ()):
        self.observers = list(observers)

    def emit(self, event: Event) -> None:
        for observer in self.observers:
            observer.notify(event)


class AfterProgress:
    """An observer calling `callback` after each variant pretrained and each model evaluated (the run records its
    time so far there: what a SIGKILL leaves)."""

    def __init__(self, callback: Callable[[], None]):
        self.callback = callback

    def notify(self, event: Event) -> None:
        if isinstance(event, VariantPretrained | ModelEvaluated):
            self.callback()


def hms(seconds: float) -> str:
    """Seconds as H:MM:SS (a negative amount as 0:00:00)."""
    return str(timedelta(seconds=round(max(0.0, seconds))))


class RunClock:
    """Whole-run progress: `plan_*` say what is left, `done_*` record what was measured, `line()` summarizes."""

    def __init__(self, timings_path: Path, stages: list[str], *, printer=print):
        self.path = Path(timings_path)
        self.stages = list(stages)
        self.printer = printer
        self.start = time.perf_counter()
        self.timings = self._load()
        self.stages_done: set[str] = set()
        self.pretrain_left: dict[str, int] = {}     # variant -> steps still to train
        self.pretrain_total = 0
        self.eval_left: dict[str, bool] = {}        # model -> is a final model (else an intermediate checkpoint)
        self.eval_total = 0
        self.parts_left: dict[str, list[str]] = {}  # model -> the parts of its evaluation not done yet

    # -- the plan -----------------------------------------------------------------------------------------------
    def plan_pretraining(self, steps_left: dict[str, int]) -> None:
        self.pretrain_left = {name: steps for name, steps in steps_left.items() if steps > 0}
        self.pretrain_total = len(steps_left)

    def plan_evaluation(self, models: dict[str, bool], parts: dict[str, list[str]] | None = None) -> None:
        """`models`: name -> True for a final model, False for an intermediate checkpoint; `parts`: name -> the
        parts its evaluation computes (a model without them is costed as a whole)."""
        self.eval_left = dict(models)
        self.eval_total = len(models)
        self.parts_left = {name: list(p) for name, p in (parts or {}).items() if name in models}

    # -- events -------------------------------------------------------------------------------------------------
    def notify(self, event: Event) -> None:
        if isinstance(event, StageFinished):
            self.done_stage(event.name, event.seconds, measured=not event.reused)
        elif isinstance(event, VariantPretrained):
            self.done_variant(event.name, event.steps, event.seconds)
        elif isinstance(event, EvaluationPlanned):
            self.plan_evaluation(event.models, event.parts)
        elif isinstance(event, PartEvaluated):
            self.done_part(event.model, event.part, event.seconds, measured=event.measured)
        elif isinstance(event, ModelEvaluated):
            self.done_model(event.name, event.seconds, measured=event.measured)

    # -- measurements -------------------------------------------------------------------------------------------
    def done_stage(self, name: str, seconds: float, *, measured: bool = True) -> None:
        """`measured`: False when the stage reused its stored output (its seconds are no cost)."""
        self.stages_done.add(name)
        if name in SMALL_STAGES and measured:
            self.timings.setdefault("stages", {})[name] = round(seconds, 2)
            self._save()
        self.printer(self.line())

    def done_variant(self, name: str, steps: int, seconds: float) -> None:
        """`steps` trained in `seconds` by this process (0 when the variant was already done)."""
        self.pretrain_left.pop(name, None)
        if steps > 0:
            self.timings.setdefault("seconds_per_step", {})[name] = round(seconds / steps, 4)
            self._save()
        self.printer(self.line())

    def done_part(self, model: str, part: str, seconds: float, *, measured: bool = True) -> None:
        """One part of `model`'s evaluation finished (no line printed: the model's follows)."""
        left = self.parts_left.get(model)
        if left is not None and part in left:
            left.remove(part)
        if measured:
            kind = "final" if self.eval_left.get(model, True) else "checkpoint"
            self.timings.setdefault("seconds_per_part", {}).setdefault(kind, {}).setdefault(part, {})[model] = \
                round(seconds, 2)
            self._save()

    def done_model(self, name: str, seconds: float, *, measured: bool = True) -> None:
        """`measured`: False when the model's evaluation reused stored parts (its seconds are not its cost)."""
        final = self.eval_left.pop(name, True)
        self.parts_left.pop(name, None)
        if measured:
            self.timings.setdefault("seconds_per_model", {}).setdefault("final" if final else "checkpoint", {})[
                name] = round(seconds, 2)
            self._save()
        self.printer(self.line())

    # -- the estimate -------------------------------------------------------------------------------------------
    def remaining(self) -> tuple[float, list[str]]:
        """(estimated seconds left, what could not be costed yet)."""
        seconds, unknown = 0.0, []
        for stage in self.stages:
            if stage in SMALL_STAGES and stage not in self.stages_done:
                seconds += self.timings.get("stages", {}).get(stage, 0.0)
        rates = self.timings.get("seconds_per_step", {})
        mean_rate = sum(rates.values()) / len(rates) if rates else None
        for name, steps in self.pretrain_left.items():
            rate = rates.get(name, mean_rate)
            if rate is None:
                unknown.append("pretraining")
                break
            seconds += steps * rate
        per_model = self.timings.get("seconds_per_model", {})
        means = {kind: sum(v.values()) / len(v) for kind, v in per_model.items() if v}
        for name, final in self.eval_left.items():
            kind = "final" if final else "checkpoint"
            estimate = self._parts_estimate(name, kind)
            if estimate is None:
                known = per_model.get(kind, {}).get(name)
                estimate = known if known is not None else means.get(kind, means.get("final"))
            if estimate is None:
                unknown.append("evaluation")
                break
            seconds += estimate
        return seconds, unknown

    def _parts_estimate(self, model: str, kind: str) -> float | None:
        """The seconds of `model`'s parts still to do, each at its own measurement for this model or at the mean
        of the models measured on it; None when it has no parts planned or one was never measured."""
        parts = self.parts_left.get(model)
        if parts is None:
            return None
        measured = self.timings.get("seconds_per_part", {}).get(kind, {})
        total = 0.0
        for part in parts:
            by_model = measured.get(part) or {}
            if not by_model:
                return None
            total += by_model.get(model, sum(by_model.values()) / len(by_model))
        return total

    def line(self) -> str:
        elapsed = time.perf_counter() - self.start
        left, unknown = self.remaining()
        parts = []
        if self.pretrain_total:
            parts.append(f"pretrain {self.pretrain_total - len(self.pretrain_left)}/{self.pretrain_total} variants")
        if self.eval_total:
            parts.append(f"evaluate {self.eval_total - len(self.eval_left)}/{self.eval_total} models")
        finish = (datetime.now(UTC) + timedelta(seconds=left)).strftime("%H:%M UTC")
        if unknown and left < 1:
            eta = f"ETA whole run not known yet ({' and '.join(unknown)} not measured)"
        elif unknown:
            eta = f"ETA whole run > {hms(left)} ({' and '.join(unknown)} not measured yet)"
        else:
            eta = f"ETA whole run {hms(left)} ({finish})"
        return "run: " + " · ".join([*parts, f"elapsed {hms(elapsed)}", eta])

    # -- persistence ----------------------------------------------------------------------------------------------
    def _load(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}  # no earlier measurements (or an unreadable file: they are only estimates)
        return data if isinstance(data, dict) else {}

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path, self.timings)
