"""Multi-process faults, measured (issue 13): a 2-process gloo pretraining run under torchrun, one process killed or
frozen mid-run.

Scenarios (the tiny model and data of bench/disk_full.py, fp32, checkpoints every 20 steps):

  sigkill   rank 1 gets SIGKILL after the checkpoint of step 40: seconds until rank 0 prints its stop message, until
            rank 0 has exited (and with which code), until torchrun has exited; then `--resume` with 2 processes:
            does it finish, and does it equal the uninterrupted 2-process run (the same log lines, bit-identical
            weights and optimizer state)?
  sigkill_rank0   the same with rank 0 (the process that writes checkpoints and logs) killed: rank 1's message
  sigstop   rank 1 is frozen (SIGSTOP) with METAXLM_COLLECTIVE_TIMEOUT=20: seconds until rank 0's message and exit
            (rank 1 is woken with SIGCONT once rank 0 has exited, so that torchrun can end it)

Writes runs/bench/multiprocess_faults.json atomically, with the CPU model and torch version.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from _killsoak import same_state  # noqa: E402
from disk_full import build_template, machine, same_run  # noqa: E402

STEPS, SAVE_EVERY, FAULT_AT, TIMEOUT = 200, 20, 40, 20
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def torchrun(config: Path, run_dir: Path, *args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "torchrun"), "--standalone", "--nproc_per_node=2", "-m", "metaxlm.cli",
            "pretrain", str(config), f"output_dir={run_dir}", "--no-progress", f"train.steps={STEPS}",
            f"train.save_every={SAVE_EVERY}", "train.eval_every=50", "train.keep_checkpoints=50", *args]


def worker(launcher: subprocess.Popen, rank: int):
    import psutil

    while launcher.poll() is None:
        for child in psutil.Process(launcher.pid).children(recursive=True):
            try:
                if child.environ().get("RANK") == str(rank):
                    return child
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        time.sleep(0.05)
    raise RuntimeError(f"torchrun ended before its rank {rank} worker could be found")


def latest_step(ckpt: Path) -> int:
    pointer = ckpt / "latest"
    return int(pointer.read_text().strip().split("_")[1]) if pointer.exists() else 0


def fault(config: Path, run_dir: Path, sig: signal.Signals, env: dict, victim: int = 1) -> dict:
    """Start the run, send `sig` to rank `victim` after the checkpoint of step FAULT_AT, and time what the other
    process (the survivor) and torchrun do."""
    import psutil

    ckpt = run_dir / "pretrain" / "xlm" / "ckpt"
    launcher = subprocess.Popen(torchrun(config, run_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
    lines: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: lines.extend((time.perf_counter(), ln.rstrip("\n"))
                                                           for ln in launcher.stderr), daemon=True)
    reader.start()
    survivor = 1 - victim
    rank0, rank1 = worker(launcher, survivor), worker(launcher, victim)
    while launcher.poll() is None and latest_step(ckpt) < FAULT_AT:
        time.sleep(0.02)
    if launcher.poll() is not None:
        raise RuntimeError(f"the run ended before the fault: {''.join(ln for _, ln in lines)[-2000:]}")
    os.kill(rank1.pid, sig)
    t0, at_step = time.perf_counter(), latest_step(ckpt)
    rank0_exit = None
    while launcher.poll() is None and time.perf_counter() - t0 < 600:
        if rank0_exit is None and (not rank0.is_running() or rank0.status() == psutil.STATUS_ZOMBIE):
            rank0_exit = time.perf_counter() - t0
            if sig == signal.SIGSTOP:
                os.kill(rank1.pid, signal.SIGCONT)  # let torchrun end it
        time.sleep(0.02)
    if launcher.poll() is None:
        launcher.kill()
    launcher.wait()
    reader.join(timeout=10)
    ended = time.perf_counter() - t0
    errors = [(t - t0, ln) for t, ln in lines if ln.startswith("metaxlm: error:")]
    rank0_line = next(((t, ln) for t, ln in errors if f"rank {survivor} stopped" in ln), (None, None))
    summary = "\n".join(ln for _, ln in lines)
    code = None
    marker = f": {survivor} (local_rank: {survivor})"
    for i, (_, ln) in enumerate(lines):
        if marker in ln and i + 1 < len(lines):
            code = lines[i + 1][1].split(":", 1)[1].strip().split(" ")[0]
    return {"signal": sig.name, "victim_rank": victim, "fault_after_checkpoint_step": at_step,
            "survivor_message": rank0_line[1],
            "survivor_message_seconds": None if rank0_line[0] is None else round(rank0_line[0], 2),
            "survivor_exit_seconds": None if rank0_exit is None else round(rank0_exit, 2), "survivor_exit_code": code,
            "torchrun_exit_seconds": round(ended, 2), "torchrun_exit_code": launcher.returncode,
            "other_error_lines": [ln for _, ln in errors if f"rank {survivor} stopped" not in ln],
            "metaxlm_traceback": any(ln.strip().startswith("File ") and "metaxlm" in ln for _, ln in lines),
            "hang": ended >= 600, "last_checkpoint": latest_step(ckpt),
            "stderr_tail": summary.splitlines()[-3:]}


def same_optimizer(a: Path, b: Path) -> bool:
    """Two optimizer.pt files hold the same state, bit for bit (the kill soak's deep comparison)."""
    import torch

    return same_state(torch.load(a, weights_only=True), torch.load(b, weights_only=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", help="working directory (default: a temporary one, removed afterwards)")
    ap.add_argument("--out", default=str(REPO / "runs" / "bench" / "multiprocess_faults.json"))
    args = ap.parse_args()

    from metaxlm.io import atomic_write_json

    started = time.perf_counter()
    result: dict = {"bench": "multiprocess_faults", "machine": machine(), "processes": 2, "backend": "gloo",
                    "steps": STEPS, "save_every": SAVE_EVERY}
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(args.work or scratch)
        work.mkdir(parents=True, exist_ok=True)
        template, config = build_template(work)
        ref = work / "reference"
        shutil.copytree(template, ref, dirs_exist_ok=True)
        t = time.perf_counter()
        done = subprocess.run(torchrun(config, ref), capture_output=True, text=True, env=ENV)
        if done.returncode:
            sys.exit(f"the uninterrupted reference run failed:\n{done.stderr[-3000:]}")
        result["uninterrupted_seconds"] = round(time.perf_counter() - t, 1)
        reference = ref / "pretrain" / "xlm"

        killed = work / "killed"
        shutil.copytree(template, killed, dirs_exist_ok=True)
        sigkill = fault(config, killed, signal.SIGKILL, ENV)
        t = time.perf_counter()
        resumed = subprocess.run(torchrun(config, killed, "--resume"), capture_output=True, text=True, env=ENV)
        run = killed / "pretrain" / "xlm"
        last = f"step_{STEPS:08d}"
        sigkill["resume"] = {"exit_code": resumed.returncode, "seconds": round(time.perf_counter() - t, 1),
                             "finished": resumed.returncode == 0 and (run / "final" / "model.safetensors").exists()}
        if sigkill["resume"]["finished"]:
            sigkill["resume"]["equals_uninterrupted"] = same_run(reference, run, STEPS)
            sigkill["resume"]["optimizer_identical"] = same_optimizer(reference / "ckpt" / last / "optimizer.pt",
                                                                      run / "ckpt" / last / "optimizer.pt")
        print(f"sigkill: {sigkill['survivor_message']} (after {sigkill['survivor_message_seconds']} s; rank 0 exit "
              f"{sigkill['survivor_exit_seconds']} s, torchrun {sigkill['torchrun_exit_seconds']} s)", flush=True)

        killed0 = work / "killed0"  # the writer itself killed
        shutil.copytree(template, killed0, dirs_exist_ok=True)
        sigkill0 = fault(config, killed0, signal.SIGKILL, ENV, victim=0)
        print(f"sigkill rank 0: {sigkill0['survivor_message']} (after {sigkill0['survivor_message_seconds']} s)",
              flush=True)

        frozen = work / "frozen"
        shutil.copytree(template, frozen, dirs_exist_ok=True)
        sigstop = fault(config, frozen, signal.SIGSTOP, {**ENV, "METAXLM_COLLECTIVE_TIMEOUT": str(TIMEOUT)})
        sigstop["collective_timeout"] = TIMEOUT
        print(f"sigstop: {sigstop['survivor_message']} (after {sigstop['survivor_message_seconds']} s)", flush=True)
    result["scenarios"] = {"sigkill": sigkill, "sigkill_rank0": sigkill0, "sigstop": sigstop}
    result["all_ok"] = all(_ok(s) for s in result["scenarios"].values()) and \
        sigkill["resume"].get("equals_uninterrupted") is True and \
        sigkill["resume"].get("optimizer_identical") is True
    result["seconds"] = round(time.perf_counter() - started, 1)
    atomic_write_json(args.out, result)
    print(f"all scenarios as required: {result['all_ok']} ({args.out})")


def _ok(s: dict) -> bool:
    """The survivor stopped with its one message naming the last good checkpoint, exit code 2, no traceback, no
    hang."""
    return s["survivor_message"] is not None and "last good checkpoint" in s["survivor_message"] and \
        s["survivor_exit_code"] == "2" and not s["metaxlm_traceback"] and not s["hang"]


if __name__ == "__main__":
    main()
