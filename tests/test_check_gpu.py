"""`python -m metaxlm.check_gpu` (`make gpu-check`): without CUDA one line and exit 0; the check's own code — every
measurement it makes on a GPU — run on the CPU (`--device cpu`, a tiny model, 2 steps) on the simulated accelerator
(a tensor on the wrong device fails it): pretraining of MLM and TLM through the engine, the fine-tuning, its
stop-and-resume, and translation steps; MoCo in DDP and MLM in FSDP with two gloo processes; the JSON record; the
bf16 peak table and the FLOPs that MFU counts."""

import json
import os
import subprocess
import sys

import pytest

from metaxlm.check_gpu import (
    NO_CUDA,
    bf16_peak,
    every_objective,
    flops_per_token,
    main,
    mfu,
    non_embedding_parameters,
    run_ddp,
    steady_rate,
)
from metaxlm.run.info import cpu_model

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

DRY_RUN = ["--device", "cpu", "--model", "tiny", "--steps", "2", "--batch-size", "4", "--seq-len", "32",
           "--lines", "300", "--pairs", "200", "--vocab-size", "300", "--objectives", "mlm,tlm"]


def test_without_cuda_one_line_and_exit_0(tmp_path):
    out = tmp_path / "gpu-check.json"
    done = subprocess.run([sys.executable, "-m", "metaxlm.check_gpu", "--out", str(out)], capture_output=True,
                          text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, cwd=tmp_path, timeout=120)
    assert done.returncode == 0
    assert done.stdout == NO_CUDA + "\n"
    assert done.stderr == ""
    assert not out.exists()  # nothing was run, nothing written


def run_main(args: list[str]) -> tuple[int, str]:
    """`main(args)` in this process: (exit status, stdout); the environment variable `--device cpu` sets and the
    progress bars it turns off are put back."""
    import io
    from contextlib import redirect_stdout

    from transformers.utils import logging as hf_logging

    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    printed = io.StringIO()
    try:
        with redirect_stdout(printed):
            status = main(args)
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before
        hf_logging.enable_progress_bar()
    return status, printed.getvalue()


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """The check on the CPU, once for the module: (exit status, stdout, the JSON record, the work dir)."""
    tmp = tmp_path_factory.mktemp("gpu_check")
    work, out = tmp / "work", tmp / "gpu-check.json"
    status, printed = run_main([*DRY_RUN, "--work", str(work), "--out", str(out)])
    return status, printed, json.loads(out.read_text()), work


def test_cpu_dry_run_measures_pretraining_finetuning_and_translation(dry_run):
    status, printed, record, _ = dry_run
    assert status == 0, printed
    assert (record["device"], record["gpu"], record["gpus"]) == ("cpu", None, 0)
    assert record["cpu"] == cpu_model() and record["torch"] and record["precision"] == "fp32"
    assert record["device_check"].startswith("simulated accelerator")
    assert record["bf16_peak_tflops"] is None and record["peak_source"].startswith("unknown peak")
    assert list(record["single"]) == ["mlm", "tlm"]
    for name, run in record["single"].items():
        assert run["objective"] == name and run["device"] == "cpu" and run["processes"] == 1
        assert run["tokens_per_s"] > 0 and run["timed_tokens"] > 0 and run["timed_steps"] == 1
        assert run["flops_per_token"] > 6 * run["non_embedding_params"] > 0
        assert run["mfu"] is None  # no peak for a CPU
        assert run["precision"] == "fp32" and run["loss"] > 0
    assert record["model"]["non_embedding_params"] == record["single"]["mlm"]["non_embedding_params"]
    assert record["finetune"]["tokens_per_s"] > 0 and record["finetune"]["steps"] >= 2
    translation = record["translation"]  # no VECO objective in this run: skipped, and said so
    assert "skipped" in translation and "VECO" in translation["skipped"]
    resume = record["finetune_resume"]  # stopped, RNGs reseeded, resumed: the uninterrupted run's weights
    assert resume["stopped_at"] == 2 and resume["steps"] == 4 and resume["largest_difference"] == 0.0
    assert "skipped" in record["ddp"] and "skipped" in record["fsdp"] and "GPU" in record["fp16"]["skipped"]
    lines = printed.splitlines()
    # the summary follows the runs' own lines (each pretraining run says its precision once, as in `metaxlm run`)
    assert any(ln.startswith("metaxlm gpu check: CPU dry run on a simulated accelerator") for ln in lines)
    assert sum(ln.startswith("pretrain mlm: precision") for ln in lines) == 1
    assert any(ln.startswith("fine-tuning resume: stopped at step 2 of 4") for ln in lines)
    assert any(ln.startswith("pretrain mlm ") and "unknown peak" in ln for ln in lines)
    assert any(ln.startswith("fine-tune (classification)") for ln in lines)


def test_translation_step_and_veco_on_the_cpu(dry_run, tmp_path):
    """The translation step (VECO pretrained, assembled as an encoder-decoder, fine-tuned, `metaxlm translate`'s
    code), on the dry run's data."""
    *_, work = dry_run
    status, printed = run_main([*DRY_RUN[:-1], "veco", "--work", str(work), "--out", str(tmp_path / "veco.json")])
    assert status == 0, printed
    record = json.loads((tmp_path / "veco.json").read_text())
    assert record["single"]["veco"]["arch"] == "veco" and record["single"]["veco"]["tokens_per_s"] > 0
    translation = record["translation"]
    assert translation["finetune_tokens_per_s"] > 0 and translation["sentences"] == 16
    assert translation["generated_tokens"] > 0 and translation["generated_tokens_per_s"] > 0
    assert (work / "translate.de.txt").read_text().count("\n") == 16


def test_ddp_on_two_cpu_processes(dry_run):
    """The DDP step of the check in two gloo processes (torch.distributed.run) on the dry run's data, with MoCo
    alone: its loss leaves the MLM head without gradients, which DDP must be told (it failed on the second step)."""
    *_, work = dry_run
    measured = run_ddp(work, "moco", 2)
    assert "error" not in measured, measured
    assert measured["processes"] == 2 and measured["batch_size"] == 8  # 4 per process
    assert measured["tokens_per_s"] > 0 and measured["device"] == "cpu"


def test_the_fsdp_step_launches_sharded_workers(dry_run, monkeypatch):
    """The FSDP step starts the DDP worker with `--sharding fsdp`, and the worker trains with train.sharding=fsdp
    (here in this process: one process has nothing to shard, so the run trains whole and says so; FSDP itself in
    two gloo processes is tests/test_sharding.py's, on GPUs `make gpu-check`'s)."""
    import subprocess as sp

    from metaxlm.check_gpu import ddp_worker, parse_args

    *_, work = dry_run
    launched = []

    def fake_run(command, **kwargs):
        launched.append(command)
        args = parse_args(command[command.index("--ddp-worker"):])
        assert ddp_worker(args.ddp_worker, args.objectives, args.sharding) == 0
        return sp.CompletedProcess(command, 0)

    monkeypatch.setattr(sp, "run", fake_run)
    measured = run_ddp(work, "mlm", 2, sharding="fsdp")
    assert launched and launched[0][-2:] == ["--sharding", "fsdp"] and "--nproc-per-node=2" in launched[0]
    assert "error" not in measured and measured["objective"] == "mlm" and measured["tokens_per_s"] > 0
    assert (work / "ddp" / "mlm-fsdp.json").exists() and measured["sharding"] == "none"  # one process here


def test_the_dry_run_fails_where_a_gpu_would(monkeypatch, tmp_path, dry_run):
    """The check's CPU dry run is on the simulated accelerator: a batch the engine forgot to move fails it (it passed
    on the plain CPU the dry run used before, for this very defect)."""
    from metaxlm.compute import devices
    from metaxlm.pretrain import engine

    monkeypatch.setattr(engine, "to_device", lambda obj, device: obj)  # the engine as it was: no move
    *_, work = dry_run
    status, printed = run_main([*DRY_RUN[:-1], "mlm", "--no-finetune", "--work", str(work)])
    assert status == 1 and "FAILED pretrain mlm: DeviceMismatch" in printed, printed
    assert devices.DeviceMismatch.__name__ in printed


def test_every_registered_objective_is_checked():
    names = every_objective()
    assert {"mlm", "tlm", "dwa", "moco", "veco"} <= set(names)
    assert names[-2:] == ["veco", "veco_segments"]  # the VECO architecture's, after the BERT ones


@pytest.mark.parametrize(("device", "peak"), [
    ("NVIDIA A100-SXM4-80GB", 312.0), ("NVIDIA A100 80GB PCIe", 312.0), ("NVIDIA H100 80GB HBM3", 989.0),
    ("NVIDIA H100 PCIe", 756.0), ("NVIDIA H100 NVL", 835.0), ("NVIDIA L4", 121.0), ("NVIDIA L40S", 362.0),
    ("NVIDIA A10", 125.0), ("NVIDIA GeForce RTX 4090", 165.0),
])
def test_bf16_peak_by_device_name(device, peak):
    assert bf16_peak(device)[0] == peak


def test_devices_without_a_known_bf16_peak():
    for name in ("Tesla V100-SXM2-16GB", "Tesla T4"):
        peak, why = bf16_peak(name)
        assert peak is None and "no bf16" in why
    for name in ("NVIDIA A10G", "NVIDIA RTX A6000", None):  # not in the table: not mistaken for A10 / A100
        peak, why = bf16_peak(name)
        assert peak is None and why.startswith("unknown peak") and "--peak-tflops" in why
    assert bf16_peak("NVIDIA A10G", 70.0) == (70.0, "--peak-tflops")


def test_flops_and_mfu(dry_run):
    from metaxlm.check_gpu import CheckSettings
    from metaxlm.models import build_mlm
    from metaxlm.vocab import load_tokenizer

    *_, work = dry_run
    model = build_mlm(CheckSettings(model="tiny").model_config(), load_tokenizer(work / "bench" / "vocab"))
    n = non_embedding_parameters(model)
    assert 0 < n < sum(p.numel() for p in model.parameters())
    assert flops_per_token(model, 128) == 6 * n + 12 * 2 * 32 * 128
    assert mfu(1e6, 2e8, 2, 100.0) == pytest.approx(1e6 * 2e8 / (2 * 100e12))
    assert mfu(1e6, 2e8, 1, None) is None


def test_the_first_step_is_left_out_of_the_rate():
    records = [{"step": 1, "tokens": 100, "tokens_per_s": 10.0},      # 10 s: warm-up
               {"step": 2, "tokens": 300, "tokens_per_s": 200.0},     # 200 tokens in 1 s
               {"step": 2, "heldout_loss/mean": 3.0},                 # an evaluation line
               {"step": 3, "tokens": 700, "tokens_per_s": 400.0}]     # 400 tokens in 1 s
    assert steady_rate(records) == (300.0, 2.0, 600)
    assert steady_rate(records[:1]) == (10.0, 10.0, 100)
