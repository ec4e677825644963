"""One run per directory (metaxlm.run.lock): a second command writing a run directory is refused in one line
naming the holder; a killed holder leaves nothing stuck; the ranks of one launched run and evaluations split side by
side are not refused."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from metaxlm.cli import main
from metaxlm.run.layout import RunDir
from metaxlm.run.lock import Busy, held, holders, run_dir_held

HOLD = """
import os, sys, time
from metaxlm.run.lock import held
with held(sys.argv[1], sys.argv[2], shared=sys.argv[3] == "shared"):
    ready, say_ready = os.pipe()
    worker = os.fork() if len(sys.argv) > 4 else -1  # a worker forked by the holder, which outlives it
    if worker == 0:
        os.write(say_ready, b"x")  # Python code runs in the child only after the at-fork hooks have
        time.sleep(120)
        os._exit(0)
    if worker > 0:
        os.read(ready, 1)  # "held" only once the worker is past its fork (on a loaded machine it starts late)
    print("held", worker, flush=True)
    time.sleep(120)
"""


@pytest.fixture
def holder():
    """Start a process that holds a lock file: holder(lock_file, what, shared=False, fork=False) -> Popen, once it
    holds it. Every process started (and the worker it forked) is killed at the end."""
    started, workers = [], []

    def start(lock_file: Path, what: str, *, shared: bool = False, fork: bool = False) -> subprocess.Popen:
        args = [sys.executable, "-c", HOLD, str(lock_file), what, "shared" if shared else "alone"] + (["fork"] * fork)
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        started.append(proc)
        said, worker = proc.stdout.readline().split()
        assert said == "held"
        if int(worker) > 0:
            workers.append(int(worker))
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for pid in workers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _config(tmp_path: Path) -> Path:
    corpus = tmp_path / "en.txt"
    corpus.write_text("the cat sleeps\n" * 20)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump({"output_dir": str(tmp_path / "run"), "data": {"languages": ["en"],
                                                                             "mono": {"en": str(corpus)}},
                                    "vocab": {"size": 50}, "prepare": {"num_proc": 1}}))
    return path


def test_a_second_run_is_refused_in_one_line_naming_the_holder(tmp_path, holder):
    config = _config(tmp_path)
    run = RunDir(tmp_path / "run")
    first = holder(run.lock, "metaxlm run")
    start = time.monotonic()
    second = subprocess.run([sys.executable, "-m", "metaxlm.cli", "run", str(config), "--no-progress"],
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 2
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
    message = lines[0]
    assert message.startswith(f"metaxlm: error: {run.root} is in use by metaxlm run (pid {first.pid} on "
                              f"{socket.gethostname()}, since 20"), message
    assert "metaxlm run refused" in message
    assert time.monotonic() - start < 60  # at once: before any stage
    assert not run.vocab.exists() and not run.run_info.exists()  # the refused run wrote nothing


def test_every_writing_command_is_refused_while_a_run_holds_the_directory(tmp_path, holder, capsys):
    config = _config(tmp_path)
    run = RunDir(tmp_path / "run")
    first = holder(run.lock, "metaxlm run")
    (run.root / "eval").mkdir()
    for argv in (["run", str(config), "stages=[evaluate]"], ["evaluate", str(config)], ["vocab", "train", str(config)],
                 ["pretrain", str(config)], ["data", "stats", str(config)], ["report", str(run.root)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"in use by metaxlm run (pid {first.pid} on" in err and len(err.strip().splitlines()) == 1, (argv, err)


def test_a_killed_holder_leaves_nothing_stuck(tmp_path, holder):
    """SIGKILL: no handler runs, the lock file and its record stay; the kernel releases the flock. A worker the holder
    forked, alive after it, does not keep the lock."""
    lock = RunDir(tmp_path / "run").lock
    first = holder(lock, "metaxlm run", fork=True)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert lock.exists()
    with held(lock, "metaxlm run"):  # proceeds
        assert [r["pid"] for r in holders(lock)] == [os.getpid()]


def test_the_ranks_of_one_launched_run_are_not_refused(tmp_path, holder, monkeypatch):
    out = tmp_path / "run"
    holder(RunDir(out).lock, "metaxlm run")  # rank 0 of the launch
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    with run_dir_held(out, "metaxlm run"):  # the other rank of the same launch
        pass
    monkeypatch.setenv("RANK", "0")  # rank 0 of another launch
    with pytest.raises(Busy), run_dir_held(out, "metaxlm run"):
        pass


def test_evaluations_split_side_by_side_share_the_directory(tmp_path, holder, capsys):
    """`metaxlm run CONFIG stages=[evaluate]` (or `metaxlm evaluate`) beside another evaluation of the run: allowed;
    anything else that writes the directory waits for them."""
    config = _config(tmp_path)
    run = RunDir(tmp_path / "run")
    first = holder(run.lock, "metaxlm run", shared=True)  # an evaluation, e.g. with evaluate.seeds=[0]
    with run_dir_held(run.root, "metaxlm run", ["evaluate"]):  # a second one, e.g. seeds [1]
        assert sorted(r["pid"] for r in holders(run.lock)) == sorted([first.pid, os.getpid()])
    assert [r["pid"] for r in holders(run.lock)] == [first.pid]  # released: its record says so
    # through the command line: not refused (it stops later, as the config has nothing to evaluate)
    for argv in (["run", str(config), "stages=[evaluate]"], ["evaluate", str(config)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "is in use" not in err and "nothing to evaluate" in err, err
    # a run with other stages, and a report into the run directory, are refused while evaluations run
    assert main(["run", str(config)]) == 2
    assert f"in use by metaxlm run (pid {first.pid} on" in capsys.readouterr().err
    assert main(["report", str(run.root)]) == 2
    assert "--out DIR" in capsys.readouterr().err
    # and an evaluation is refused while a run holds the directory alone
    first.kill()
    first.wait()
    holder(run.lock, "metaxlm pretrain")
    with pytest.raises(Busy, match="in use by metaxlm pretrain .*evaluation shares it only with other evaluations"), \
            run_dir_held(run.root, "metaxlm evaluate", ["evaluate"]):
        pass


def test_side_by_side_evaluations_never_fine_tune_the_same_run(tmp_path, holder):
    """Each fine-tuning run (language, seed) of a task is held by the evaluation that trains it."""
    from metaxlm.finetune.run_store import RunStore
    from metaxlm.finetune.runner import TrainingRunner

    runs_dir = tmp_path / "finetune" / "mt" / "supervised-runs"
    first = holder(runs_dir / "de-seed0.lock", "fine-tuning mt de seed 0")
    runner = TrainingRunner(SimpleNamespace(name="mt"), tmp_path, None, progress=False, store=RunStore(runs_dir, "k"))
    with pytest.raises(Busy, match=rf"fine-tuning run .*de-seed0 is in use by fine-tuning mt de seed 0 \(pid "
                                   rf"{first.pid} on .*evaluate.seeds"):
        runner.train_and_test([], {"de": []}, 0, "de")
