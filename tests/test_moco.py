"""PPA's contrastive sentence alignment (pretrain/objectives/moco.py), random input shuffling shared with TLM, and
MLM on pair sides (PPA's "replace TLM by MLM")."""

import math

import pytest
import torch
import torch.nn.functional as F
from pretrain_helpers import (
    TINY,
    check_resume_after_sigkill,
    make_config,
    metrics,
)
from safetensors.torch import load_file

from metaxlm.config import ModelConfig, load_config
from metaxlm.errors import ConfigError
from metaxlm.models import build_mlm
from metaxlm.pretrain.batches import Batch, PairSidesSource, PairSource, load_prepared, swap_pair_order
from metaxlm.pretrain.objectives import ObjectiveContext, build_objectives
from metaxlm.pretrain.objectives.moco import info_nce_sum
from metaxlm.pretrain.variant import run_pretrain
from metaxlm.vocab import load_tokenizer


@pytest.fixture(scope="module")
def tok(tokenizer_dir):
    return load_tokenizer(tokenizer_dir)


def tiny_model(tok, seed=3):
    torch.manual_seed(0)
    return build_mlm(ModelConfig(**{**TINY, "dropout": 0.0, "attention_dropout": 0.0}), tok, seed=seed)


def objectives(model, tok, spec):
    return build_objectives(spec, ObjectiveContext(tokenizer=tok, model_config=model.config, model=model, seed=0))


def moco(model, tok, **options):
    return objectives(model, tok, {"moco": {"weight": 1.0, **options}})["moco"]


def sides_batch(tok, pairs, swap):
    """A `pair_sides` batch of (src, tgt) id lists, with the given order coins."""
    bos, eos, pad = tok.cls_token_id, tok.sep_token_id, tok.pad_token_id
    out = {}
    for name, k in (("src", 0), ("tgt", 1)):
        rows = [[bos, *p[k], eos] for p in pairs]
        width = max(map(len, rows))
        ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
        out[f"{name}_ids"], out[f"{name}_mask"] = ids, (ids != pad).long()
    return Batch("pair_sides", ["en-de"] * len(pairs), {**out, "swap": torch.tensor(swap)})


def pairs_of(tok, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    special = set(tok.all_special_ids)
    ordinary = torch.tensor([i for i in range(len(tok)) if i not in special])
    return [(ordinary[torch.randint(len(ordinary), (1 + k % 4,), generator=g)].tolist(),
             ordinary[torch.randint(len(ordinary), (2 + k % 5,), generator=g)].tolist()) for k in range(n)]


def test_lr_scale_applies_to_the_objectives_own_modules_only(tok):
    from transformers import get_linear_schedule_with_warmup

    from metaxlm.compute.optim import adamw
    from metaxlm.pretrain.engine import ObjectiveModule

    model = tiny_model(tok)
    module = ObjectiveModule(model, {"moco": moco(model, tok, queue_size=8, lr_scale=10.0)})
    opt = adamw(module.named_parameters(), lr=1e-4, weight_decay=0.01,
                lr_scales={"objectives.moco.": 10.0})
    lr_of = {id(p): (g["lr"], g["weight_decay"]) for g in opt.param_groups for p in g["params"]}
    for name, p in module.named_parameters():
        if not p.requires_grad:
            assert id(p) not in lr_of, name  # the momentum encoder is never optimized
            continue
        lr, wd = lr_of[id(p)]
        assert lr == pytest.approx(1e-3 if name.startswith("objectives.moco.query_head") else 1e-4), name
        assert wd == (0.0 if p.ndim < 2 else 0.01), name
    sched = get_linear_schedule_with_warmup(opt, 2, 10)
    opt.step()
    sched.step()
    lrs = sorted({g["lr"] for g in opt.param_groups})
    assert lrs == pytest.approx([0.5e-4, 0.5e-3])  # the schedule scales every group alike


# -- the formula, the EMA, the queue ----------------------------------------------------------------------------------
def test_info_nce_equals_the_formula():
    q, k, queue = F.normalize(torch.randn(3, 4), dim=1), F.normalize(torch.randn(3, 4), dim=1), torch.randn(5, 4)
    tau = 0.05
    direct = 0.0
    for i in range(3):
        pos = torch.exp(q[i] @ k[i] / tau)
        direct += -torch.log(pos / (pos + torch.exp(queue @ q[i] / tau).sum()))
    torch.testing.assert_close(info_nce_sum(q, k, queue, tau), direct)


def test_ema_update_rule(tok):
    model = tiny_model(tok)
    obj = moco(model, tok, momentum=0.9, queue_size=8)
    query = dict(model.base_model.named_parameters())
    with torch.no_grad():
        for p in query.values():
            p.add_(torch.randn_like(p))
        for p in obj.query_head.parameters():
            p.add_(torch.randn_like(p))
    before = {k: v.clone() for k, v in obj.key_encoder.named_parameters()}
    head_before = {k: v.clone() for k, v in obj.key_head.named_parameters()}
    obj.after_step(model)
    for k, v in obj.key_encoder.named_parameters():
        torch.testing.assert_close(v, 0.9 * before[k] + 0.1 * query[k])
    for k, v in obj.key_head.named_parameters():
        torch.testing.assert_close(v, 0.9 * head_before[k] + 0.1 * dict(obj.query_head.named_parameters())[k])
    assert not any(p.requires_grad for p in obj.key_encoder.parameters())


def test_queue_is_fifo_and_wraps_around(tok):
    obj = moco(tiny_model(tok), tok, queue_size=5, projection_dim=2)
    keys = torch.arange(16, dtype=torch.float).view(8, 2)
    obj.enqueue(keys[:3])
    assert int(obj.queue_ptr) == 3 and torch.equal(obj.queue[:3], keys[:3])
    obj.enqueue(keys[3:6])  # 5 is not a multiple of 3: wraps
    assert int(obj.queue_ptr) == 1
    assert torch.equal(obj.queue, torch.stack([keys[5], keys[1], keys[2], keys[3], keys[4]]))
    obj.enqueue(keys)  # more keys than K: the last K, oldest first from the pointer
    assert int(obj.queue_ptr) == (1 + 5) % 5
    assert sorted(obj.queue[:, 0].tolist()) == keys[3:, 0].tolist()
    assert int(obj.queued) == 3 + 3 + 5


# -- random input shuffling --------------------------------------------------------------------------------------------
def test_shuffling_sends_both_languages_to_both_encoders(tok, parallel_template):
    source = PairSidesSource(load_prepared(parallel_template / "prepared", "parallel"), seq_len=32, alpha=0.7, seed=0,
                             tokenizer=tok)
    model = tiny_model(tok)
    for shuffle in (True, False):
        obj = moco(model, tok, shuffle=shuffle, queue_size=8)
        seen = {"q": set(), "k": set()}
        for _ in range(4):
            batch = source.next_batch(8)
            prep = obj.prepare(batch, torch.Generator())
            src_rows = {tuple(r[m.bool()].tolist())
                        for r, m in zip(batch.tensors["src_ids"], batch.tensors["src_mask"], strict=True)}
            for role in ("q", "k"):
                for r, m in zip(prep.tensors[f"{role}_ids"], prep.tensors[f"{role}_mask"], strict=True):
                    seen[role].add("en" if tuple(r[m.bool()].tolist()) in src_rows else "de")
        if shuffle:
            assert seen == {"q": {"en", "de"}, "k": {"en", "de"}}
        else:
            assert seen == {"q": {"en"}, "k": {"de"}}


def test_tlm_order_and_moco_query_follow_the_same_coin(tok, parallel_template):
    data = load_prepared(parallel_template / "prepared", "parallel")
    pair, sides = (cls(data, seq_len=32, alpha=0.7, seed=1, tokenizer=tok) for cls in (PairSource, PairSidesSource))
    model = tiny_model(tok)
    objs = objectives(model, tok, {"tlm": {"order": "shuffled", "mask_prob": 0.01}, "moco": {"queue_size": 8}})
    for _ in range(3):
        pb, sb = pair.next_batch(8), sides.next_batch(8)
        assert torch.equal(pb.tensors["swap"], sb.tensors["swap"]) and 0 < int(pb.tensors["swap"].sum()) < 8
        tlm = objs["tlm"].prepare(pb, torch.Generator().manual_seed(0))
        q = objs["moco"].prepare(sb, torch.Generator())
        for i in range(8):
            first = swap_pair_order(pb).tensors["input_ids"][i]
            query = q.tensors["q_ids"][i][q.tensors["q_mask"][i].bool()]
            # TLM's row starts with the side MoCo queries with: `<s> query </s> other </s>`
            assert torch.equal(first[:len(query)], query)
            assert tlm.tensors["input_ids"].shape == pb.tensors["input_ids"].shape


def test_swap_pair_order_moves_sides_with_their_tokens(tok):
    bos, eos, pad = tok.cls_token_id, tok.sep_token_id, tok.pad_token_id
    ids = torch.tensor([[bos, 11, 12, eos, 21, eos, pad], [bos, 13, eos, 22, 23, 24, eos]])
    side = torch.tensor([[-1, 0, 0, -1, 1, -1, -1], [-1, 0, -1, 1, 1, 1, -1]])
    batch = Batch("pair", ["en-de"] * 2, {"input_ids": ids, "attention_mask": (ids != pad).long(), "side": side,
                                          "swap": torch.tensor([True, False])})
    out = swap_pair_order(batch).tensors
    assert out["input_ids"][0].tolist() == [bos, 21, eos, 11, 12, eos, pad]
    assert out["side"][0].tolist() == [-1, 1, -1, 0, 0, -1, -1]
    assert torch.equal(out["input_ids"][1], ids[1]) and torch.equal(out["side"][1], side[1])
    # one-token sides
    one = Batch("pair", ["en-de"], {"input_ids": torch.tensor([[bos, 11, eos, 21, eos]]),
                                    "attention_mask": torch.ones(1, 5, dtype=torch.long),
                                    "side": torch.tensor([[-1, 0, -1, 1, -1]]), "swap": torch.tensor([True])})
    assert swap_pair_order(one).tensors["input_ids"][0].tolist() == [bos, 21, eos, 11, eos]


def test_dwa_reads_tlms_shuffled_pairs_consistently(tok, parallel_template):
    data = load_prepared(parallel_template / "prepared", "parallel")
    batch = PairSource(data, seq_len=32, alpha=0.7, seed=0, tokenizer=tok).next_batch(8)
    model = tiny_model(tok)
    objs = objectives(model, tok, {"tlm": {"order": "shuffled"}, "dwa": 1.0})
    tlm = objs["tlm"].prepare(batch, torch.Generator().manual_seed(0))
    dwa = objs["dwa"].prepare_shared(batch, torch.Generator().manual_seed(1), tlm)
    swapped = swap_pair_order(batch).tensors
    assert torch.equal(dwa.tensors["orig_ids"], swapped["input_ids"])
    masked = tlm.tensors["labels"] != -100
    assert torch.equal(tlm.tensors["labels"][masked], swapped["input_ids"][masked])


# -- learning ----------------------------------------------------------------------------------------------------------
def test_moco_loss_falls_when_overfitting_a_few_pairs(tok):
    model = tiny_model(tok, seed=5)
    obj = moco(model, tok, queue_size=12, momentum=0.9)
    # negatives: the keys of 12 other pairs (the training pairs' own keys are not enqueued, so a positive is never
    # also a negative and the loss can approach 0)
    others = sides_batch(tok, pairs_of(tok, 12, seed=7), [False] * 12)
    obj.enqueue(obj.label(model, obj.prepare(others, torch.Generator())).tensors["keys"])
    batch = sides_batch(tok, pairs_of(tok, 6, seed=1), [True, False, True, False, False, True])
    opt = torch.optim.Adam([*model.parameters(), *obj.query_head.parameters()], lr=1e-3)
    losses = []
    for _ in range(30):
        prep = obj.label(model, obj.prepare(batch, torch.Generator()))
        opt.zero_grad()
        loss = obj.loss_sum(model, prep.tensors) / prep.num_targets
        loss.backward()
        opt.step()
        obj.momentum_update(model)
        losses.append(loss.item())
        assert prep.tensors["keys"].grad_fn is None  # the momentum forward runs without autograd
    assert losses[0] == pytest.approx(math.log(13), abs=0.3)  # a random model: the positive is like any negative
    assert losses[-1] < 0.1 * losses[0], (losses[0], losses[-1])


def test_bad_options_are_errors_naming_the_key(tok):
    model = tiny_model(tok)
    with pytest.raises(ConfigError, match=r"moco\.queue_size"):
        moco(model, tok, queue_size=0)
    with pytest.raises(ConfigError, match=r"moco\.pooling"):
        moco(model, tok, pooling="max")
    with pytest.raises(ConfigError, match="momentum encoder"):
        build_objectives({"moco": 1.0}, ObjectiveContext(tokenizer=tok, model_config=model.config))


def test_mlm_on_pair_sides_masks_each_side_alone(tok):
    model = tiny_model(tok)
    obj = objectives(model, tok, {"mlm_sides": {"mask_prob": 0.5}})["mlm_sides"]
    batch = sides_batch(tok, pairs_of(tok, 4), [False] * 4)
    prep = obj.prepare(batch, torch.Generator().manual_seed(0))
    width = batch.tensors["src_ids"].shape[1]
    labels = prep.tensors["labels"]
    assert prep.num_targets == int((labels != -100).sum()) > 0
    for side, part in (("src", labels[:, :width]), ("tgt", labels[:, width:])):
        chosen = part != -100
        assert torch.equal(part[chosen], batch.tensors[f"{side}_ids"][chosen])
    loss = obj.loss_sum(model, prep.tensors)
    assert loss.requires_grad and loss.item() > 0


# -- in the engine: resume with the queue, export ----------------------------------------------------------------------
MOCO_RUN = "train.objectives={moco: {weight: 1.0, queue_size: 10, lr_scale: 10.0}, tlm: {weight: 1.0, order: shuffled}}"


def test_moco_in_a_run_exports_the_query_encoder_and_keeps_its_state(parallel_template, tmp_path, tok):
    cfg = load_config(make_config(parallel_template, tmp_path, steps=3),
                      [MOCO_RUN.replace("queue_size: 10", "queue_size: 12"), "variants={x: {init: none}}"])
    run_pretrain(cfg, "x", progress=False)
    out = tmp_path / "run" / "pretrain" / "x"
    rows = metrics(out)
    assert len([r for r in rows if "loss/moco" in r]) == 3
    assert [r["eval/moco/queue_filled"] for r in rows if "eval/moco/queue_filled" in r][-1] == 1.0  # 3 × 8 > 12
    from transformers import AutoModel

    AutoModel.from_pretrained(str(out / "final"))
    state = load_file(str(out / "final" / "objectives.safetensors"))
    assert {"moco.queue", "moco.queue_ptr", "moco.query_head.0.weight", "moco.key_head.2.weight"} <= set(state)
    assert any(k.startswith("moco.key_encoder.") for k in state)
    assert int(state["moco.queue_ptr"]) == (3 * 8) % 12
    # the state continues training
    model = tiny_model(tok)
    obj = moco(model, tok, queue_size=12, state=str(out / "final"))
    torch.testing.assert_close(obj.queue, state["moco.queue"])
    with pytest.raises(ConfigError, match="moco.state"):
        moco(model, tok, queue_size=5, state=str(out / "final"))


def test_resume_after_sigkill_is_exact_with_moco(parallel_template, tmp_path):
    ckpt = check_resume_after_sigkill(parallel_template, tmp_path, MOCO_RUN, steps=16, save_every=4, kill_at=6,
                                      eval_every=8)
    state = load_file(str(ckpt / f"step_{16:08d}" / "objectives.safetensors"))
    assert int(state["moco.queue_ptr"]) == (16 * 8) % 10
