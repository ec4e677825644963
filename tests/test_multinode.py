"""Multi-node launch, simulated on this machine (issue 28): two "nodes" of one process each, started as separate
`torchrun` / `python -m metaxlm.launch` invocations (`--nnodes 2`, a c10d rendezvous on 127.0.0.1) and as separate
`accelerate launch` invocations of the shipped multi-node config (`--machine_rank 0/1`), train the same tiny run as
one process and as one node of two processes with the same global batch: the same losses and weights; only global
rank 0 writes. The shipped one-node config (configs/accelerate/ddp-cpu-2proc.yaml) is launched the same way, and a
node that never arrives ends the other with one line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from pretrain_helpers import (
    assert_runs_identical,
    assert_same_losses_and_weights,
    cli,
    latest_step,
    make_config,
)

BIN = Path(sys.executable).parent
ACCELERATE = Path(__file__).resolve().parents[1] / "configs" / "accelerate"
# long enough for one node to be killed midway (after its checkpoint of step 4): a step of this tiny model costs
# ~0.1 s, a launch ~20 s, so every launch trains the same steps and the kill test reuses the uninterrupted two-node run
STEPS = 10
COMMON = ["--no-progress", "train.precision=fp32", "model.dropout=0.0", "model.attention_dropout=0.0",
          "train.grad_accum=2", f"train.steps={STEPS}", "train.save_every=2", "train.eval_every=5",
          "train.keep_checkpoints=20"]
OBJECTIVES = "train.objectives={mlm: 1.0, tlm: 1.0}"
TIMEOUT_S = 600


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_two_nodes(launcher: str, args: list[str]) -> tuple[list[list[str]], list[subprocess.Popen]]:
    """Start the two nodes of one run at once, each its own launcher process (and process group), as on two
    machines."""
    port = free_port()
    commands = []
    for node in (0, 1):
        if launcher == "torchrun":  # node 0 by torchrun itself, node 1 by metaxlm.launch (torchrun's code)
            start = [str(BIN / "torchrun")] if node == 0 else [sys.executable, "-m", "metaxlm.launch"]
            commands.append([*start, "--nnodes=2", "--nproc-per-node=1", f"--node-rank={node}",
                             "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=metaxlm-test",
                             "-m", "metaxlm.cli", *args])
        else:  # the shipped config, one process per "machine" instead of 8 GPUs
            commands.append([str(BIN / "accelerate"), "launch",
                             "--config_file", str(ACCELERATE / "ddp-gpu-multinode.yaml"),
                             "--num_processes=2", f"--machine_rank={node}", "--main_process_ip=127.0.0.1",
                             f"--main_process_port={port}", "-m", "metaxlm.cli", *args])
    # one thread per process, as torchrun sets for several processes per node: two "machines" share two cores
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return commands, [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                       start_new_session=True) for c in commands]


def two_nodes(launcher: str, args: list[str]) -> list[subprocess.CompletedProcess]:
    """The two nodes of one run, to their end."""
    commands, nodes = start_two_nodes(launcher, args)
    done = []
    for node, process in zip(commands, nodes, strict=True):
        out, err = process.communicate(timeout=TIMEOUT_S)
        done.append(subprocess.CompletedProcess(node, process.returncode, out, err))
    return done


def check_launch(out: Path, nodes: list[subprocess.CompletedProcess], references: list[Path]) -> None:
    """A launch of two processes: both ran, it equals each reference run, and global rank 0 alone wrote."""
    for node in nodes:
        assert node.returncode == 0, node.stderr[-3000:]
    for reference in references:
        assert_same_losses_and_weights(reference, out / "pretrain" / "xlm", ("loss", "loss/mlm", "loss/tlm"),
                                       steps=STEPS)
    # two processes trained (a launcher that starts one per node computes the same numbers: the record says)
    assert json.loads((out / "pretrain" / "xlm" / "summary.json").read_text())["processes"] == 2
    # only global rank 0 writes: one "pretrained" line in all the output, one metrics log with each step once
    assert "".join(node.stdout for node in nodes).count("pretrained xlm:") == 1
    steps = [line for line in (out / "pretrain" / "xlm" / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]
    assert len(steps) == STEPS


@pytest.fixture(scope="module")
def reference(parallel_template, tmp_path_factory):
    """The run in one process, and in one node of two processes: the shipped one-node accelerate config."""
    root = tmp_path_factory.mktemp("multinode")
    cfg = make_config(parallel_template, root)
    for name in ("one", "one_node"):
        shutil.copytree(parallel_template, root / name)
    one = cli("pretrain", str(cfg), *COMMON, OBJECTIVES, f"output_dir={root / 'one'}")
    assert one.returncode == 0, one.stderr[-3000:]
    assert json.loads((root / "one" / "pretrain" / "xlm" / "summary.json").read_text())["processes"] == 1
    node = subprocess.run([str(BIN / "accelerate"), "launch", "--config_file", str(ACCELERATE / "ddp-cpu-2proc.yaml"),
                           f"--main_process_port={free_port()}", "-m", "metaxlm.cli", "pretrain", str(cfg), *COMMON,
                           OBJECTIVES, f"output_dir={root / 'one_node'}"], capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    runs = {name: root / name / "pretrain" / "xlm" for name in ("one", "one_node")}
    # the two-node torchrun launch: checked by test_two_nodes_equal_one_node_and_one_process, and the uninterrupted
    # run the kill test's resumed run must equal
    shutil.copytree(root / "one", root / "two_nodes_torchrun", ignore=shutil.ignore_patterns("pretrain"))
    torchrun = two_nodes("torchrun", ["pretrain", str(cfg), *COMMON, OBJECTIVES,
                                      f"output_dir={root / 'two_nodes_torchrun'}"])
    return root, cfg, runs, {"one_node": node, "torchrun": torchrun}


def test_one_node_of_two_processes_equals_one_process(reference):
    """configs/accelerate/ddp-cpu-2proc.yaml starts two processes (accelerate's MULTI_CPU type started one)."""
    root, _, runs, launched = reference
    check_launch(root / "one_node", [launched["one_node"]], [runs["one"]])


@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_two_nodes_equal_one_node_and_one_process(reference, launcher):
    root, cfg, runs, launched = reference
    out = root / f"two_nodes_{launcher}"
    if launcher == "torchrun":  # launched by the fixture
        nodes = launched["torchrun"]
    else:
        shutil.copytree(root / "one", out, ignore=shutil.ignore_patterns("pretrain"))
        nodes = two_nodes(launcher, ["pretrain", str(cfg), *COMMON, OBJECTIVES, f"output_dir={out}"])
    check_launch(out, nodes, [runs["one"], runs["one_node"]])


def test_a_node_that_never_arrives_ends_the_other_with_one_line(reference):
    """`python -m metaxlm.launch` (torchrun's arguments and code): node 0 of 2 waits the rendezvous' join timeout for
    node 1, which is never started, then ends with one line naming the rendezvous, not torchrun's traceback."""
    root, cfg, _, _ = reference
    join_timeout = 5
    started = time.monotonic()
    alone = subprocess.run([sys.executable, "-m", "metaxlm.launch", "--nnodes=2", "--nproc-per-node=1",
                            "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}", "--rdzv-id=alone",
                            f"--rdzv-conf=join_timeout={join_timeout}", "-m", "metaxlm.cli", "pretrain", str(cfg),
                            *COMMON, f"output_dir={root / 'alone'}"], capture_output=True, text=True, timeout=TIMEOUT_S)
    waited = time.monotonic() - started
    assert alone.returncode == 1 and join_timeout <= waited < join_timeout + 60
    lines = alone.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("metaxlm.launch: error: not every node arrived at the rendezvous")
    assert "--nnodes 2" in lines[0] and f"within {join_timeout} s" in lines[0]
    assert not (root / "alone" / "pretrain").exists()  # no worker started


def test_killing_one_node_stops_the_other_and_resume_continues_exactly(reference):
    """Node 1 (its launcher and its worker) SIGKILLed after a checkpoint, as when a machine dies: node 0 stops with
    one line naming the last good checkpoint; both nodes started again with --resume end bit-identical to the
    uninterrupted two-node run (logs, weights)."""
    root, cfg, _, launched = reference
    steps = STEPS
    for node in launched["torchrun"]:  # the uninterrupted two-node run
        assert node.returncode == 0, node.stderr[-3000:]
    shutil.copytree(root / "one", root / "killed", ignore=shutil.ignore_patterns("pretrain"))
    args = ["pretrain", str(cfg), *COMMON, OBJECTIVES, f"output_dir={root / 'killed'}"]
    ckpt = root / "killed" / "pretrain" / "xlm" / "ckpt"
    _, (node0, node1) = start_two_nodes("torchrun", args)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not ((ckpt / "latest").exists() and latest_step(ckpt) >= 4):
            assert time.monotonic() < deadline and node0.poll() is None, "no checkpoint of step 4"
            time.sleep(0.01)
        machine = [node1.pid, *(p.pid for p in psutil.Process(node1.pid).children(recursive=True))]
        for pid in machine:  # the whole "machine": launcher and worker (torchrun starts it in a session of its own)
            os.kill(pid, signal.SIGKILL)
        node1.wait()
        assert latest_step(ckpt) < steps, "the run finished before the kill"
        _, err = node0.communicate(timeout=120)  # no hang
    finally:
        for node in (node0, node1):
            if node.poll() is None:
                os.killpg(node.pid, signal.SIGKILL)
    assert node0.returncode != 0
    stops = [line for line in err.splitlines() if line.startswith("metaxlm: error:")]
    assert len(stops) == 1 and str(ckpt / (ckpt / "latest").read_text().strip()) in stops[0], err[-3000:]
    resumed = two_nodes("torchrun", [*args, "--resume"])
    for node in resumed:
        assert node.returncode == 0, node.stderr[-3000:]
    assert_runs_identical(root / "two_nodes_torchrun" / "pretrain" / "xlm", root / "killed" / "pretrain" / "xlm", steps,
                          files=("model.safetensors",))
