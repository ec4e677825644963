"""A full disk, for real: `metaxlm` on a small tmpfs that fills up mid-run (issue 13, "Full disk").

Scenarios, each on a fresh tmpfs (mounted under --work; needs root) holding a filler file that leaves just enough
space for the run to fail at the chosen write:

  pretrain-model       `metaxlm pretrain`: the second checkpoint's model weights (model.safetensors, safetensors)
  pretrain-optimizer   `metaxlm pretrain`: the second checkpoint's optimizer state (optimizer.pt, torch.save)
  prepare              `metaxlm data prepare`: the Arrow shards

For each: the exit code and the error line, whether stderr holds a traceback, whether hidden temporary files were
left behind, whether the last good checkpoint verifies (sha256) and loads with AutoModelForMaskedLM; then space is
freed (the filler removed, or the tmpfs remounted bigger) and the same command runs again (`--resume` for pretrain):
did it finish, and does it equal the uninterrupted run on disk (bit-exact weights, the same log lines; for prepare,
the same meta.json and token ids)? Writes runs/bench/disk_full.json atomically (with the CPU model and torch
version), or {"skipped": reason} when no tmpfs can be mounted.

tests/test_disk_full.py runs the same scenarios (pretrain-optimizer, prepare) on the test fixtures, so the
functions below take the run's files as arguments. Top-level imports are stdlib only (the test imports this file).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = 4096  # tmpfs allocates whole pages
# a checkpoint's files in the order save_checkpoint writes them (config.json comes with save_pretrained)
CHECKPOINT_ORDER = ("config.json", "model.safetensors", "objectives.safetensors", "optimizer.pt", "scheduler.pt",
                    "trainer_state.json", "checksums.json")
TINY = {"layers": 2, "hidden": 32, "heads": 2, "ffn": 64, "max_positions": 64}


class CannotMount(Exception):
    """No tmpfs here (not root, or mounting is not permitted): the real-filesystem check is skipped."""


@contextmanager
def tmpfs(path: Path, size: int):
    """A tmpfs of `size` bytes mounted at `path` (created) for the duration; unmounted even on failure."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        raise CannotMount("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={_kib(size)}k", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode:
        raise CannotMount(f"mount -t tmpfs failed: {done.stderr.strip() or done.returncode}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)  # busy: detach now, free when unused


def resize_tmpfs(path: Path, size: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={_kib(size)}k", str(path)], check=True, capture_output=True)


def _kib(size: int) -> int:
    return -(-size // PAGE) * PAGE // 1024


def used(path: Path) -> int:
    """Bytes `path` (a file or a tree) takes on a tmpfs: each file rounded up to whole pages."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()] if path.exists() else []
    return sum(-(-p.stat().st_size // PAGE) * PAGE for p in files)


def free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(mount: Path, leave: int) -> Path:
    """Write a filler file so that `leave` bytes stay free on `mount` (zeros are written: a sparse file would not
    take the space)."""
    filler = mount / "filler.bin"
    size = max(0, free(mount) - leave) // PAGE * PAGE
    with open(filler, "wb") as f:
        for _ in range(size // (1 << 20)):
            f.write(bytes(1 << 20))
        f.write(bytes(size % (1 << 20)))
    return filler


def metaxlm(*args: str) -> subprocess.CompletedProcess:
    """`metaxlm *args` in a fresh process; `.seconds` and `.cpu_seconds` (its CPU time: on a busy machine the
    wall time says more about the other jobs)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    cpu, wall = _children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "metaxlm.cli", *args], capture_output=True, text=True, env=env)
    done.seconds, done.cpu_seconds = time.perf_counter() - wall, _children_cpu() - cpu
    return done


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def outcome(done: subprocess.CompletedProcess) -> dict:
    """What the user saw: exit code, the error line(s), whether a traceback was printed."""
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("metaxlm: error:")]
    return {"exit_code": done.returncode, "error_lines": errors, "message": errors[-1] if errors else None,
            "traceback": "Traceback (most recent call last)" in done.stderr,
            "stderr_tail": done.stderr.strip().splitlines()[-3:],
            "seconds": round(done.seconds, 1), "cpu_seconds": round(done.cpu_seconds, 1)}


def leftovers(root: Path) -> list[str]:
    """Hidden temporary files or directories (atomic writes', checkpoints') under `root`: there must be none."""
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*") if p.name != ".")


def pretrain_budget(reference: Path, *, fail_in: str, steps: int) -> int:
    """Bytes the variant directory may use so that the run fails halfway through `fail_in` of its last checkpoint:
    everything the uninterrupted run (`reference`) had written before (its logs at their final size: an upper
    bound), the files of the checkpoint written before `fail_in`, and half of `fail_in`."""
    last = reference / "ckpt" / f"step_{steps:08d}"
    before = used(reference) - used(reference / "final") - used(reference / "summary.json") - used(last)
    order = [f for f in CHECKPOINT_ORDER if (last / f).exists()]
    written = sum(used(last / f) for f in order[: order.index(fail_in)])
    return before + written + (last / fail_in).stat().st_size // 2


def pretrain_scenario(config: Path, template: Path, reference: Path, work: Path, *, fail_in: str,
                      steps: int, variant: str = "xlm") -> dict:
    """`metaxlm pretrain config` (its output_dir overridden to a copy of `template`: vocab/ and prepared/) with the
    variant directory on a tmpfs that fills while the last checkpoint's `fail_in` is written; then the filler is
    removed and `--resume` runs. `reference`: the uninterrupted run's variant directory (same config, on disk)."""
    run = work / f"run-{fail_in.split('.')[0]}"
    shutil.rmtree(run, ignore_errors=True)
    (run / "pretrain").mkdir(parents=True)
    for part in ("vocab", "prepared"):
        shutil.copytree(template / part, run / part)
    vdir = run / "pretrain" / variant
    leave = pretrain_budget(reference, fail_in=fail_in, steps=steps)
    record: dict = {"fail_in": fail_in, "free_at_start": leave}
    with tmpfs(run / "pretrain", 2 * used(reference) + (4 << 20)) as mount:
        filler = fill(mount, leave)
        full = metaxlm("pretrain", str(config), f"output_dir={run}", "--no-progress")
        record["full_disk"] = {**outcome(full), "leftovers": leftovers(vdir), "free_after_failure": free(mount)}
        record["last_checkpoint"] = checkpoint_state(vdir / "ckpt")
        filler.unlink()  # free space
        resumed = metaxlm("pretrain", str(config), f"output_dir={run}", "--no-progress", "--resume")
        record["resume"] = {**outcome(resumed),
                            "finished": resumed.returncode == 0 and (vdir / "final" / "config.json").exists()}
        record["resume"]["equals_uninterrupted"] = \
            same_run(reference, vdir, steps) if record["resume"]["finished"] else "not finished"
    return record


def checkpoint_state(ckpt_root: Path) -> dict:
    """The checkpoint `latest` names: does it verify (sha256) and load with AutoModelForMaskedLM?"""
    from transformers import AutoModelForMaskedLM

    from metaxlm.models.checkpoint import corruption, latest_checkpoint
    from metaxlm.models.loading import quiet_transformers

    latest = latest_checkpoint(ckpt_root)
    if latest is None:
        return {"name": None}
    state = {"name": latest.name, "path": str(latest), "verifies": corruption(latest) is None}
    try:
        with quiet_transformers():
            AutoModelForMaskedLM.from_pretrained(str(latest))
        state["loads"] = True
    except Exception as err:  # reported, not raised: the bench records what happened
        state["loads"] = f"{type(err).__name__}: {err}"
    return state


def same_run(reference: Path, run_dir: Path, steps: int) -> bool | str:
    """True when `run` equals the uninterrupted `reference`: the same log lines (but the timings) and bit-identical
    weights in the last checkpoint and the final model; else what differs."""
    import torch
    from safetensors.torch import load_file

    def lines(d: Path) -> list[dict]:
        return [{k: v for k, v in json.loads(ln).items() if k != "tokens_per_s"}
                for ln in (d / "metrics.jsonl").read_text().splitlines()]

    if lines(reference) != lines(run_dir):
        return "metrics.jsonl differs"
    for rel in (f"ckpt/step_{steps:08d}/model.safetensors", "final/model.safetensors"):
        a, b = load_file(str(reference / rel)), load_file(str(run_dir / rel))
        if a.keys() != b.keys() or not all(torch.equal(a[k], b[k]) for k in a):
            return f"{rel} differs"
    return True


def prepare_scenario(config: Path, vocab: Path, reference: Path, work: Path) -> dict:
    """`metaxlm data prepare config` with output_dir on a tmpfs holding the vocabulary and 48 KiB more (the Arrow
    shards need far more); then the tmpfs is remounted bigger and the command runs again. `reference`: a prepared/
    made on disk from the same corpora and settings."""
    run = work / "prepare-run"
    shutil.rmtree(run, ignore_errors=True)
    record: dict = {}
    with tmpfs(run, used(vocab) + (64 << 10)) as mount:
        shutil.copytree(vocab, mount / "vocab")
        fill(mount, 48 << 10)  # the config and run_info.json take a page or two of it
        record["free_at_start"] = free(mount)
        full = metaxlm("data", "prepare", str(config), f"output_dir={mount}", "--no-progress")
        record["full_disk"] = {**outcome(full), "leftovers": leftovers(mount),
                               "prepared_exists": (mount / "prepared").exists(), "free_after_failure": free(mount)}
        (mount / "filler.bin").unlink()
        resize_tmpfs(mount, used(vocab) + 4 * used(reference) + (1 << 20))  # free space: a bigger filesystem
        again = metaxlm("data", "prepare", str(config), f"output_dir={mount}", "--no-progress")
        record["rerun"] = {**outcome(again),
                           "finished": again.returncode == 0 and (mount / "prepared" / "meta.json").exists()}
        record["rerun"]["equals_reference"] = \
            same_prepared(reference, mount / "prepared") if record["rerun"]["finished"] else "not finished"
    return record


def same_prepared(reference: Path, prepared: Path) -> bool | str:
    import datasets

    ma, mb = (json.loads((d / "meta.json").read_text()) for d in (reference, prepared))
    ma.pop("tokenizer"), mb.pop("tokenizer")  # the tokenizer's path differs
    if ma != mb:
        return "meta.json differs"
    for d in sorted(p.relative_to(reference) for p in reference.glob("*/*") if p.is_dir()):
        a, b = datasets.load_from_disk(str(reference / d)), datasets.load_from_disk(str(prepared / d))
        if a.to_dict() != b.to_dict():
            return f"{d} differs"
    return True


# -- the stand-alone bench: its own small corpora, vocabulary and reference runs -----------------------------------

WORDS = {
    "en": "the house is small and the cat sleeps on the red chair near an open window".split(),
    "de": "das Haus ist klein und die Katze schläft auf dem roten Stuhl am offenen Fenster".split(),
    "ru": "дом маленький и кошка спит на красном стуле у открытого окна".split(),
    "zh": list("房子很小猫睡在开着的窗户旁边的红椅子上"),
}


def build_template(work: Path) -> tuple[Path, Path]:
    """Corpora, a vocabulary and prepared/ on disk (the run every scenario copies), and the config."""
    import yaml

    from metaxlm.config import CorpusSpec, PrepareConfig, VocabConfig
    from metaxlm.data.prepare import prepare_corpora
    from metaxlm.vocab import train_vocab

    corpora = work / "corpora"
    corpora.mkdir(parents=True, exist_ok=True)
    for i, (lang, n) in enumerate({"en": 3000, "de": 1000, "ru": 300, "zh": 100}.items()):
        rng, sep = random.Random(i), "" if lang == "zh" else " "
        (corpora / f"{lang}.txt").write_text("\n".join(sep.join(rng.choices(WORDS[lang], k=rng.randint(4, 12)))
                                                       for _ in range(n)) + "\n", encoding="utf-8")
    specs = {lang: CorpusSpec(path=str(corpora / f"{lang}.txt")) for lang in WORDS}
    template = work / "template"
    train_vocab(specs, VocabConfig(size=120, sample_sentences=4000), template / "vocab", alpha=0.7, progress=False)
    prepare_corpora(specs, {}, template / "vocab", template / "prepared", PrepareConfig(num_proc=1, heldout_texts=20),
                    progress=False)
    config = work / "config.yaml"
    config.write_text(yaml.safe_dump({
        "output_dir": str(work / "unused"),
        "data": {"languages": list(WORDS), "mono": str(corpora / "{lang}.txt")},
        "prepare": {"num_proc": 1, "heldout_texts": 20},
        "model": TINY,
        "train": {"steps": 6, "batch_size": 8, "seq_len": 32, "warmup_steps": 2, "lr": 1e-3, "log_every": 1,
                  "eval_every": 3, "save_every": 3, "eval_sequences": 2, "precision": "fp32"}}))
    return template, config


def machine() -> dict:
    """What a bench JSON records of the machine (the benches of issue 13 share it)."""
    import torch

    from metaxlm.compute.precision import cpu_model

    return {"cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)), "torch": torch.__version__,
            "python": platform.python_version(), "kernel": platform.release()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", help="working directory (default: a temporary one, removed afterwards)")
    ap.add_argument("--out", default=str(REPO / "runs" / "bench" / "disk_full.json"))
    args = ap.parse_args()

    from metaxlm.io import atomic_write_json

    started = time.perf_counter()
    result: dict = {"bench": "disk_full", "machine": machine()}
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(args.work or scratch)
        work.mkdir(parents=True, exist_ok=True)
        try:
            with tmpfs(work / "probe", 1 << 20):
                pass
        except CannotMount as why:
            result["skipped"] = str(why)
            atomic_write_json(args.out, result)
            print(f"skipped: {why} ({args.out})")
            return
        template, config = build_template(work)
        ref_run = work / "reference"
        shutil.copytree(template, ref_run, dirs_exist_ok=True)
        done = metaxlm("pretrain", str(config), f"output_dir={ref_run}", "--no-progress")
        if done.returncode:
            sys.exit(f"the uninterrupted reference run failed:\n{done.stderr[-3000:]}")
        reference = ref_run / "pretrain" / "xlm"
        scenarios = {}
        for name, fail_in in (("pretrain-model", "model.safetensors"), ("pretrain-optimizer", "optimizer.pt")):
            scenarios[name] = pretrain_scenario(config, template, reference, work, fail_in=fail_in, steps=6)
            print(f"{name}: {scenarios[name]['full_disk']['message']}", flush=True)
        scenarios["prepare"] = prepare_scenario(config, template / "vocab", template / "prepared", work)
        print(f"prepare: {scenarios['prepare']['full_disk']['message']}", flush=True)
    result["scenarios"] = scenarios
    result["all_ok"] = all(_ok(s) for s in scenarios.values())
    result["seconds"] = round(time.perf_counter() - started, 1)
    atomic_write_json(args.out, result)
    print(f"all scenarios as required: {result['all_ok']} ({args.out})")


def _ok(s: dict) -> bool:
    """The requirement: exit 2 with one error line and no traceback, nothing hidden left behind, the last good
    checkpoint verifies and loads (pretrain), and the rerun finishes equal to the uninterrupted run."""
    full = s["full_disk"]
    ok = full["exit_code"] == 2 and len(full["error_lines"]) == 1 and "disk full" in full["message"] \
        and not full["traceback"] and not full["leftovers"]
    if "last_checkpoint" in s:
        ok = ok and s["last_checkpoint"].get("verifies") is True and s["last_checkpoint"].get("loads") is True
    again = s.get("resume") or s.get("rerun")
    return ok and again["finished"] and (again.get("equals_uninterrupted", again.get("equals_reference")) is True)


if __name__ == "__main__":
    main()
