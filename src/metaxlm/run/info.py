"""What every run records beside its outputs: the resolved config, package versions and the git commit, and which
invocation made each of its artifacts from what (`record_artifact`)."""

from __future__ import annotations

import fcntl
import json
import os
import platform
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel

from metaxlm.config import dump_config
from metaxlm.io import atomic_write_json
from metaxlm.run.layout import RunDir

# How often a running stage records its time so far: a run killed without warning (SIGKILL, a session's end, a lost
# machine) leaves a run_info.json short by at most this much. One small JSON write a minute costs nothing.
RECORD_EVERY_SECONDS = 60.0

PACKAGES = ("metaxlm", "torch", "transformers", "tokenizers", "sentencepiece", "datasets", "pyarrow", "numpy")



# -- the machine -------------------------------------------------------------------------------------------
CPUINFO = Path("/proc/cpuinfo")


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's model name (/proc/cpuinfo on Linux) with its family and model numbers where the file gives them,
    e.g. "AMD EPYC (family 23, model 1)": a virtual machine may show only "AMD EPYC" for CPUs whose speed differs
    twofold; else what platform knows."""
    try:
        fields: dict[str, str] = {}
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if not line.strip() and fields:  # the first processor's block is enough
                break
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
        if name := fields.get("model name"):
            family, model = fields.get("cpu family"), fields.get("model")
            return f"{name} (family {family}, model {model})" if family and model else name
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_bf16_flags() -> list[str]:
    """The CPU flags that make bf16 matmuls fast (a VM may hide some on the same model name)."""
    try:
        for line in CPUINFO.read_text(errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                return sorted(f for f in line.split(":", 1)[1].split() if "bf16" in f or f.startswith("amx"))
    except OSError:
        pass
    return []

def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_commit(cwd: Path | None = None) -> dict[str, str | bool | None]:
    """Commit of the source tree metaxlm runs from (falls back to the working directory), and whether it is dirty."""
    here = cwd or Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, check=True)
        return {"commit": sha.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}


def _union_seconds(spans: list[tuple[datetime, datetime]]) -> float:
    """Seconds covered by the spans together: side-by-side invocations (evaluation split over processes) count once."""
    total, end = 0.0, None
    for a, b in sorted(spans):
        if end is None or a > end:
            total, end = total + (b - a).total_seconds(), b
        elif b > end:
            total, end = total + (b - end).total_seconds(), b
    return total


def _with_totals(info: dict) -> dict:
    """run_info.json's whole-run fields, from its invocations: a resumed run's time is every invocation's, not the
    last one's. An interrupted invocation counts with the stages it finished plus the part of the stage it was in up
    to its last record (`unfinished_stage`): the moment it stopped when it could say so (an error, Ctrl-C, SIGTERM),
    else its last periodic record (SIGKILL, a lost machine: at most RECORD_EVERY_SECONDS before)."""
    runs = info.get("invocations", [])
    spans = []
    for inv in runs:
        start = datetime.fromisoformat(inv["started"])
        seconds = inv.get("wall_seconds", sum(inv.get("stage_seconds", {}).values())
                          + inv.get("unfinished_stage", {}).get("seconds", 0.0))
        spans.append((start, start + timedelta(seconds=seconds)))
    info["run_seconds"] = round(_union_seconds(spans), 1)
    info["run_invocations"] = len(runs)
    info["run_interrupted_invocations"] = sum(1 for inv in runs if inv.get("finished") is None)
    return info


_INVOCATION_FIELDS = ("started", "argv", "git", "cpu", "finished", "stage_seconds", "unfinished_stage",
                      "wall_seconds")
_CURRENT: dict[str, str] = {}  # output directory -> this process's invocation id in its run_info.json


@contextmanager
def _locked_run_info(output_dir: Path):
    """Read-modify-write of run_info.json under a lock on the run directory: processes of one run side by side
    (an evaluation split over them) each keep their record."""
    fd = os.open(output_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        path = RunDir(output_dir).run_info
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            info = {}
        if "invocations" not in info and "started" in info:  # written before invocations were kept
            info["invocations"] = [{"id": info["started"], **{k: info[k] for k in _INVOCATION_FIELDS if k in info}}]
        yield info
        atomic_write_json(path, _with_totals(info))
    finally:
        os.close(fd)  # releases the lock


def write_run_info(output_dir: str | Path, config: BaseModel, argv: list[str] | None = None) -> None:
    """The run's provenance at the start of an invocation. The top-level fields describe this invocation; every
    invocation of the same output directory (a resumed run, processes side by side) is kept in `invocations`, and
    `run_seconds` is the wall time they cover together."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    dump_config(config, RunDir(out).config)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    this = {"started": started, "argv": list(sys.argv if argv is None else argv), "git": git_commit(),
            "cpu": {"model": cpu_model(), "cores": os.cpu_count()}}
    _CURRENT[str(out)] = f"{started}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
    with _locked_run_info(out) as info:
        earlier = info.get("invocations", [])
        # the run's, not the invocation's: the precision decision, what made each artifact (record_artifact)
        decided = {k: info[k] for k in ("precision", "artifacts") if k in info}
        info.clear()
        info.update({**this, "versions": package_versions(), "platform": platform.platform(), **decided,
                     "invocations": [*earlier, {"id": _CURRENT[str(out)], **this, "finished": None}]})


def record_artifact(output_dir: str | Path, name: str, fingerprint: str, *, made: bool | None, **detail) -> None:
    """run_info.json's `artifacts[name]` (vocab, prepared, pretrain/<variant>, eval/<model>): the fingerprint of
    what made it (its settings and inputs; the full record lies beside it, `detail` says where) and `made_by`, the
    id of the invocation (in `invocations`) that made it — kept while later invocations reuse it, so the run says
    which of its invocations, under which config, produced each of its outputs. `made` None: made by this
    invocation when its fingerprint is new. `made_by` None: made before run_info.json recorded it. Nothing is
    recorded outside a recorded invocation (a stage called on its own)."""
    out = Path(output_dir)
    current = _CURRENT.get(str(out))
    if current is None:
        return
    with _locked_run_info(out) as info:
        artifacts = info.setdefault("artifacts", {})
        old = artifacts.get(name, {})
        same = old.get("fingerprint") == fingerprint
        made_by = current if made or (made is None and not same) else old.get("made_by") if same else None
        artifacts[name] = {"fingerprint": fingerprint, "made_by": made_by, **detail}


def read_run_precision(output_dir: str | Path) -> dict | None:
    """The `precision: auto` decision the run recorded at its first invocation (metaxlm.compute.precision
    .run_precision), None if none."""
    try:
        found = json.loads(RunDir(Path(output_dir)).run_info.read_text()).get("precision")
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and found.get("auto") in ("bf16", "fp32") else None


def record_run_precision(output_dir: str | Path, decision: dict) -> None:
    """Record the run's `auto` decision in run_info.json (kept by every later invocation)."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    with _locked_run_info(out) as info:
        info.setdefault("precision", decision)


def _update_invocation(output_dir: str | Path, stage_seconds: dict[str, float], finished: bool,
                       unfinished: tuple[str, float] | None = None) -> None:
    out = Path(output_dir)
    seconds = {name: round(s, 1) for name, s in stage_seconds.items()}
    now = datetime.now(UTC).isoformat(timespec="seconds")
    with _locked_run_info(out) as info:
        for inv in info.get("invocations", []):
            if inv.get("id") == _CURRENT.get(str(out)):
                inv["stage_seconds"] = seconds
                inv.pop("unfinished_stage", None)
                if unfinished is not None:
                    inv["unfinished_stage"] = {"stage": unfinished[0], "seconds": round(unfinished[1], 1),
                                               "recorded": now}
                if finished:
                    inv.update(finished=now, wall_seconds=round(sum(seconds.values()), 1))
        if finished:
            info.update(finished=now, stage_seconds=seconds, wall_seconds=round(sum(seconds.values()), 1))


def record_stage_seconds(output_dir: str | Path, stage_seconds: dict[str, float],
                         unfinished: tuple[str, float] | None = None) -> None:
    """The stages this invocation has finished so far, and `unfinished`, (stage, seconds spent in it so far), for
    the one it is in: kept if it is interrupted later, so the run's time counts the work it did."""
    _update_invocation(output_dir, stage_seconds, finished=False, unfinished=unfinished)


def finish_run_info(output_dir: str | Path, stage_seconds: dict[str, float]) -> None:
    """Add the wall time (per stage and in all) of the invocation that just finished to run_info.json, and the
    whole run's time over every invocation (`run_seconds`)."""
    _update_invocation(output_dir, stage_seconds, finished=True)


@contextmanager
def recorded_every(record: Callable[[], None], seconds: float | None = None):
    """Call `record` every `seconds` (RECORD_EVERY_SECONDS) from a background thread while the block runs: what a
    kill leaves is the last record, since nothing can be written at the moment of a SIGKILL. The records of
    processes and threads are serialized by run_info.json's lock."""
    every = RECORD_EVERY_SECONDS if seconds is None else seconds
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every):
            with suppress(Exception):  # a full disk: the run itself matters more than its record
                record()

    thread = threading.Thread(target=loop, name="run-info-record", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def stage_time_recorded(output_dir: str | Path, finished: dict[str, float], stage: str):
    """Around one stage: the stages `finished` before it and the time spent in it so far (`unfinished_stage`) are
    recorded every RECORD_EVERY_SECONDS (what a SIGKILL leaves), whenever the yielded function is called (after a
    variant or a model), and when an error, Ctrl-C or SIGTERM stops the stage, which then goes on stopping."""
    start = time.perf_counter()

    def record() -> None:
        record_stage_seconds(output_dir, finished, unfinished=(stage, time.perf_counter() - start))

    try:
        with recorded_every(record):
            yield record
    except BaseException:
        with suppress(Exception):  # a full disk: the error itself matters more than the record
            record()
        raise


@contextmanager
def recorded_invocation(output_dir: str | Path, config: BaseModel, stage: str):
    """One stage run on its own (`metaxlm pretrain`, `metaxlm evaluate`, ...): its provenance at the start and
    its time at the end, as `metaxlm run` records its stages (and, when it is stopped, its time so far)."""
    write_run_info(output_dir, config)
    start = time.perf_counter()
    with stage_time_recorded(output_dir, {}, stage):
        yield
    finish_run_info(output_dir, {stage: time.perf_counter() - start})


@dataclass(frozen=True)
class RunTime:
    """A run's time as its run_info.json has it, for a report: every invocation's, a resumed run's included."""

    seconds: float                   # run_seconds: the wall time the invocations cover together
    invocations: int
    stopped: int                     # invocations that ended before finishing (killed, stopped, failed)
    running: bool                    # this process's invocation has not finished (a report written inside the run)
    stage_seconds: dict[str, float]  # per stage over every invocation, the part of a stage an invocation was in
    cpus: list[str]                  # "model (N cores)", in order of first use
    commits: list[str]               # short commits (+ "dirty"), in order of first use


def run_time(output_dir: str | Path) -> RunTime | None:
    """The run's time from its run_info.json (None: no readable record, e.g. a run from before invocations were
    kept)."""
    out = Path(output_dir)
    try:
        info = json.loads(RunDir(out).run_info.read_text(encoding="utf-8"))
        runs = info["invocations"]
        current = _CURRENT.get(str(out))
        stages: dict[str, float] = {}
        cpus: dict[str, None] = {}     # ordered sets: in order of first use
        commits: dict[str, None] = {}
        for inv in runs:
            for stage, seconds in inv.get("stage_seconds", {}).items():
                stages[stage] = stages.get(stage, 0.0) + float(seconds)
            if unfinished := inv.get("unfinished_stage"):
                stages[unfinished["stage"]] = stages.get(unfinished["stage"], 0.0) + float(unfinished["seconds"])
            cpu = f"{inv['cpu']['model']} ({inv['cpu']['cores']} cores)" if inv.get("cpu") else "?"
            git = inv.get("git") or {}
            commit = (git.get("commit") or "?")[:7] + (" dirty" if git.get("dirty") else "")
            cpus[cpu] = commits[commit] = None
        unfinished_ids = [inv.get("id") for inv in runs if inv.get("finished") is None]
        return RunTime(seconds=float(_with_totals(info)["run_seconds"]), invocations=len(runs),
                       stopped=sum(1 for i in unfinished_ids if i != current), running=current in unfinished_ids,
                       stage_seconds=stages, cpus=list(cpus), commits=list(commits))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
