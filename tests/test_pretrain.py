"""The pretraining engine: masking, masked-only logits, resume after SIGKILL (2-process equivalence:
tests/test_two_processes.py),
atomic checkpoints, non-finite loss, reloadable outputs."""

import json
import math
import shutil

import pytest
import torch
from pretrain_helpers import TINY, cli, final_weights, kill_after_checkpoint, make_config, metrics
from transformers import AutoModelForMaskedLM

from metaxlm.config import load_config
from metaxlm.models import build_mlm
from metaxlm.pretrain.objectives.mlm import mask_tokens, masked_lm_loss_sum
from metaxlm.pretrain.variant import run_pretrain
from metaxlm.vocab import load_tokenizer


# -- objective ---------------------------------------------------------------------------------------------
def test_masking_statistics(tokenizer_dir):
    tok = load_tokenizer(tokenizer_dir)
    special = torch.tensor(sorted(set(tok.all_special_ids)))
    ordinary = torch.tensor([i for i in range(len(tok)) if i not in set(special.tolist())])
    ids = torch.randint(5, len(tok) - 1, (400, 128))
    ids[:, 0], ids[:, -1] = tok.cls_token_id, tok.sep_token_id
    inputs, labels = mask_tokens(ids, special_ids=special, mask_id=tok.mask_token_id, ordinary_ids=ordinary,
                                 generator=torch.Generator().manual_seed(0))
    chosen = labels != -100
    n_candidates = ids.numel() - 2 * 400
    assert chosen.sum() / n_candidates == pytest.approx(0.15, abs=0.005)
    assert not chosen[:, 0].any() and not chosen[:, -1].any()  # special tokens are never masked
    assert torch.equal(labels[chosen], ids[chosen]) and torch.equal(inputs[~chosen], ids[~chosen])
    as_mask = (inputs[chosen] == tok.mask_token_id).float().mean()
    kept = (inputs[chosen] == ids[chosen]).float().mean()
    assert as_mask == pytest.approx(0.8, abs=0.01)
    assert kept == pytest.approx(0.1 + 0.1 / len(ordinary), abs=0.01)
    assert not torch.isin(inputs[chosen], special[special != tok.mask_token_id]).any()  # random = ordinary only


def test_masked_only_logits_equal_full_logit_loss(tokenizer_dir):
    from metaxlm.config import ModelConfig

    tok = load_tokenizer(tokenizer_dir)
    model = build_mlm(ModelConfig(**TINY, dropout=0.0, attention_dropout=0.0), tok).eval()
    ids = torch.randint(5, len(tok) - 1, (4, 32))
    labels = torch.full_like(ids, -100)
    where = torch.rand(ids.shape, generator=torch.Generator().manual_seed(1)) < 0.2
    labels[where] = ids[where]
    with torch.no_grad():
        full = model(input_ids=ids, labels=labels).loss * where.sum()
        ours = masked_lm_loss_sum(model, ids, labels)
    assert ours.item() == pytest.approx(full.item(), rel=1e-5)


# -- engine ------------------------------------------------------------------------------------------------
def test_pretrain_writes_reloadable_models_and_metrics(run_template, tmp_path):
    cfg = load_config(make_config(run_template, tmp_path))
    result = run_pretrain(cfg, "xlm", progress=False)
    model = AutoModelForMaskedLM.from_pretrained(str(result.final_dir))
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight  # tying survives
    for ckpt in sorted((result.out_dir / "ckpt").glob("step_*")):
        AutoModelForMaskedLM.from_pretrained(str(ckpt))
    rows = metrics(result.out_dir)
    assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4, 5, 6]
    assert {"heldout_loss/en", "heldout_loss/zh"} <= set(rows[0])  # per-language held-out loss at step 0
    assert set(result.heldout) == {"en", "de", "ru", "zh"}
    assert (result.out_dir / "tb").is_dir()
    assert sorted(p.name for p in (result.out_dir / "ckpt").glob("step_*")) == ["step_00000003", "step_00000006"]


def test_loss_goes_down(run_template, tmp_path):
    cfg = load_config(make_config(run_template, tmp_path, steps=80, eval_every=80, save_every=80, lr=3e-3))
    run_pretrain(cfg, "xlm", progress=False)
    rows = metrics(tmp_path / "run" / "pretrain" / "xlm")
    train = [r["loss"] for r in rows if "loss" in r]
    heldout = [r["heldout_loss/en"] for r in rows if "heldout_loss/en" in r]
    assert train[-1] < train[0] - 0.8
    assert heldout[-1] < heldout[0] - 1.0  # English, the best-sampled language, generalizes


def test_resume_after_sigkill_is_exact(run_template, tmp_path):
    steps = 80
    cfg = make_config(run_template, tmp_path, steps=steps, save_every=10, eval_every=50, keep_checkpoints=50)
    shutil.copytree(run_template, tmp_path / "ref", dirs_exist_ok=True)
    assert cli("pretrain", str(cfg), "--no-progress", f"output_dir={tmp_path / 'ref'}").returncode == 0

    killed_at = kill_after_checkpoint(cfg, tmp_path / "run" / "pretrain" / "xlm" / "ckpt", 30, timeout=120)
    assert killed_at < steps
    resumed = cli("pretrain", str(cfg), "--no-progress", "--resume", zygote=1)  # another hash seed than the reference's
    assert resumed.returncode == 0, resumed.stderr
    a, b = metrics(tmp_path / "ref" / "pretrain" / "xlm"), metrics(tmp_path / "run" / "pretrain" / "xlm")
    assert [r["step"] for r in a] == [r["step"] for r in b]  # no duplicated or missing log lines
    for ra, rb in zip(a, b, strict=True):
        for k in ra:
            if k not in ("tokens_per_s",):
                assert ra[k] == pytest.approx(rb[k], rel=1e-6, abs=1e-7), (ra["step"], k)
    wa, wb = final_weights(tmp_path / "ref" / "pretrain" / "xlm"), final_weights(tmp_path / "run" / "pretrain" / "xlm")
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-6, atol=1e-7)


def test_resume_refuses_a_checkpoint_made_under_other_settings(run_template, tmp_path):
    """A config whose training settings changed since the checkpoint (here 6 -> 4 steps, or another lr) must not
    "resume" it: that mixed a 600-step run into a 200-step config once. Bookkeeping settings may change."""
    from metaxlm.errors import MetaXLMError

    cfg = load_config(make_config(run_template, tmp_path, steps=6, save_every=3))
    run_pretrain(cfg, "xlm", progress=False)
    fewer = load_config(make_config(run_template, tmp_path, steps=4, save_every=3))
    with pytest.raises(MetaXLMError, match=r"steps: 6 in the checkpoint, 4 now"):
        run_pretrain(fewer, "xlm", resume=True, progress=False)
    other_lr = load_config(make_config(run_template, tmp_path, steps=6, save_every=3, lr=5e-4))
    with pytest.raises(MetaXLMError, match=r"lr: 0.001 in the checkpoint, 0.0005 now"):
        run_pretrain(other_lr, "xlm", resume=True, progress=False)
    logged_more = load_config(make_config(run_template, tmp_path, steps=6, save_every=3, log_every=2, eval_every=6))
    run_pretrain(logged_more, "xlm", resume=True, progress=False)  # at its last step: nothing to train, no error


def test_resume_refuses_another_model_start_vocabulary_or_data(run_template, tmp_path, capsys):
    """Not only `train`: a checkpoint records everything its variant's pretraining is computed from — the model
    section (its options too), the variant's start (start_from, init, freeze_body), the vocabulary's files and the
    prepared data by content — and a resume under any other is refused naming it (each of these resumed silently
    once). The unchanged config resumes; a checkpoint that predates the record is compared on what it has."""
    from metaxlm.errors import MetaXLMError
    from metaxlm.models.checkpoint import sha256_file

    variants = "variants={xlm: {}, v: {model: {arch: veco}}}"
    path = make_config(run_template, tmp_path, steps=3, save_every=3)
    base = ["meta.source=pretrain"]  # init's meta model: a few steps on the run's English

    def resume(*overrides: str, variant: str = "xlm"):
        run_pretrain(load_config(path, [*base, variants, *overrides]), variant, resume=True, progress=False)

    for name in ("xlm", "v"):
        run_pretrain(load_config(path, [*base, variants]), name, progress=False)
    resume()  # unchanged: at its last step, nothing to train, no error
    with pytest.raises(MetaXLMError, match=r"model\.options\.cross_attention_init: '\(not set\)' in the checkpoint, "
                                           r"'self' now"):
        resume("variants.v.model={arch: veco, options: {cross_attention_init: self}}", variant="v")
    with pytest.raises(MetaXLMError, match=r"model\.dropout: 0\.1 in the checkpoint, 0\.0 now"):
        resume("model.dropout=0.0")
    final = tmp_path / "run" / "pretrain" / "v" / "final"  # any HF model of the run's vocabulary
    with pytest.raises(MetaXLMError, match=rf"variants\.xlm\.start_from: None in the checkpoint, '{final}' now.*"
                                           r"start: None in the checkpoint, \{'model': '[0-9a-f]{16}'\} now"):
        resume(f"variants.xlm.start_from={final}")
    with pytest.raises(MetaXLMError, match=r"variants\.xlm\.init: 'none' in the checkpoint, 'emb' now"):
        resume("variants.xlm.init=emb")
    with pytest.raises(MetaXLMError, match=r"variants\.xlm\.freeze_body: False in the checkpoint, True now"):
        resume("variants.xlm.freeze_body=true")
    run = tmp_path / "run"
    tokenizer_config = run / "vocab" / "tokenizer_config.json"
    kept = tokenizer_config.read_text()
    tokenizer_config.write_text(kept.replace("{", '{"note": "edited",', 1))  # loads the same, other files
    with pytest.raises(MetaXLMError, match=r"vocab files: '[0-9a-f]{16}' in the checkpoint, '[0-9a-f]{16}' now"):
        resume()
    tokenizer_config.write_text(kept)
    shutil.rmtree(run / "prepared" / "mono" / "ru")  # other rows for one language
    shutil.copytree(run / "prepared" / "mono" / "de", run / "prepared" / "mono" / "ru")
    with pytest.raises(MetaXLMError, match=r"^(?!.*vocab files).*prepared data: '[0-9a-f]{16}' in the checkpoint"):
        resume()

    # a checkpoint from before settings were grouped (train keys, seed, alpha): compared on what it has, the rest
    # said to be unchecked
    state_file = run / "pretrain" / "xlm" / "ckpt" / "step_00000003" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    state["settings"] = {**state["settings"]["train"], "seed": 0, "alpha": state["settings"]["alpha"]}
    state_file.write_text(json.dumps(state))
    checksums = state_file.parent / "checksums.json"  # the edited state is what the checkpoint holds now
    checksums.write_text(json.dumps({**json.loads(checksums.read_text()), state_file.name: sha256_file(state_file)}))
    capsys.readouterr()
    resume()
    assert "predates checkpoints recording model, variants.xlm, vocab files, prepared data, start: those cannot " \
           "be checked" in capsys.readouterr().err
    with pytest.raises(MetaXLMError, match=r"train\.lr: 0\.001 in the checkpoint, 0\.0005 now"):
        resume("train.lr=5e-4")



def test_interrupted_checkpoint_write_keeps_latest_good(run_template, tmp_path, monkeypatch, capsys):
    from metaxlm.compute import precision
    from metaxlm.models import checkpoint

    monkeypatch.setattr(precision, "_announced", set())  # as in a new process: its first `auto` not yet said

    cfg = load_config(make_config(run_template, tmp_path, steps=6, save_every=3))
    real_save = torch.save
    calls = {"n": 0}

    def crashing_save(obj, f, *a, **k):
        calls["n"] += 1
        if calls["n"] == 3:  # the second checkpoint's optimizer state: die mid-checkpoint
            raise OSError("disk full (simulated)")
        return real_save(obj, f, *a, **k)

    monkeypatch.setattr(checkpoint.torch, "save", crashing_save)
    with pytest.raises(OSError, match="simulated"):
        run_pretrain(cfg, "xlm", progress=False)
    ckpt = tmp_path / "run" / "pretrain" / "xlm" / "ckpt"
    assert checkpoint.latest_checkpoint(ckpt).name == "step_00000003"
    AutoModelForMaskedLM.from_pretrained(str(checkpoint.latest_checkpoint(ckpt)))
    first = capsys.readouterr()
    monkeypatch.setattr(checkpoint.torch, "save", real_save)
    run_pretrain(cfg, "xlm", resume=True, progress=False)  # the half-written one is simply redone
    assert checkpoint.latest_checkpoint(ckpt).name == "step_00000006"
    assert not list(ckpt.glob(".tmp-*"))
    resumed = capsys.readouterr()
    # the rerun says that it continues, and from where; each run says its precision once
    assert f"resuming xlm from step 3 (checkpoint {ckpt / 'step_00000003'})\n" in resumed.out
    assert "resuming" not in first.out
    for said in (first, resumed):
        assert (said.out + said.err).count("precision") == 1, said


def test_non_finite_loss_stops_with_clear_message(run_template, tmp_path, monkeypatch):
    from metaxlm.pretrain import engine
    from metaxlm.pretrain.objectives.mlm import MaskedLM

    cfg = load_config(make_config(run_template, tmp_path, steps=6, save_every=2))
    real = MaskedLM.loss_sum
    state = {"calls": 0}

    def poisoned(self, model, tensors):
        state["calls"] += 1
        out = real(self, model, tensors)
        return out * float("nan") if state["calls"] == 5 else out

    monkeypatch.setattr(MaskedLM, "loss_sum", poisoned)
    with pytest.raises(engine.NonFiniteLoss, match=r"loss is nan at step 5.*Last good checkpoint: .*step_00000004"):
        run_pretrain(cfg, "xlm", progress=False)
    ckpt = tmp_path / "run" / "pretrain" / "xlm" / "ckpt"
    assert (ckpt / "latest").read_text().strip() == "step_00000004"


def test_pipeline_compares_xlm_and_metaxlm(run_template, tmp_path, capsys):
    """Phase (a) English MLM -> phase (b) init modes -> one comparison with curves and plots."""
    from metaxlm.pipeline import stage_pretrain
    from metaxlm.report.pretraining import compare_variants

    (tmp_path / "en-de.txt").write_text("cat\tKatze\nhouse\tHaus\nsmall\tklein\n")
    path = make_config(run_template, tmp_path, steps=30, eval_every=10, save_every=30, lr=3e-3)
    cfg = load_config(path, ["meta.source=pretrain", f"meta.dictionaries={tmp_path}/en-{{lang}}.txt",
                             "variants={xlm: {init: none}, metaxlm: {init: both}, "
                             "metaxlm_dict: {init: both, use_dict: true, distill: 0.5}}"])
    comparison = stage_pretrain(cfg, progress=False)
    run = tmp_path / "run"
    assert set(comparison["final"]) == {"xlm", "metaxlm", "metaxlm_dict"}
    # the pretrain stage writes the numbers and shows a summary; the report stage draws the figures
    said = capsys.readouterr().out
    assert f"per language: {run / 'comparison.md'}" in said and "![" not in said and "| de |" not in said
    assert "![" not in (run / "comparison.md").read_text() and not (run / "heldout_curves.png").exists()
    assert compare_variants(run, cfg.variant_order(), pivot=cfg.data.pivot) == comparison
    assert (run / "heldout_curves.png").stat().st_size > 10_000 and (run / "heldout_by_language.png").exists()
    assert "| **mean without en** |" in (run / "comparison.md").read_text()
    assert "![held-out loss against steps](heldout_curves.png)" in (run / "comparison.md").read_text()
    cov = json.loads((run / "pretrain" / "metaxlm_dict" / "coverage.json").read_text())
    assert cov and (run / "pretrain" / "metaxlm_dict" / "coverage.md").exists()
    init = json.loads((run / "pretrain" / "metaxlm_dict" / "init.json").read_text())
    assert init["init"] == "both" and init["dictionaries"] == {"de": f"{tmp_path}/en-de.txt"}
    # the English meta-model's knowledge arrives: before any phase-(b) step, English held-out loss is far lower
    step0 = {v: metrics(run / "pretrain" / v)[0] for v in ("xlm", "metaxlm")}
    assert step0["metaxlm"]["heldout_loss/en"] < step0["xlm"]["heldout_loss/en"] - 0.5
    # a rerun keeps finished variants
    assert stage_pretrain(cfg, progress=False) == comparison


def test_mixes_monolingual_and_parallel_batches_and_resumes_exactly(parallel_template, tmp_path):
    overrides = ["train.objectives={mlm: 1.0, tlm: 0.5}"]
    cfg = load_config(make_config(parallel_template, tmp_path, steps=6, save_every=3, keep_checkpoints=5), overrides)
    run_pretrain(cfg, "xlm", progress=False)
    out = tmp_path / "run" / "pretrain" / "xlm"
    rows = metrics(out)
    assert all(math.isfinite(r["loss"]) for r in rows if "loss" in r)
    # per step: one packed mono batch (8 × 32 tokens, no padding) and one batch of 8 pairs (real tokens only)
    pair_tokens = [r["tokens"] - (r["step"] * 8 * 32) for r in rows if "tokens" in r]
    assert 0 < pair_tokens[0] < 8 * 32 and pair_tokens[-1] > pair_tokens[0]
    assert "loss/tlm" in rows[-1] or any("loss/tlm" in r for r in rows)
    # resume the same run from its step-3 checkpoint: both data streams continue exactly
    again = tmp_path / "again"
    shutil.copytree(tmp_path / "run", again)
    ckpt = again / "pretrain" / "xlm" / "ckpt"
    shutil.rmtree(ckpt / "step_00000006")
    (ckpt / "latest").write_text("step_00000003\n")
    shutil.rmtree(again / "pretrain" / "xlm" / "final")
    cfg2 = load_config(tmp_path / "cfg.yaml", [*overrides, f"output_dir={again}", "train.keep_checkpoints=5"])
    run_pretrain(cfg2, "xlm", resume=True, progress=False)
    wa, wb = final_weights(out), final_weights(again / "pretrain" / "xlm")
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-6, atol=1e-7)


def test_parallel_objective_without_parallel_data_is_a_clear_error(run_template, tmp_path):
    from metaxlm.errors import MetaXLMError

    cfg = load_config(make_config(run_template, tmp_path), ["train.objectives={mlm: 1.0, tlm: 1.0}"])
    with pytest.raises(MetaXLMError, match=r"objectives tlm need parallel data \(pair batches\)"):
        run_pretrain(cfg, "xlm", progress=False)


def test_a_variant_seed_is_its_own_run_and_the_run_seed_by_default(run_template, tmp_path):
    """`variants.<name>.seed` makes one config train a method at several seeds: a variant given the run's seed
    equals the variant without one, bit for bit; another seed draws other weights (initialization, masks)."""
    path = make_config(run_template, tmp_path, steps=2, save_every=2, eval_every=2)
    cfg = load_config(path, ["seed=3", "variants={a: {}, b: {seed: 3}, c: {seed: 4}}"])
    assert [cfg.seed_for(v) for v in ("a", "b", "c")] == [3, 3, 4]
    weights = {v: final_weights(run_pretrain(cfg, v, progress=False).out_dir) for v in ("a", "b", "c")}
    assert all(torch.equal(weights["a"][k], weights["b"][k]) for k in weights["a"])
    assert not torch.equal(weights["a"]["bert.embeddings.word_embeddings.weight"],
                           weights["c"]["bert.embeddings.word_embeddings.weight"])
