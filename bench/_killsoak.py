"""The kill soak's machinery, shared by bench/soak_kill.py and tests/test_soak_kill.py (issue 13, "Kill soak").

A soak runs one `metaxlm` command again and again, SIGKILLing it at chosen moments, until it finishes; then it
compares what is on disk with an uninterrupted run of the same config.

Every run goes through this file's `child` mode, which runs `metaxlm.cli.main` unchanged except for probes: thin
wrappers around a few functions that append one line per event to an events file (`train 12`, `checkpoint-half
16`, `finetune 7`, ...). The parent reads that file to learn where the child is, so a kill can be aimed at an event
instead of a time. A probe can also *pause* the child at the n-th occurrence of its event (`--pause-at KIND:N`):
the child writes `paused` and sleeps until the parent's SIGKILL, which therefore lands exactly there (half of
optimizer.pt written; the checkpoint renamed into place but `latest` not yet moved; inside the evaluation; inside
fine-tuning). A plan whose event never comes (the run ended first) is recorded as such, never as a failure.

Top-level imports are stdlib only (the test and the bench import this file before torch is needed).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve()
# fields whose values are wall-clock measurements: they differ between any two runs and are not compared
TIMING_KEYS = frozenset({"tokens_per_s", "seconds", "train_seconds", "train_seconds_by_machine", "total_seconds",
                         "elapsed", "started", "finished", "written"})

# which phase an event belongs to (the last event a killed child wrote tells where the kill landed)
PHASES = {
    "start": "start-up", "train": "training step", "eval": "evaluation", "checkpoint": "checkpoint write",
    "checkpoint-half": "checkpoint write", "checkpoint-unpublished": "checkpoint write", "export": "final export",
    "final-heldout": "final export", "summary": "final export",
    "part": "part set-up", "finetune": "fine-tuning", "test": "testing", "retrieval": "probes",
    "alignment": "probes", "store": "storing results",
}


# -- the child: metaxlm with probes -------------------------------------------------------------------------------

class Probes:
    """Appends `<kind> <detail>` lines to the events file; pauses forever at the n-th `kind` if asked to."""

    def __init__(self, events: Path, pause_at: str | None):
        self.file = open(events, "a", buffering=1, encoding="utf-8")  # noqa: SIM115  (open for the process's life)
        self.counts: dict[str, int] = {}
        self.began = time.perf_counter()
        kind, _, nth = (pause_at or "").partition(":")
        self.pause = (kind, int(nth or 1)) if kind else None

    def __call__(self, kind: str, detail: object = "") -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.file.write(f"{kind} {detail}".rstrip() + f" @{time.perf_counter() - self.began:.3f}\n")
        self.file.flush()
        if self.pause == (kind, self.counts[kind]):
            self.file.write("paused\n")
            self.file.flush()
            while True:  # the parent SIGKILLs us here
                time.sleep(60)


def install_pretrain_probes(emit: Probes) -> None:
    import metaxlm.models.checkpoint as ckpt
    import metaxlm.pretrain.engine as engine

    where = {"step": 0, "exporting": False}
    step_generator, heldout, save, export = (engine.step_generator, engine.heldout_mlm_loss, engine.save_checkpoint,
                                             engine.atomic_dir)
    torch_save, write_text, write_json = ckpt._torch_save, ckpt.atomic_write_text, engine.atomic_write_json

    def step_generator_probe(seed, step):
        where["step"] = step
        emit("train", step)
        return step_generator(seed, step)

    def heldout_probe(*args, **kwargs):
        emit("final-heldout" if where["exporting"] else "eval", where["step"])
        return heldout(*args, **kwargs)

    def save_probe(root, step, **kwargs):
        emit("checkpoint", step)
        return save(root, step, **kwargs)

    def torch_save_probe(obj, file: Path):
        torch_save(obj, file)
        if Path(file).name == "optimizer.pt":  # cut the file in half, pause there, then put the rest back
            data = Path(file).read_bytes()
            with open(file, "r+b") as f:
                f.truncate(len(data) // 2)
                f.flush()
                os.fsync(f.fileno())
                emit("checkpoint-half", Path(file).parent.name)
                f.seek(len(data) // 2)
                f.write(data[len(data) // 2:])

    def write_text_probe(path, text):
        if Path(path).name == "latest":
            emit("checkpoint-unpublished", text.strip())
        return write_text(path, text)

    def export_probe(path):
        where["exporting"] = True
        emit("export", where["step"])
        return export(path)

    def write_json_probe(path, obj):
        if Path(path).name == "summary.json":
            emit("summary")
        return write_json(path, obj)

    engine.step_generator, engine.heldout_mlm_loss, engine.save_checkpoint = \
        step_generator_probe, heldout_probe, save_probe
    engine.atomic_dir, engine.atomic_write_json = export_probe, write_json_probe
    ckpt._torch_save, ckpt.atomic_write_text = torch_save_probe, write_text_probe


def install_evaluation_probes(emit: Probes) -> None:
    import metaxlm.evaluation.recipe as recipe
    import metaxlm.finetune.runner as runner
    import metaxlm.run.stamps as stamps

    # the stored parts are written as text (records.json_text: item rows one line each) by stamps.get_or_compute
    cached, write_text, finetune, predict = recipe._cached, stamps.atomic_write_text, runner.finetune, \
        runner.predict
    retrieval, alignment = recipe.evaluate_retrieval, recipe.evaluate_alignment

    def cached_probe(path: Path, fingerprint: str, compute, *args, **kwargs):
        stored = json.loads(path.read_text()) if path.exists() else {}
        if stored.get("fingerprint") != fingerprint:
            emit("part", path.stem)
        return cached(path, fingerprint, compute, *args, **kwargs)

    def finetune_probe(*args, on_step=None, **kwargs):
        def each_step(step: int, total: int) -> None:
            emit("finetune", step)
            if on_step is not None:
                on_step(step, total)
        return finetune(*args, on_step=each_step, **kwargs)

    def predict_probe(*args, **kwargs):
        emit("test")
        return predict(*args, **kwargs)

    def retrieval_probe(*args, **kwargs):
        emit("retrieval")
        return retrieval(*args, **kwargs)

    def alignment_probe(*args, **kwargs):
        emit("alignment")
        return alignment(*args, **kwargs)

    def write_text_probe(path, text):
        emit("store", Path(path).name)
        return write_text(path, text)

    recipe._cached, stamps.atomic_write_text = cached_probe, write_text_probe
    recipe.evaluate_retrieval, recipe.evaluate_alignment = retrieval_probe, alignment_probe
    runner.finetune, runner.predict = finetune_probe, predict_probe


def child_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="_killsoak.py child")
    ap.add_argument("--events", required=True)
    ap.add_argument("--pause-at", default=None, help="KIND:N: pause at the N-th event of KIND (until killed)")
    ap.add_argument("metaxlm_args", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    emit = Probes(Path(args.events), args.pause_at)
    emit("start", os.getpid())
    install_pretrain_probes(emit)
    install_evaluation_probes(emit)
    from metaxlm.cli import main

    rest = args.metaxlm_args[1:] if args.metaxlm_args[:1] == ["--"] else args.metaxlm_args
    return main(rest)


# -- the parent: one attempt, killed as planned ----------------------------------------------------------------------

@dataclass
class Plan:
    """How to kill one attempt: `pause` at the nth event (exact), `after` the nth event plus a random delay
    (wherever the child then is), or `timer` after `delay` seconds from launch. kind None: let it finish."""

    kind: str | None = None
    event: str = ""
    nth: int = 1
    delay: float = 0.0
    aim: str = ""  # what the plan is aiming at, in words

    def pause_arg(self) -> list[str]:
        return ["--pause-at", f"{self.event}:{self.nth}"] if self.kind == "pause" else []


@dataclass
class Attempt:
    command: list[str]
    plan: dict
    killed: bool = False
    exit_code: int | None = None
    phase: str | None = None          # where the kill landed: the phase of the last event written
    last_event: str | None = None
    events: int = 0
    planned_event_came: bool | None = None
    seconds: float = 0.0
    at: float = 0.0                   # seconds since the soak started
    progress: list = field(default_factory=list)  # [from, to]: steps trained (pretraining), parts stored (evaluation)
    first_work: float | None = None   # seconds from launch to the first training step or evaluation part
    stderr_tail: list[str] = field(default_factory=list)


class EventTail:
    """The events file's complete lines, read incrementally (the parent polls it every few milliseconds)."""

    def __init__(self, path: Path):
        self.path, self.offset, self.partial, self.counts = path, 0, "", {}

    def poll(self) -> dict[str, int]:
        try:
            with open(self.path, encoding="utf-8") as f:
                f.seek(self.offset)
                chunk = f.read()
                self.offset = f.tell()
        except FileNotFoundError:
            return self.counts
        lines = (self.partial + chunk).split("\n")
        self.partial = lines.pop()
        for line in lines:
            kind = line.split(" ", 1)[0]
            self.counts[kind] = self.counts.get(kind, 0) + 1
        return self.counts


def read_events(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [ln for ln in text.split("\n")[:-1] if ln]  # only complete lines


def child_env() -> dict:
    src = str(HERE.parents[1] / "src")
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": src + (os.pathsep + path if path else ""), "HF_HUB_OFFLINE": "1"}


# How an attempt's process starts (subprocess.Popen's signature): tests/test_soak_kill.py forks it from a process
# that has metaxlm imported already, to spare the suite the imports of every attempt.
launch = subprocess.Popen


def run_attempt(metaxlm_args: list[str], plan: Plan, work: Path, *, timeout: float, soak_start: float,
                rng: random.Random) -> Attempt:
    """Run `metaxlm *metaxlm_args` through the probes and kill it as `plan` says."""
    events = work / "events.txt"
    events.unlink(missing_ok=True)
    log = work / "attempt.log"
    cmd = [sys.executable, str(HERE), "child", "--events", str(events), *plan.pause_arg(), "--", *metaxlm_args]
    record = Attempt(command=metaxlm_args, plan=asdict(plan), at=round(time.perf_counter() - soak_start, 2))
    began = time.perf_counter()
    with open(log, "w") as out:
        proc = launch(cmd, stdout=out, stderr=subprocess.STDOUT, env=child_env())
        kill_at = began + plan.delay if plan.kind == "timer" else None
        tail = EventTail(events)
        while proc.poll() is None:
            now = time.perf_counter()
            if now - began > timeout:
                proc.kill()
                proc.wait()
                raise TimeoutError(f"metaxlm {' '.join(metaxlm_args)} did not end within {timeout:.0f}s "
                                   f"(plan {plan}); its output: {log}")
            if kill_at is None and plan.kind in ("pause", "after"):
                target = "paused" if plan.kind == "pause" else plan.event
                if tail.poll().get(target, 0) >= (1 if plan.kind == "pause" else plan.nth):
                    kill_at = now + (plan.delay if plan.kind == "after" else 0.0)
            if kill_at is not None and now >= kill_at:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.005)
    record.seconds = round(time.perf_counter() - began, 2)
    record.exit_code = proc.returncode
    record.killed = proc.returncode == -signal.SIGKILL
    seen = read_events(events)
    record.events = len(seen)
    landed = [e for e in seen if e != "paused"]
    record.last_event = landed[-1] if landed else None
    if record.killed:
        record.phase = PHASES.get(landed[-1].split(" ", 1)[0], "start-up") if landed else "start-up"
    steps = [int(e.split()[1]) for e in landed if e.startswith("train ")]
    stored = [e for e in landed if e.startswith("store ") and not e.startswith("store results.json")]
    record.progress = [None, max(steps) if steps else None] if "evaluate" not in metaxlm_args[:1] else \
        [None, len(stored)]
    work = next((e for e in landed if e.startswith(("train ", "part "))), None)
    record.first_work = float(work.rsplit("@", 1)[1]) if work else None
    if plan.kind in ("pause", "after"):
        record.planned_event_came = sum(1 for e in landed if e.split(" ", 1)[0] == plan.event) >= plan.nth
    if not record.killed and proc.returncode != 0:
        record.stderr_tail = log.read_text(errors="replace").strip().splitlines()[-15:]
    return record


def event_counts(events: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in events:
        kind = e.split(" ", 1)[0]
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def nth_within(remaining: int, kills_left: int, rng: random.Random) -> int:
    """A random occurrence among the next ones, spread so that the kills still to come find work left: at most
    about twice the fair share of the remaining events."""
    cap = max(1, min(remaining, math.ceil(2 * remaining / (kills_left + 1))))
    return rng.randint(1, cap)


# -- pretraining soak ---------------------------------------------------------------------------------------------

def pretrain_schedule(kills: int, rng: random.Random) -> list[str]:
    """What each kill aims at: every kind at least once when there are enough kills (checkpoint writes and the
    evaluation several times), random moments for the rest, the final export last."""
    if kills <= 0:
        return []
    fixed = ["checkpoint-half", "checkpoint-unpublished", "eval", "random", "startup"]
    share = {"checkpoint-half": 0.2, "checkpoint-unpublished": 0.1, "eval": 0.2, "startup": 0.1}
    aims = fixed[: max(0, kills - 1)]
    for kind, frac in share.items():
        aims += [kind] * max(0, round(frac * kills) - aims.count(kind))
    aims = aims[: max(0, kills - 1)]
    aims += ["random"] * (kills - 1 - len(aims))
    rng.shuffle(aims)
    return [*aims, "export"]


def pretrain_plan(aim: str, *, done: int, steps: int, save_every: int, eval_every: int, kills_left: int,
                  rng: random.Random) -> Plan:
    """The plan for one attempt that resumes at step `done`."""
    later = range(done + 1, steps + 1)
    if aim in ("checkpoint-half", "checkpoint-unpublished"):
        saves = sum(1 for s in later if s % save_every == 0 or s == steps)
        return Plan("pause", aim, nth_within(saves, kills_left, rng),
                    aim="half of optimizer.pt written" if aim == "checkpoint-half" else
                    "checkpoint renamed into place, `latest` not yet moved")
    if aim == "eval":
        evals = sum(1 for s in later if s % eval_every == 0 or s == steps)
        return Plan("pause", "eval", nth_within(evals, kills_left, rng) + (done == 0), aim="in-training evaluation")
    if aim == "export":
        return Plan("pause", "export", 1, aim="the final export, after the last checkpoint")
    if aim == "startup":
        return Plan("timer", delay=round(rng.uniform(0.1, 2.0), 3), aim="a random moment after launch")
    return Plan("after", "train", nth_within(steps - done, kills_left, rng), round(rng.uniform(0.0, 0.25), 3),
                aim="a random moment in training")


def resume_point(variant_dir: Path) -> int:
    pointer = variant_dir / "ckpt" / "latest"
    if not pointer.exists() or not (variant_dir / "ckpt" / pointer.read_text().strip() / "trainer_state.json").exists():
        return 0
    return int(pointer.read_text().strip().removeprefix("step_"))


def pretrain_soak(config: Path, run_dir: Path, variant: str, *, steps: int, save_every: int, eval_every: int,
                  kills: int, seed: int, work: Path, timeout: float = 600, say=print, aims: list[str] | None = None,
                  after_kill=None) -> dict:
    """`metaxlm pretrain config output_dir=run_dir` killed `kills` times (aimed as pretrain_schedule says, or as
    `aims` lists), resumed with --resume each time (without it while no checkpoint exists: nothing to resume from),
    until it finishes. `after_kill(attempt)`, when given, sees the run directory as each kill left it."""
    rng = random.Random(seed)
    vdir = run_dir / "pretrain" / variant
    aims = list(aims) if aims is not None else pretrain_schedule(kills, rng)
    attempts: list[Attempt] = []
    start = time.perf_counter()
    while True:
        done = resume_point(vdir)
        args = ["pretrain", str(config), f"output_dir={run_dir}", "--no-progress", *(["--resume"] if done else [])]
        killed_so_far = sum(a.killed for a in attempts)
        aim = aims[killed_so_far] if killed_so_far < len(aims) else None
        plan = Plan() if aim is None else pretrain_plan(aim, done=done, steps=steps, save_every=save_every,
                                                        eval_every=eval_every, kills_left=len(aims) - killed_so_far,
                                                        rng=rng)
        record = run_attempt(args, plan, work, timeout=timeout, soak_start=start, rng=rng)
        record.plan["resumed_at"] = done
        record.progress = [done, record.progress[1] if record.progress[1] is not None else done]
        attempts.append(record)
        say(f"  pretrain attempt {len(attempts)}: from step {done}, aim: {plan.aim or 'finish'} -> "
            + (f"killed in {record.phase} ({record.last_event})" if record.killed else f"exit {record.exit_code}"))
        if record.killed and after_kill is not None:
            after_kill(record)
        # a run that ended (finished, failed, or finished before the planned event came) ends the soak
        if not record.killed or len(attempts) > 4 * len(aims) + 10:
            break
    return {"attempts": [asdict(a) for a in attempts], "kills": sum(a.killed for a in attempts),
            "finished": attempts[-1].exit_code == 0, "seconds": round(time.perf_counter() - start, 1)}


# -- evaluation soak ----------------------------------------------------------------------------------------------

def evaluation_schedule(parts: dict[str, dict], kills: int) -> list[tuple[str, str]]:
    """(part, kind) per kill: the kills swept over the parts in the order they are computed, a fine-tuning part
    weighing twice a probe, so every part is killed in and the soak still moves on (a part is stored once a run
    gets through it). In a fine-tuning part the kills alternate between a pause at a random step and a random
    moment (a random delay after a random step began); in a probe, a random moment after it began."""
    weights = {p: 2 if v["finetune"] else 1 for p, v in parts.items()}
    total = sum(weights.values())
    schedule, seen = [], {}
    for i in range(kills):
        x, upto = (i + 0.5) * total / kills, 0
        part = next(p for p in parts if (upto := upto + weights[p]) > x)
        seen[part] = seen.get(part, 0) + 1
        schedule.append((part, "finetune" if parts[part]["finetune"] and seen[part] % 2 else "random"))
    return schedule


def _finetune_left(parts_dir: Path, part: str, steps: int) -> int:
    """The fine-tuning steps a rerun still makes in `part` (task-<name>): its total less the steps of the (language,
    seed) runs an earlier attempt finished, which the rerun reuses (`<eval>/finetune/<name>/<scenario>-runs/`)."""
    if not part.startswith("task-"):
        return steps
    runs = parts_dir.parent / "finetune" / part.removeprefix("task-")
    done = sum(json.loads(f.read_text())["detail"]["steps"] for f in runs.glob("*-runs/*.json"))
    return max(0, steps - done)


def evaluation_soak(config: Path, *, parts_dir: Path, parts: dict[str, dict], reference_seconds: float, kills: int,
                    seed: int, work: Path, timeout: float = 600, say=print,
                    aims: list[tuple[str, str]] | None = None) -> dict:
    """`metaxlm evaluate config` killed `kills` times (aimed as evaluation_schedule says, or as `aims` lists: (part,
    "finetune" | "random")) and run again each time, until it finishes. `parts`: per part the evaluation stores (file
    stem under `parts_dir`, in the order they are computed), its fine-tuning steps ({"finetune": n}). "finetune"
    pauses the child at a random step of the part's fine-tuning; "random" kills it 0-0.25 s after a random step of
    it began (a probe: 0-0.25 s after the part began), wherever it then is. When a kill's part is already stored
    (an earlier kill came late), the kills left are swept again over the parts left. `reference_seconds`: the
    uninterrupted run's time, recorded with each plan."""
    rng = random.Random(seed)
    aims = list(aims) if aims is not None else evaluation_schedule(parts, kills)
    attempts: list[Attempt] = []
    start = time.perf_counter()
    while True:
        left = [p for p in parts if not (parts_dir / f"{p}.json").exists()]
        killed_so_far = sum(a.killed for a in attempts)
        part, kind = aims[killed_so_far] if killed_so_far < len(aims) else (None, None)
        if part is not None and part not in left and left:
            aims[killed_so_far:] = evaluation_schedule({p: parts[p] for p in left}, len(aims) - killed_so_far)
            part, kind = aims[killed_so_far]
        elif part is not None and part not in left:
            part = None
        if part is None:
            plan = Plan()
        elif kind == "finetune" and (steps := _finetune_left(parts_dir, part, parts[part]["finetune"])):
            before = sum(_finetune_left(parts_dir, p, parts[p]["finetune"]) for p in left[: left.index(part)])
            plan = Plan("pause", "finetune", before + rng.randint(1, steps), aim=f"inside fine-tuning ({part})")
        elif steps := _finetune_left(parts_dir, part, parts[part]["finetune"]):
            before = sum(_finetune_left(parts_dir, p, parts[p]["finetune"]) for p in left[: left.index(part)])
            plan = Plan("after", "finetune", before + rng.randint(1, steps),
                        round(rng.uniform(0.0, 0.25), 3), aim=f"a random moment of {part}")
        else:
            plan = Plan("after", "part", left.index(part) + 1, round(rng.uniform(0.0, 0.25), 3),
                        aim=f"a random moment of {part}")
        record = run_attempt(["evaluate", str(config), "--no-progress"], plan, work, timeout=timeout,
                             soak_start=start, rng=rng)
        record.plan["parts_left"], record.plan["reference_seconds"] = len(left), reference_seconds
        record.progress = [len(parts) - len(left), len(parts) - len(left) + record.progress[1]]
        attempts.append(record)
        say(f"  evaluate attempt {len(attempts)}: {len(left)} parts left, aim: {plan.aim or 'finish'} -> "
            + (f"killed in {record.phase} ({record.last_event})" if record.killed else f"exit {record.exit_code}"))
        if not record.killed or len(attempts) > 4 * len(aims) + 10:
            break
    return {"attempts": [asdict(a) for a in attempts], "kills": sum(a.killed for a in attempts),
            "finished": attempts[-1].exit_code == 0, "seconds": round(time.perf_counter() - start, 1)}


# -- comparing with the uninterrupted run ---------------------------------------------------------------------------

def without_timing(obj):
    if isinstance(obj, dict):
        return {k: without_timing(v) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, list):
        return [without_timing(v) for v in obj]
    return obj


def _same_tensors(a: dict, b: dict) -> bool:
    import torch

    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(a[k], b[k]) for k in a)


def same_state(a, b) -> bool:
    """Deep equality of loaded training states (dicts, lists, tensors bit for bit, numbers)."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype \
            and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def compare_pretraining(reference: Path, run_dir: Path) -> dict:
    """Each property: True when `run` equals the uninterrupted `reference`, else what differs."""
    import torch
    from safetensors.torch import load_file

    from metaxlm.io import jsonl_lines

    out: dict = {}
    ref_ckpts = sorted(p.name for p in (reference / "ckpt").glob("step_*"))
    run_ckpts = sorted(p.name for p in (run_dir / "ckpt").glob("step_*"))
    out["checkpoints"] = ref_ckpts == run_ckpts or f"reference keeps {ref_ckpts}, the soaked run {run_ckpts}"
    common = [c for c in ref_ckpts if c in run_ckpts]

    def each(label: str, rel_paths: list[str], load) -> None:
        bad = [rel for rel in rel_paths if not (run_dir / rel).exists() or not (reference / rel).exists()
               or not load(reference / rel, run_dir / rel)]
        out[label] = True if rel_paths and not bad else (f"differs: {', '.join(bad)}" if bad else "nothing to compare")

    def tensors(a: Path, b: Path) -> bool:
        return _same_tensors(load_file(str(a)), load_file(str(b)))

    def states(a: Path, b: Path) -> bool:
        return same_state(torch.load(a, weights_only=True), torch.load(b, weights_only=True))

    each("model_weights", ["final/model.safetensors", *(f"ckpt/{c}/model.safetensors" for c in common)], tensors)
    each("objectives_state", ["final/objectives.safetensors", *(f"ckpt/{c}/objectives.safetensors" for c in common)],
         tensors)
    each("optimizer_state", [f"ckpt/{c}/optimizer.pt" for c in common], states)
    each("scheduler_state", [f"ckpt/{c}/scheduler.pt" for c in common], states)
    each("trainer_state", [f"ckpt/{c}/trainer_state.json" for c in common],
         lambda a, b: json.loads(a.read_text()) == json.loads(b.read_text()))

    def lines(d: Path) -> list[dict]:
        return [without_timing(json.loads(ln)) for ln in jsonl_lines(d / "metrics.jsonl")]

    ra, rb = lines(reference), lines(run_dir)
    if ra == rb:
        out["metrics_lines"] = True
    else:
        first = next((i for i, (x, y) in enumerate(zip(ra, rb, strict=False)) if x != y), min(len(ra), len(rb)))
        out["metrics_lines"] = f"{len(ra)} vs {len(rb)} lines; first difference at line {first + 1}"
    sa, sb = (without_timing(json.loads((d / "summary.json").read_text())) if (d / "summary.json").exists() else None
              for d in (reference, run_dir))
    out["summary"] = True if sa is not None and sa == sb else f"reference {sa!r} vs soaked {sb!r}"[:400]
    out["summary_last_is_a_step"] = bool(sb and sb.get("last", {}).get("step")) or "summary.json has an empty `last`"
    out["identical"] = all(v is True for v in out.values())
    return out


def compare_results(reference: Path, run_dir: Path) -> dict:
    """results.json of the soaked evaluation against the uninterrupted one (timing fields aside)."""
    a, b = (json.loads(p.read_text()) if p.exists() else None for p in (reference, run_dir))
    if b is None:
        return {"results_json": f"{run_dir} missing", "identical": False}
    same = without_timing(a) == without_timing(b)
    return {"results_json": True if same else "differs", "identical": same}


# -- the JSON and the figure ---------------------------------------------------------------------------------------

def kills_by_phase(soak: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for a in soak["attempts"]:
        if a["killed"]:
            counts[a["phase"]] = counts.get(a["phase"], 0) + 1
    return counts


def figure(result: dict, out: Path) -> None:
    """Per soak, progress against time: each run of the command is a line from where it resumed to how far it got
    (training steps; stored evaluation parts), ending in a marker coloured by where its SIGKILL landed (grey
    circle: it ran to the end). The title says whether the end state equals the uninterrupted run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    soaks = [(name, result[name]) for name in ("pretraining", "evaluation") if name in result]
    phases = sorted({a["phase"] for _, s in soaks for a in s["soak"]["attempts"] if a["killed"]})
    palette = [c for i, c in enumerate(plt.get_cmap("tab10").colors) if i != 7]  # grey is for "ran to the end"
    colours = dict(zip(phases, palette, strict=False))
    fig, axes = plt.subplots(len(soaks), 1, figsize=(10, 3.2 * len(soaks) + 0.8), squeeze=False)
    for ax, (name, s) in zip(axes[:, 0], soaks, strict=True):
        for a in s["soak"]["attempts"]:
            begin, end = a["progress"]
            ax.plot([a["at"], a["at"] + a["seconds"]], [begin, end], color="0.55", linewidth=1)
            ax.plot(a["at"] + a["seconds"], end, marker="v" if a["killed"] else "o", markersize=7,
                    color=colours[a["phase"]] if a["killed"] else "0.6", markeredgecolor="black",
                    markeredgewidth=0.4, linestyle="none")
        ok = s["comparison"]["identical"]
        ax.set_title(f"{name}: {s['soak']['kills']} SIGKILLs, resumed each time; end state "
                     f"{'identical to' if ok else 'DIFFERENT from'} the uninterrupted run", fontsize=10,
                     color="black" if ok else "red")
        ax.set_ylabel("training step reached" if name == "pretraining" else "evaluation parts stored")
        ax.set_xlabel("seconds since the soak started (a line: one run of the command, from its resume point)")
        ax.grid(alpha=0.3)
    handles = [plt.Line2D([], [], marker="v", color=colours[p], markeredgecolor="black", linestyle="none")
               for p in phases] + [plt.Line2D([], [], marker="o", color="0.6", linestyle="none")]
    fig.legend(handles, [f"killed in {p}" for p in phases] + ["ran to the end"], loc="lower center",
               ncol=min(4, len(handles)), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06 + 0.03 * (len(handles) > 4), 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, out)


if __name__ == "__main__":
    if sys.argv[1:2] != ["child"]:
        sys.exit("usage: _killsoak.py child --events FILE [--pause-at KIND:N] -- METAXLM-ARGS (see bench/soak_kill.py)")
    sys.exit(child_main(sys.argv[2:]))
