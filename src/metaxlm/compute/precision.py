"""The precision that fits the machine: `auto` (the default everywhere) picks bf16 only where it is clearly faster,
and decides ONCE: per process, per run, per machine.

bf16 autocast is not a speed-up on every CPU (the ratios measured on the project's machines, from far slower to
several times faster, are in docs/scale-out.md "Precision: one decision per run"). So `auto` measures:

* CPU: bf16 and fp32 matmuls at FIXED shapes (`DECISION_SHAPES`, a transformer-base feed-forward at 512 rows, not the
  model's: a decision per shape made one process run one batching in bf16 and the next in fp32), the two dtypes
  alternated round by round and the BEST of at least `MIN_ROUNDS` rounds kept (load from other processes slows rounds,
  it cannot speed one up), on the process's torch thread count. bf16 is chosen only when it is at least
  `BF16_MIN_SPEEDUP` (1.5x) faster: a wide margin, so a busy machine does not flip the choice (measured:
  docs/scale-out.md "Precision"). A cheap probe first (`PROBE_SHAPES`): a CPU where bf16 is far slower there
  (under `PROBE_CLEARLY_SLOWER`) is decided without the full measurement, which would take seconds on it.
* CUDA: bf16 where the GPU supports it, else fp32 (no measurement).
* Explicit `bf16` / `fp32` are taken as given; `fp16` is GPU-only (CPU autocast has no fp16 loss scaling): an error.

Once decided: the first `auto` decision of a process is its only one (`_decided`: a second call never decides
otherwise, whatever the model or the load); the measurement is cached across processes in a small JSON file keyed by
CPU model, its bf16 flags, torch version and thread count (`$METAXLM_PRECISION_CACHE`, default
`~/.cache/metaxlm/precision.json`; `off` to measure every time), except a measurement during which the process got
less than `BUSY_CPU_SHARE` of its threads' CPU time (it decides for this process only). `$METAXLM_PRECISION_AUTO`
(bf16 / fp32), when set, IS the decision: a run sets it for the processes it starts, a user for a whole job. A run
(`metaxlm run` and the stage commands) decides at its first invocation and records the decision in run_info.json
(`run_precision`); every later invocation — a resumed run, on this machine or another — keeps it. Several processes
of one run (DDP) train in rank 0's decision (broadcast).

Every resolution reports why: `PrecisionChoice.reason` names the measured GFLOP/s of each dtype, and the first
`auto` choice of a process is printed to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch

from metaxlm.compute.devices import SIMULATED, compute_device, simulating
from metaxlm.config import PRECISIONS
from metaxlm.errors import ConfigError
from metaxlm.run.info import cpu_bf16_flags, cpu_model

BF16_MIN_SPEEDUP = 1.5  # bf16 matmuls must beat fp32 by this factor for `auto` to pick bf16 on a CPU
PROBE_CLEARLY_SLOWER = 0.5  # bf16 under this fraction of fp32 at the probe: fp32 without the full measurement
MEASURE_BUDGET_S = 0.3  # time spent timing (after one warm-up round); at least MIN_ROUNDS rounds
MIN_ROUNDS = 5
MAX_ROUNDS = 50
BUSY_CPU_SHARE = 0.5    # a measurement that got less of its threads' CPU than this is not cached (a loaded machine)
AUTO_ENV = "METAXLM_PRECISION_AUTO"  # bf16 / fp32: the `auto` decision given (a run's, for its processes)
Shape = tuple[int, int, int]  # (m, k, n): an (m×k) @ (k×n) matmul

_AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}
_process_cache: dict[str, tuple[dict[str, float], str]] = {}  # key -> (GFLOP/s per dtype, when measured)
_decided: dict[str, PrecisionChoice] = {}  # device type -> this process's `auto` decision (its only one)
# (value `run_precision` set $METAXLM_PRECISION_AUTO to, value before)
_set_by_a_run: tuple[str, str | None] | None = None
_announced: set[str] = set()


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a run trains or infers in, and why."""

    precision: Literal["bf16", "fp16", "fp32"]
    requested: str
    device: str                 # "cpu" or "cuda"
    reason: str
    gflops: dict[str, float] | None = None  # measured matmul GFLOP/s per dtype ("bf16", "fp32"), CPU auto only
    source: Literal["config", "measured", "cached", "gpu", "rank0", "run"] = "config"

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """The autocast dtype, None for fp32 (no autocast)."""
        return _AUTOCAST_DTYPES[self.precision]

    def autocast(self, device_type: str | None = None):
        """A torch.autocast context for this precision (none for fp32: torch.autocast knows no simulated device)."""
        dtype = self.autocast_dtype
        return nullcontext() if dtype is None else torch.autocast(device_type or self.device, dtype=dtype)

    @property
    def mixed_precision(self) -> str:
        """accelerate's name for it (`Accelerator(mixed_precision=...)`)."""
        return {"fp32": "no"}.get(self.precision, self.precision)

    def record(self) -> dict:
        """Flat fields for a metrics log (JSONL / TensorBoard)."""
        out = {"precision": self.precision, "precision_requested": self.requested, "precision_reason": self.reason}
        for dtype, rate in (self.gflops or {}).items():
            out[f"matmul_gflop_s/{dtype}"] = rate
        return out


# -- the measurement ---------------------------------------------------------------------------------------
# the shapes `auto` decides at, whatever the model: a transformer-base feed-forward (768 → 3072 → 768) at 512 rows
# and its weight gradient; the probe: one small-model feed-forward matmul
DECISION_SHAPES: list[Shape] = [(512, 768, 3072), (512, 3072, 768), (3072, 512, 768)]
PROBE_SHAPES: list[Shape] = [(256, 384, 1536)]


def measure_matmul_gflops(shapes: Sequence[Shape], dtypes: Sequence[str] = ("bf16", "fp32"), *,
                          budget_s: float = MEASURE_BUDGET_S, min_rounds: int = MIN_ROUNDS,
                          max_rounds: int = MAX_ROUNDS) -> dict[str, float]:
    """GFLOP/s of each dtype over `shapes` (all shapes once per round; best round of each dtype). The dtypes
    alternate round by round, so load from other processes disturbs both alike; at least `min_rounds` rounds and
    until `budget_s` has passed (at most `max_rounds`)."""
    gen = torch.Generator().manual_seed(0)
    operands = {d: [(torch.randn(m, k, generator=gen).to(_AUTOCAST_DTYPES[d] or torch.float32),
                     torch.randn(k, n, generator=gen).to(_AUTOCAST_DTYPES[d] or torch.float32)) for m, k, n in shapes]
                for d in dtypes}
    flops = sum(2 * m * k * n for m, k, n in shapes)

    def one_round(d: str) -> float:
        t = time.perf_counter()
        for a, b in operands[d]:
            torch.mm(a, b)
        return time.perf_counter() - t

    with torch.inference_mode():
        for d in dtypes:  # warm-up: kernel selection, page faults, caches
            one_round(d)
        best = {d: float("inf") for d in dtypes}
        start, rounds = time.perf_counter(), 0
        while rounds < min_rounds or (time.perf_counter() - start < budget_s and rounds < max_rounds):
            for d in dtypes:
                best[d] = min(best[d], one_round(d))
            rounds += 1
    return {d: flops / best[d] / 1e9 for d in dtypes}


def _cache_file() -> Path | None:
    env = os.environ.get("METAXLM_PRECISION_CACHE")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else Path(env)
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "metaxlm" / "precision.json"


def _cache_key(threads: int) -> str:
    flags = ",".join(cpu_bf16_flags()) or "no bf16 flags"
    return f"{cpu_model()} [{flags}] | torch {torch.__version__} | {threads} threads | " + \
        " ".join("x".join(map(str, s)) for s in DECISION_SHAPES)


def _read_cache(path: Path | None, key: str) -> tuple[dict[str, float], str] | None:
    if path is None:
        return None
    try:
        entry = json.loads(path.read_text(encoding="utf-8")).get(key)
        rates = entry.get("gflops") if isinstance(entry, dict) else None
        if isinstance(rates, dict) and all(isinstance(rates.get(d), int | float) and rates[d] > 0
                                           for d in ("bf16", "fp32")):
            return {"bf16": float(rates["bf16"]), "fp32": float(rates["fp32"])}, str(entry.get("measured", "?"))
    except (OSError, ValueError, AttributeError):
        pass  # no cache, unreadable or damaged: measure again
    return None


def _write_cache(path: Path | None, key: str, rates: dict[str, float], when: str) -> None:
    if path is None:
        return
    from metaxlm.io import atomic_write_json

    try:
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
            entries = entries if isinstance(entries, dict) else {}
        except (OSError, ValueError):
            entries = {}
        entries[key] = {"gflops": rates, "measured": when}
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, entries)
    except OSError:
        pass  # a read-only home only costs a re-measurement next time


def _wall_and_cpu_seconds() -> tuple[float, float]:
    """(wall clock, CPU time of the process's threads), in seconds."""
    return time.perf_counter(), time.process_time()


def measured_on_busy_cpu(cpu_seconds: float, wall_seconds: float, threads: int) -> bool:
    """Whether a measurement got less than BUSY_CPU_SHARE of the CPU time its threads could have used. One shorter
    than half the measuring budget is not judged."""
    return wall_seconds >= MEASURE_BUDGET_S / 2 and cpu_seconds < BUSY_CPU_SHARE * wall_seconds * max(1, threads)


def decision_rates(measure: Callable[[Sequence[Shape]], dict[str, float]] | None = None) -> dict[str, float]:
    """bf16 and fp32 GFLOP/s to decide by: the probe's where bf16 is clearly slower there (a CPU without fast bf16
    is decided in well under a second), else the full measurement at DECISION_SHAPES."""
    measure = measure or measure_matmul_gflops
    probe = measure(PROBE_SHAPES)
    if probe["bf16"] < PROBE_CLEARLY_SLOWER * probe["fp32"]:
        return probe
    return measure(DECISION_SHAPES)


def cpu_matmul_gflops(*, measure: Callable[[Sequence[Shape]], dict[str, float]] | None = None,
                      cache_file: Path | None | Literal["default"] = "default") -> tuple[dict[str, float], str, str]:
    """(GFLOP/s per dtype, when it was measured, "measured" (now), "busy" (now, on a loaded CPU: kept for this
    process only) or "cached") on this CPU and thread count, from the process cache, the cache file, or a fresh
    measurement (`decision_rates`, then written to both unless busy). To measure again, delete the file (or set
    METAXLM_PRECISION_CACHE=off)."""
    path = _cache_file() if cache_file == "default" else cache_file
    key = _cache_key(torch.get_num_threads())
    if key in _process_cache:
        return *_process_cache[key], "cached"
    found = _read_cache(path, key)
    if found is None:
        wall, cpu = _wall_and_cpu_seconds()
        rates = decision_rates(measure)
        wall, cpu = (now - then for now, then in zip(_wall_and_cpu_seconds(), (wall, cpu), strict=True))
        when = time.strftime("%Y-%m-%d %H:%M:%S")
        _process_cache[key] = rates, when
        if measured_on_busy_cpu(cpu, wall, torch.get_num_threads()):
            return rates, when, "busy"
        _write_cache(path, key, rates, when)
        return rates, when, "measured"
    _process_cache[key] = found
    return *found, "cached"


def choose_from_rates(rates: dict[str, float], *, min_speedup: float = BF16_MIN_SPEEDUP) -> tuple[str, str]:
    """(precision, reason) from measured bf16 and fp32 matmul GFLOP/s."""
    bf16, fp32 = rates["bf16"], rates["fp32"]
    ratio = bf16 / fp32
    if ratio >= min_speedup:
        return "bf16", f"bf16 matmuls {bf16:.0f} GFLOP/s vs fp32 {fp32:.0f} ({ratio:.2f}x, >= {min_speedup}x)"
    return "fp32", (f"bf16 matmuls {bf16:.0f} GFLOP/s vs fp32 {fp32:.0f} ({ratio:.2f}x"
                    f"{', slower' if ratio < 1 else f', under the {min_speedup}x that pays for the casts'})")


# -- the decision ------------------------------------------------------------------------------------------
def _check(requested: str, device_type: str) -> None:
    if requested not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}; got {requested!r}")
    if requested == "fp16" and device_type == "cpu":
        raise ConfigError("precision fp16 needs a GPU (CPU autocast has no fp16 loss scaling); use auto, bf16 or fp32")
    if requested in ("bf16", "fp16") and device_type == SIMULATED.type:
        raise ConfigError(f"precision {requested}: the simulated device (metaxlm.compute.devices) runs in fp32 only "
                          f"(torch.autocast knows no such device)")


def _given_auto() -> str | None:
    """The decision $METAXLM_PRECISION_AUTO gives (None: unset)."""
    given = os.environ.get(AUTO_ENV, "").strip().lower()
    if not given:
        return None
    if given not in ("bf16", "fp32"):
        raise ConfigError(f"{AUTO_ENV}={given!r}: give bf16 or fp32 (the decision `precision: auto` takes)")
    return given


def _decide_auto(device_type: str, measure, cache_file) -> PrecisionChoice:
    if device_type == SIMULATED.type:
        return PrecisionChoice("fp32", "auto", device_type, "fp32: the simulated device runs in fp32 only")
    given = _given_auto()
    if given == "bf16" and device_type == "cuda" and not torch.cuda.is_bf16_supported():
        return PrecisionChoice("fp32", "auto", device_type, f"fp32: {AUTO_ENV}=bf16, but GPU "
                                                            f"{torch.cuda.get_device_name()} lacks bf16", source="gpu")
    if given is not None:
        return PrecisionChoice(given, "auto", device_type, f"{given}, as {AUTO_ENV} says (the run's or job's "
                                                           f"decision)", source="run")
    if device_type == "cuda":
        ok = torch.cuda.is_bf16_supported()
        return PrecisionChoice("bf16" if ok else "fp32", "auto", device_type,
                               f"GPU {torch.cuda.get_device_name()} {'supports' if ok else 'lacks'} bf16", source="gpu")
    if device_type != "cpu":
        return PrecisionChoice("fp32", "auto", device_type, f"no bf16 measurement for device {device_type!r}")
    rates, when, source = cpu_matmul_gflops(measure=measure, cache_file=cache_file)
    precision, why = choose_from_rates(rates)
    where = {"measured": "measured now",
             "busy": "measured now on a busy CPU: not cached"}.get(source, f"measured {when}, cached")
    reason = f"{why} on {cpu_model()}, {torch.get_num_threads()} threads ({where})"
    return PrecisionChoice(precision, "auto", "cpu", reason, dict(rates), "measured" if source == "busy" else source)


def _decide(requested: str, device_type: str, measure, cache_file) -> PrecisionChoice:
    _check(requested, device_type)
    if requested != "auto":
        return PrecisionChoice(requested, requested, device_type, f"{requested} as configured")
    if device_type not in _decided:  # the process's first `auto` on this device kind is its only decision
        _decided[device_type] = _decide_auto(device_type, measure, cache_file)
    return _decided[device_type]


def resolve_precision(requested: str = "auto", device: torch.device | str | None = None, *, announce: bool = True,
                      measure: Callable[[Sequence[Shape]], dict[str, float]] | None = None,
                      cache_file: Path | None | Literal["default"] = "default",
                      collective: bool = False) -> PrecisionChoice:
    """The precision to run in on `device` (default: the device every loop runs on) for a requested one.

    `auto` is decided once per process (see the module docstring). `collective` (a training run's set-up, where
    every process calls this): under torch.distributed with several processes, `auto` is decided on rank 0 and
    broadcast. Other callers decide locally: a rank alone after the others have left (a run's evaluation on the main
    process) must not wait for them.
    `measure` replaces the matmul measurement (tests); `cache_file`: a path, None for no file, "default" for
    `$METAXLM_PRECISION_CACHE` / ~/.cache/metaxlm/precision.json.
    """
    device_type = torch.device(device).type if device is not None else compute_device().type
    _check(requested, device_type)  # before any collective: a bad value fails on every rank alike
    dist = torch.distributed
    if requested == "auto" and collective and dist.is_available() and dist.is_initialized() and \
            dist.get_world_size() > 1:
        box: list = [None]
        if dist.get_rank() == 0:
            box[0] = asdict(_decide(requested, device_type, measure, cache_file))
        dist.broadcast_object_list(box, src=0)
        fields = box[0] if dist.get_rank() == 0 else \
            {**box[0], "source": "rank0", "reason": box[0]["reason"] + " (decided on rank 0)"}
        choice = PrecisionChoice(**fields)
        _decided[device_type] = choice
    else:
        choice = _decide(requested, device_type, measure, cache_file)
    if announce and requested == "auto" and choice.reason not in _announced:
        _announced.add(choice.reason)
        print(f"precision auto -> {choice.precision}: {choice.reason}", file=sys.stderr, flush=True)
    return choice


def precision_for(model, requested: str = "auto", *, device: torch.device | str | None = None,
                  announce: bool = True) -> PrecisionChoice:
    """The one resolver every loop calls (pretraining, fine-tuning, inference, probes): `requested` for `model` on
    `device` (default: the model's); `auto` is the process's one decision."""
    if device is None:
        device = next(model.parameters()).device
    return resolve_precision(requested, device, announce=announce)


def auto_decision() -> PrecisionChoice | None:
    """This process's `auto` decision on the device every loop runs on, None if it made none (for a record)."""
    return _decided.get(compute_device().type)


def run_precision(output_dir: str | Path) -> PrecisionChoice:
    """The `auto` decision of the run in `output_dir`: made at its first invocation (`resolve_precision`) and
    recorded in its run_info.json ("precision"), then kept by every later invocation on the same device kind — a
    resumed run, perhaps on another CPU where `auto` would decide otherwise — and handed to the processes it starts
    (`$METAXLM_PRECISION_AUTO`). Call it once per invocation, before any loop, on the main process. It prints
    nothing: the first loop that runs in `auto` says the decision and why (a run of explicit precisions never
    mentions it)."""
    from metaxlm.run.info import read_run_precision, record_run_precision

    global _set_by_a_run
    if _set_by_a_run is not None and os.environ.get(AUTO_ENV) == _set_by_a_run[0]:
        # an earlier run of this process (the API, a notebook) set it: put back what was given before it
        if _set_by_a_run[1] is None:
            del os.environ[AUTO_ENV]
        else:
            os.environ[AUTO_ENV] = _set_by_a_run[1]
        _decided.clear()
    _set_by_a_run = None
    recorded = read_run_precision(output_dir)
    device_type = compute_device().type
    if recorded is not None and recorded.get("device", device_type) != device_type:
        # begun on a GPU, continued on a CPU (or back): this device's own answer; a pretraining checkpoint still
        # continues in the precision it began in (resume_precision)
        return resolve_precision("auto", announce=False)
    if recorded is None:
        choice = resolve_precision("auto", announce=False)
        record_run_precision(output_dir, {"auto": choice.precision, "reason": choice.reason, "source": choice.source,
                                          "device": choice.device, "cpu": cpu_model(),
                                          "threads": torch.get_num_threads(),
                                          "decided": time.strftime("%Y-%m-%d %H:%M:%S")})
    else:
        given = _given_auto()
        instead = f"; not {AUTO_ENV}={given}" if given not in (None, recorded["auto"]) else ""
        choice = PrecisionChoice(recorded["auto"], "auto", device_type,
                                 f"{recorded['auto']}, as this run decided on {recorded.get('decided', '?')} "
                                 f"({recorded.get('reason', '')}); kept on resume{instead}", source="run")
    before = os.environ.get(AUTO_ENV)
    os.environ[AUTO_ENV] = choice.precision  # this process's later loops and the processes it starts
    if before != choice.precision:
        _set_by_a_run = (choice.precision, before)
    _decided[device_type] = choice
    return choice


def foreseen_run_precision(output_dir: str | Path) -> PrecisionChoice | None:
    """What `run_precision` would decide for the run in `output_dir`, found without measuring anything (for a plan):
    the decision the run recorded, else $METAXLM_PRECISION_AUTO's, the GPU's, or this CPU's cached measurement;
    None when the run would measure it at its start."""
    from metaxlm.run.info import read_run_precision

    device_type = compute_device().type
    recorded = read_run_precision(output_dir)
    if recorded is not None and recorded.get("device", device_type) == device_type:
        return PrecisionChoice(recorded["auto"], "auto", device_type, f"decided by this run on "
                               f"{recorded.get('decided', '?')}: {recorded.get('reason', '')}", source="run")
    if device_type in _decided:
        return _decided[device_type]
    if device_type != "cpu" or _given_auto() is not None:  # decided without a measurement
        return _decide_auto(device_type, measure=None, cache_file=None)
    found = _read_cache(_cache_file(), _cache_key(torch.get_num_threads()))
    if found is None:
        return None
    precision, why = choose_from_rates(found[0])
    return PrecisionChoice(precision, "auto", "cpu", f"{why} on {cpu_model()}, {torch.get_num_threads()} threads "
                           f"(measured {found[1]}, cached)", dict(found[0]), "cached")


def resume_precision(began_in: str | None, choice: PrecisionChoice, *, what: str = "the run",
                     say: bool = True) -> PrecisionChoice:
    """A resumed run's precision: the one it began in (`began_in`, from its checkpoint) where this machine's
    `choice` differs — the CPU kind may change between sessions, and `auto` with it — so that the run continues as
    it began; `choice` when they agree, when there is none (a fresh run, an older checkpoint), or when the one it
    began in cannot run here (fp16 begun on a GPU, resumed on a CPU). A kept precision is said in one line."""
    if began_in is None or began_in == choice.precision:
        return choice
    if began_in == "fp16" and choice.device == "cpu":  # CPU autocast has no fp16
        if say:
            print(f"precision: {what} began in fp16 on a GPU; continuing in {choice.precision} on this CPU",
                  file=sys.stderr, flush=True)
        return choice
    if say:
        print(f"precision: {what} continues in {began_in}, the precision it began in (here {choice.requested} would "
              f"choose {choice.precision}: {choice.reason})", file=sys.stderr, flush=True)
    return PrecisionChoice(began_in, choice.requested, choice.device,
                           f"{began_in}, the precision {what} began in (kept on resume; here {choice.requested} gives "
                           f"{choice.precision}: {choice.reason})", source="config")


def training_accelerator(requested: str = "auto", *, began_in: str | None = None, **accelerator_kwargs):
    """(accelerate.Accelerator, PrecisionChoice) for a training run: the process group is initialized first
    (accelerate's PartialState), so that `auto` is decided once on rank 0 and every process gets the same
    precision; then the Accelerator is built with it (autocast through `acc.autocast()`). `began_in`: the precision
    a resumed run began in, kept where the choice here differs (another CPU kind) and it can run here, so the run
    continues as it began. It prints nothing: the training run says its precision and `reason` in one line."""
    from accelerate import Accelerator, PartialState
    from accelerate.state import AcceleratorState

    from metaxlm.run.processes import process_group_kwargs

    cpu = not torch.cuda.is_available()
    _check(requested, compute_device().type)  # before any process-group set-up
    state = PartialState(cpu=cpu, **process_group_kwargs())  # several processes: METAXLM_COLLECTIVE_TIMEOUT
    device = compute_device() if simulating() else state.device  # cuda:<local rank> under DDP
    choice = resume_precision(began_in, resolve_precision(requested, device, announce=False, collective=True),
                              say=False)
    # accelerate keeps one AcceleratorState per process and refuses a second precision; an earlier run of this
    # process (another variant, with an explicit precision of its own) may have set one: start it anew
    if AcceleratorState._shared_state.get("_mixed_precision") not in (None, choice.mixed_precision):
        AcceleratorState._reset_state()
    return Accelerator(cpu=cpu, mixed_precision=choice.mixed_precision, **accelerator_kwargs), choice
