"""The tests' forked CLI processes (warm_cli) behave as `python -m metaxlm.cli` does: exit status, stdout, stderr,
stdin, environment; a child is a real process (own pid, killable); the two zygotes' hash seeds differ."""

import os
import signal
import subprocess

import pytest
import warm_cli


@pytest.mark.parametrize("args", [["--version"], ["no-such-command"], ["pretrain", "/nonexistent/cfg.yaml"],
                                  ["translate", "--model", "/nonexistent/model", "--no-progress"]])
def test_a_forked_run_equals_a_fresh_interpreters(args):
    warm = warm_cli.run(args, input="hello\n")
    cold = warm_cli.run(args, input="hello\n", cold=True)
    assert isinstance(warm_cli._zygotes.get(0), warm_cli._Zygote)  # the first one was forked indeed
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)


def test_a_child_gets_the_requests_environment_and_directory(tmp_path, monkeypatch):
    (tmp_path / "c.yaml").write_text("output_dir: [unclosed\n")
    monkeypatch.chdir(tmp_path)  # the relative path is found from the caller's directory
    env = {**os.environ, "WORLD_SIZE": "2", "RANK": "1"}  # an error on another rank than 0 says which
    warm, cold = (warm_cli.run(["pretrain", "c.yaml"], env=env, cold=c) for c in (False, True))
    assert warm.returncode == 2 and "c.yaml" in warm.stderr and "rank 1" in warm.stderr, warm.stderr
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    # a key read at import time sends the command to a fresh interpreter, by itself
    assert isinstance(warm_cli.popen(["--version"], env={**os.environ, "HF_HOME": str(tmp_path)},
                                     stdout=subprocess.DEVNULL), subprocess.Popen)


def test_a_child_is_a_process_of_its_own_that_sigkill_ends(tmp_path):
    done = warm_cli.popen(["--version"], stdout=subprocess.DEVNULL)
    assert isinstance(done, warm_cli.WarmProcess) and done.pid not in (os.getpid(), warm_cli._zygotes[0].proc.pid)
    assert done.wait(60) == 0
    with pytest.raises(ProcessLookupError):  # reaped
        os.kill(done.pid, 0)
    fifo = tmp_path / "cfg.yaml"
    os.mkfifo(fifo)  # reading the config blocks until a writer comes: the child is alive until killed
    blocked = warm_cli.popen(["pretrain", str(fifo)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with pytest.raises(subprocess.TimeoutExpired):
        blocked.wait(0.5)
    assert blocked.poll() is None
    blocked.kill()
    assert blocked.wait(60) == -signal.SIGKILL


def test_the_two_zygotes_hash_strings_differently():
    for k in (0, 1):
        assert warm_cli.run(["--version"], zygote=k).returncode == 0
    seeds = [dict(line.split("=", 1) for line in
                  open(f"/proc/{warm_cli._zygotes[k].proc.pid}/environ").read().split("\0") if "=" in line)
             ["PYTHONHASHSEED"] for k in (0, 1)]
    assert seeds[0] != seeds[1]


def test_a_warm_process_ends_with_the_test_worker_that_started_it():
    """A test run killed hard (SIGKILL of its worker) leaves no warm process behind."""
    import sys
    import time
    from pathlib import Path

    import psutil

    worker = subprocess.Popen([sys.executable, "-c", "import warm_cli; print(warm_cli._warm(0).proc.pid, flush=True); "
                               "import time; time.sleep(600)"], cwd=Path(__file__).parent, stdout=subprocess.PIPE,
                              text=True)
    zygote = psutil.Process(int(worker.stdout.readline()))
    assert zygote.is_running()
    worker.kill()
    worker.wait()
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if zygote.status() == psutil.STATUS_ZOMBIE:  # ended, waiting for whoever adopted it to reap it
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.1)
    pytest.fail(f"the warm process {zygote.pid} outlived its worker")
