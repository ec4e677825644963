"""Sharded training (issue 28): `train.sharding: fsdp` — torch's FSDP (`fully_shard`, FSDP2) on CPU with gloo, the
same code as on GPUs — in 2 processes equals one process within float tolerance (losses, final weights, the
objectives' heads) for MLM, TLM, DWA and MoCo together (VECO: tests/test_veco.py); its `final/` loads with
`AutoModelForMaskedLM.from_pretrained`; a sharded run resumed from a checkpoint ends bit-identical to the
uninterrupted one (weights, optimizer state, objectives' states such as MoCo's queue); launches that would not train
what the config says are refused in one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from pretrain_helpers import (
    assert_runs_identical,
    assert_same_losses_and_weights,
    cli,
    final_weights,
    make_config,
)
from safetensors.torch import load_file

from metaxlm.errors import MetaXLMError
from metaxlm.pretrain.engine import check_launch

TORCHRUN = Path(sys.executable).parent / "torchrun"
STEPS = 4
OBJECTIVES = "train.objectives={mlm: 1.0, tlm: 1.0, dwa: 1.0, moco: 1.0}"
COMMON = ["--no-progress", "train.precision=fp32", "model.dropout=0.0", "model.attention_dropout=0.0",
          "train.grad_accum=2", f"train.steps={STEPS}", "train.save_every=2", "train.eval_every=2",
          "train.keep_checkpoints=5", OBJECTIVES]
NAMES = ("loss", "loss/mlm", "loss/tlm", "loss/dwa", "loss/moco")


def torchrun(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(TORCHRUN), "--standalone", "--nproc_per_node=2", "-m", "metaxlm.cli", *args],
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def runs(parallel_template, tmp_path_factory):
    """One process, and 2 processes sharded: the same config, the same global batch."""
    root = tmp_path_factory.mktemp("sharding")
    cfg = make_config(parallel_template, root)
    for name in ("one", "fsdp"):
        shutil.copytree(parallel_template, root / name)
    # with one process train.sharding=fsdp has nothing to shard: the model trains whole
    one = cli("pretrain", str(cfg), *COMMON, "train.sharding=fsdp", f"output_dir={root / 'one'}")
    assert one.returncode == 0, one.stderr[-3000:]
    fsdp = torchrun("pretrain", str(cfg), *COMMON, "train.sharding=fsdp", f"output_dir={root / 'fsdp'}")
    assert fsdp.returncode == 0, fsdp.stderr[-3000:]
    return SimpleNamespace(root=root, cfg=cfg, one=root / "one" / "pretrain" / "xlm",
                           fsdp=root / "fsdp" / "pretrain" / "xlm")


def test_fsdp_equals_one_process_for_mlm_tlm_dwa_and_moco(runs):
    assert_same_losses_and_weights(runs.one, runs.fsdp, NAMES, steps=STEPS)
    ha, hb = (load_file(str(d / "final" / "objectives.safetensors")) for d in (runs.one, runs.fsdp))
    assert ha.keys() == hb.keys() and any(k.startswith("dwa.") for k in ha) and "moco.queue" in ha
    for k in ha:  # DWA's pointer head, MoCo's heads, momentum encoder and queue
        torch.testing.assert_close(ha[k], hb[k], rtol=1e-4, atol=1e-5)
    summary = json.loads((runs.fsdp / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["sharding"] == "fsdp"
    assert json.loads((runs.one / "summary.json").read_text())["sharding"] == "none"
    assert set(summary["heldout_loss"]) == set(json.loads((runs.one / "summary.json").read_text())["heldout_loss"])


def test_a_sharded_runs_final_model_loads_with_from_pretrained(runs):
    from transformers import AutoModelForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(runs.fsdp / "final")
    saved = final_weights(runs.fsdp)
    state = model.state_dict()
    for k, v in saved.items():  # whole tensors, not one process's shard
        assert torch.equal(state[k], v), k


def test_a_sharded_run_resumes_exactly(runs):
    """Resumed (2 processes, sharded) from its step-2 checkpoint: the same logs and bit-identical weights,
    objectives' states (MoCo's queue, DWA's head) and optimizer state at the end."""
    resumed = runs.root / "fsdp_resumed"
    shutil.copytree(runs.root / "fsdp", resumed)
    variant = resumed / "pretrain" / "xlm"
    again = torchrun("pretrain", str(runs.cfg), *COMMON, "train.sharding=fsdp", f"output_dir={resumed}",
                     "--resume-from", str(variant / "ckpt" / "step_00000002"))
    assert again.returncode == 0, again.stderr[-3000:]
    assert_runs_identical(runs.fsdp, variant, STEPS)
    a, b = (torch.load(d / "ckpt" / f"step_{STEPS:08d}" / "optimizer.pt", weights_only=True)
            for d in (runs.fsdp, variant))
    def settings(groups):  # betas come back from torch's loader as a list: the same numbers
        return [{k: list(v) if isinstance(v, tuple) else v for k, v in g.items()} for g in groups]

    assert settings(a["param_groups"]) == settings(b["param_groups"]) and a["state"].keys() == b["state"].keys()
    for name, moments in a["state"].items():  # whole moments keyed by parameter name
        for k, v in moments.items():
            assert torch.equal(v, b["state"][name][k]), (name, k)


def test_launches_that_would_not_train_the_config_are_refused(monkeypatch):
    from accelerate.utils import DistributedType

    alone = SimpleNamespace(distributed_type=DistributedType.NO, num_processes=1)
    monkeypatch.setenv("WORLD_SIZE", "1")
    check_launch(alone)  # one process, as launched
    monkeypatch.setenv("WORLD_SIZE", "2")  # accelerate's FSDP config on a machine without GPUs does this
    with pytest.raises(MetaXLMError, match=r"started 2 processes .* each would train alone"):
        check_launch(alone)
    for kind in (DistributedType.FSDP, DistributedType.DEEPSPEED):
        with pytest.raises(MetaXLMError, match="train.sharding=fsdp"):
            check_launch(SimpleNamespace(distributed_type=kind, num_processes=2))
