"""XLM-Align's denoising word alignment (pretrain/objectives/dwa.py) and the self-labelling aligner's options."""

import math

import pytest
import torch
from pretrain_helpers import (
    TINY,
    check_resume_after_sigkill,
    make_config,
    metrics,
)
from safetensors.torch import load_file

from metaxlm.alignment import OTAlignment, kernel_similarity, ot_links
from metaxlm.config import ModelConfig, load_config
from metaxlm.data.padding import IGNORE
from metaxlm.errors import ConfigError
from metaxlm.models import build_mlm
from metaxlm.pretrain.batches import Batch
from metaxlm.pretrain.objectives import ObjectiveContext, build_objectives
from metaxlm.pretrain.objectives.dwa import default_label_layer
from metaxlm.pretrain.variant import run_pretrain
from metaxlm.vocab import load_tokenizer


@pytest.fixture(scope="module")
def tok(tokenizer_dir):
    return load_tokenizer(tokenizer_dir)


@pytest.fixture(scope="module")
def model(tok):
    torch.manual_seed(0)
    return build_mlm(ModelConfig(**{**TINY, "dropout": 0.0, "attention_dropout": 0.0}), tok, seed=3).eval()


def dwa(model, tok, **options):
    context = ObjectiveContext(tokenizer=tok, model_config=model.config, seed=0)
    return build_objectives({"dwa": {"weight": 1.0, **options}}, context)["dwa"]


def pair_batch(tok, pairs: list[tuple[list[int], list[int]]]) -> Batch:
    """`<s> src </s> tgt </s>` rows as the `pair` source builds them, padded."""
    bos, eos, pad = tok.cls_token_id, tok.sep_token_id, tok.pad_token_id
    rows = [[bos, *s, eos, *t, eos] for s, t in pairs]
    sides = [[-1] + [0] * len(s) + [-1] + [1] * len(t) + [-1] for s, t in pairs]
    width = max(map(len, rows))
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    side = torch.tensor([s + [-1] * (width - len(s)) for s in sides])
    return Batch("pair", ["en-de"] * len(rows), {"input_ids": ids, "attention_mask": (ids != pad).long(), "side": side})


def some_pairs(tok, n: int = 4, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    g = torch.Generator().manual_seed(seed)
    special = set(tok.all_special_ids)
    ordinary = [i for i in range(len(tok)) if i not in special]
    out = []
    for k in range(n):
        ls, lt = 1 + k % 5, 2 + (3 * k) % 6
        out.append(([ordinary[int(i)] for i in torch.randint(len(ordinary), (ls,), generator=g)],
                    [ordinary[int(i)] for i in torch.randint(len(ordinary), (lt,), generator=g)]))
    return out


# -- the aligner's options --------------------------------------------------------------------------------------------
def test_paper_kernel_is_log_max_eps_dot():
    src, tgt = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    sim = kernel_similarity(src, tgt, "paper", 1e-6)
    torch.testing.assert_close(sim, torch.log(torch.clamp(src @ tgt.transpose(1, 2), min=1e-6)))
    cos = kernel_similarity(src, tgt, "cosine")
    assert cos.abs().max() <= 1 + 1e-6


def test_no_filtering_is_the_union_of_both_directions():
    score = torch.tensor([[0.9, 0.6], [0.5, 0.4]]).log()  # every row's and every column's argmax is in row/col 0
    kw = dict(eps=1.0, n_iter=0, alpha=0.9, max_count=2)
    assert ot_links(score, None, filtering="none", **kw).nonzero().tolist() == [[0, 0], [0, 1], [1, 0]]
    assert ot_links(score, None, filtering="released", **kw).nonzero().tolist() == [[0, 0]]
    paper = OTAlignment()
    assert (paper.kernel, paper.mu, paper.sinkhorn_iters, paper.filter_iters, paper.alpha) == ("paper", 1.0, 2, 2, 0.9)


def test_eq9_discounts_a_doubly_covered_cell_the_released_rule_drops():
    # round 1: (0,0) and (1,1). Cells (0,1), (1,0): row and column both aligned → released × 0, Eq. 9 × α.
    score = torch.tensor([[0.9, 0.1, 0.0001],
                          [0.5, 0.8, 0.0001],
                          [0.0001, 0.0001, 0.0001]]).log()
    mask = torch.ones(3, 3, dtype=torch.bool)
    mask[2] = False
    mask[:, 2] = False
    kw = dict(eps=1.0, n_iter=0, alpha=0.9, max_count=2)
    released = ot_links(score, mask, filtering="released", **kw)
    eq9 = ot_links(score, mask, filtering="eq9", **kw)
    assert released.nonzero().tolist() == [[0, 0], [1, 1]]  # every other cell: row and column aligned → × 0
    # Eq. 9: the links → 0, every other cell → × α (0.09 and 0.45): each is then its row's and column's maximum
    assert eq9.nonzero().tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]


# -- self-labelling ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("options", [{}, {"encoding": "joint", "kernel": "paper", "filtering": "eq9"}])
def test_labels_equal_the_alignment_core_on_the_same_states(model, tok, options):
    obj = dwa(model, tok, **options)
    batch = pair_batch(tok, some_pairs(tok, 6))
    prep = obj.prepare(batch, torch.Generator().manual_seed(0))
    t = prep.tensors
    states = obj.label_states(model, t["orig_ids"], t["attention_mask"], t["side"])
    found = obj.self_label(states, t["token_side"])
    for b in range(len(batch)):
        src = (t["token_side"][b] == 0).nonzero().squeeze(1)
        tgt = (t["token_side"][b] == 1).nonzero().squeeze(1)
        assert not set(src.tolist()) & {0} and t["orig_ids"][b, src].tolist() == batch.input_ids[b, src].tolist()
        ref = OTAlignment(kernel=obj.options.kernel, mu=obj.options.mu,
                          filtering=obj.options.filtering).links(states[b, src][None], states[b, tgt][None],
                                  torch.ones(1, len(src), len(tgt), dtype=torch.bool))[0]
        got = found.links[b, :len(src), :len(tgt)]
        assert torch.equal(got, ref), b
        assert not found.links[b, len(src):].any() and not found.links[b, :, len(tgt):].any()
        # every linked token points into the other side; special tokens and padding never take part
        targets = found.targets[b]
        for pos in range(len(targets)):
            if targets[pos] != IGNORE:
                assert int(t["token_side"][b, pos]) in (0, 1)
                assert int(t["token_side"][b, targets[pos]]) == 1 - int(t["token_side"][b, pos])
        assert (targets[t["token_side"][b] == -1] == IGNORE).all()


def test_joint_encoding_sees_the_translation_and_separate_does_not(model, tok):
    pairs = some_pairs(tok, 2)
    other = [(pairs[0][0], pairs[1][1][: len(pairs[0][1])] or pairs[1][1])]
    for encoding, same in (("joint", False), ("separate", True)):
        obj = dwa(model, tok, encoding=encoding)
        states = []
        for p in ([pairs[0]], other):
            t = obj.prepare(pair_batch(tok, p), torch.Generator().manual_seed(0)).tensors
            states.append(obj.label_states(model, t["orig_ids"], t["attention_mask"], t["side"]))
        n = len(pairs[0][0])
        src_a, src_b = states[0][0, 1:1 + n], states[1][0, 1:1 + n]
        assert torch.allclose(src_a.float(), src_b.float(), atol=1e-5) == same, encoding


# sentences as written: sentencepiece puts a bare '▁' before a CJK run ('▁', '猫', ...) and '.' is <unk> in the test
# vocabulary; both stay in the labelling input, neither is aligned
TEXT_PAIRS = [("the cat sleeps on the red chair", "猫睡在 红椅子"), ("房子很小 猫睡在红椅子上", "the house is small"),
              ("die Katze schläft.", "猫")]


def text_ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


@pytest.fixture
def label_encoder_calls(monkeypatch):
    """The (input_ids, attention_mask, output states) of every call of the self-labelling (truncated) encoder."""
    from metaxlm.models.archs.bert import Bert

    calls, real = [], Bert.truncated_encoder

    def truncated(self, model, n_layers):
        encoder = real(self, model, n_layers)

        def run(**inputs):
            out = encoder(**inputs)
            calls.append((inputs["input_ids"], inputs["attention_mask"].bool(), out.last_hidden_state.float()))
            return out
        return run

    monkeypatch.setattr(Bert, "truncated_encoder", truncated)
    return calls


def encoded_sentences(calls, batch, encoding: str) -> list[list[tuple[list[int], torch.Tensor]]]:
    """Per pair, per side: the token ids the labelling encoder read for that sentence (with <s> and </s> when
    encoded alone) and their output states."""
    [(ids, mask, out)] = calls
    n = len(batch)
    if encoding == "separate":  # the side-0 rows of all pairs, then the side-1 rows
        return [[(ids[k * n + b][mask[k * n + b]].tolist(), out[k * n + b][mask[k * n + b]]) for k in (0, 1)]
                for b in range(n)]
    side = batch.tensors["side"]
    return [[(ids[b][side[b] == k].tolist(), out[b][side[b] == k]) for k in (0, 1)] for b in range(n)]


def test_each_side_is_labelled_as_tokenized_bare_pieces_included(model, tok, label_encoder_calls):
    bare = tok.convert_tokens_to_ids("▁")
    pairs = [(text_ids(tok, s), text_ids(tok, t)) for s, t in TEXT_PAIRS]
    assert all(bare in s or bare in t for s, t in pairs) and tok.unk_token_id in pairs[2][0]  # the cases are there
    obj = dwa(model, tok)
    obj.label(model, obj.prepare(pair_batch(tok, pairs), torch.Generator().manual_seed(0)))
    (ids, mask, _), = label_encoder_calls
    assert ids.shape[0] == 2 * len(pairs)  # both sides of every pair in one encoder call
    rows = encoded_sentences(label_encoder_calls, pair_batch(tok, pairs), "separate")
    for (src, tgt), ((src_row, _), (tgt_row, _)) in zip(TEXT_PAIRS, rows, strict=True):
        assert src_row == tok(src)["input_ids"] and tgt_row == tok(tgt)["input_ids"]


@pytest.mark.parametrize("encoding", ["separate", "joint"])
def test_labels_are_the_alignment_core_links_without_bare_pieces(model, tok, label_encoder_calls, encoding):
    bare, specials = tok.convert_tokens_to_ids("▁"), set(tok.all_special_ids)
    # with the degenerate sides: bare pieces only (nothing to align) and a single token
    pairs = [(text_ids(tok, s), text_ids(tok, t)) for s, t in TEXT_PAIRS] + \
        [([bare], text_ids(tok, "the cat")), (text_ids(tok, "red"), text_ids(tok, "红椅子"))]
    assert len(pairs[-1][0]) == 1
    batch = pair_batch(tok, pairs)
    obj = dwa(model, tok, encoding=encoding, mask_prob=0.5)
    t = obj.prepare(batch, torch.Generator().manual_seed(0)).tensors
    found = obj.self_label(obj.label_states(model, t["orig_ids"], t["attention_mask"], t["side"]), t["token_side"])
    settings = obj.options
    core = OTAlignment(kernel=settings.kernel, mu=settings.mu, sinkhorn_iters=settings.sinkhorn_iters,
                       filter_iters=settings.filter_iters, alpha=settings.alpha, filtering=settings.filtering,
                       epsilon=settings.epsilon)
    for b, ((src_row, src_out), (tgt_row, tgt_out)) in enumerate(encoded_sentences(label_encoder_calls, batch,
                                                                                   encoding)):
        offset = 1 if encoding == "separate" else 0  # the side rows begin with <s>
        assert src_row[offset:len(src_row) - offset] == pairs[b][0]
        assert tgt_row[offset:len(tgt_row) - offset] == pairs[b][1]
        # the alignment problem: every token of the sentence but special tokens and bare pieces
        src_keep = [p for p, i in enumerate(src_row) if i not in specials and i != bare]
        tgt_keep = [p for p, i in enumerate(tgt_row) if i not in specials and i != bare]
        src_at = 1 + torch.tensor(src_keep, dtype=torch.long) - offset  # their positions in the pair row
        tgt_at = 2 + len(pairs[b][0]) + torch.tensor(tgt_keep, dtype=torch.long) - offset
        expected = torch.full((batch.input_ids.shape[1],), IGNORE)
        links = torch.zeros(len(src_keep), len(tgt_keep), dtype=torch.bool)
        if src_keep and tgt_keep:
            src, tgt = src_out[src_keep][None], tgt_out[tgt_keep][None]
            links = core.links(src, tgt, torch.ones(1, len(src_keep), len(tgt_keep), dtype=torch.bool))[0]
            score = core.similarity(src, tgt)[0].masked_fill(~links, float("-inf"))
            has_src, has_tgt = links.any(1), links.any(0)
            expected[src_at[has_src]] = tgt_at[score.argmax(1)][has_src]
            expected[tgt_at[has_tgt]] = src_at[score.argmax(0)][has_tgt]
        assert torch.equal(found.links[b, :len(src_keep), :len(tgt_keep)], links), b
        assert found.links[b].sum() == links.sum(), b
        assert torch.equal(found.targets[b], expected), b
    assert not found.links[3].any() and (found.targets[3] == IGNORE).all()  # the bare-only side: nothing to label
    assert found.links[4].any()  # the one-token side is aligned
    # the training path gives the same labels at its query positions
    labels = obj.label(model, obj.prepare(batch, torch.Generator().manual_seed(0))).tensors["dwa_labels"]
    asked = labels != IGNORE
    assert asked.any() and torch.equal(labels[asked], found.targets[asked])


def test_query_positions_follow_eq14_on_a_hand_made_case(model, tok):
    obj = dwa(model, tok)
    prep = obj.prepare(pair_batch(tok, [([11, 12, 13], [21, 22])]), torch.Generator().manual_seed(0))
    t = dict(prep.tensors)
    # row: <s> 11 12 13 </s> 21 22 </s>  positions 0..7; links 1↔5 and 3↔6; masked: 1, 2 and 6
    links = torch.zeros(1, 3, 2, dtype=torch.bool)
    links[0, 0, 0] = links[0, 2, 1] = True
    targets = torch.full((1, 8), IGNORE)
    targets[0, 1], targets[0, 5], targets[0, 3], targets[0, 6] = 5, 1, 6, 3
    from metaxlm.pretrain.objectives.dwa import SelfLabels

    found = SelfLabels(links, torch.tensor([[1, 2, 3]]), torch.tensor([[5, 6]]), targets)
    t["masked"] = torch.zeros(1, 8, dtype=torch.bool)
    t["masked"][0, [1, 2, 6]] = True
    assert obj.query_positions(found, t)[0].nonzero().squeeze(1).tolist() == [1, 6]  # masked ∩ aligned
    obj.options.queries = "all_aligned"
    t["query_draw"] = torch.tensor([[0.9, 0.2, 0.9, 0.8, 0.9, 0.9, 0.9, 0.9]])  # link 1↔5: 1 asks; 3↔6: 6 asks
    assert obj.query_positions(found, t)[0].nonzero().squeeze(1).tolist() == [1, 6]
    obj.options.queries = "unmasked"
    t["query_draw"] = torch.tensor([[0.0, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.0]])
    assert obj.query_positions(found, t)[0].nonzero().squeeze(1).tolist() == [3, 5]  # unmasked, aligned, drawn
    obj.options.queries = "masked"


# -- the pointer network --------------------------------------------------------------------------------------------
def test_pointer_network_shapes_gradients_and_keys_on_the_other_side(model, tok):
    obj = dwa(model, tok)
    batch = pair_batch(tok, some_pairs(tok, 5))
    prep = obj.label(model, obj.prepare(batch, torch.Generator().manual_seed(1)))
    t = prep.tensors
    hidden = model.config.hidden_size
    assert obj.query.weight.shape == obj.key.weight.shape == (hidden, hidden)
    assert prep.num_targets == int((t["dwa_labels"] != IGNORE).sum()) > 0
    assert (t["masked"] | (t["dwa_labels"] == IGNORE)).all()  # Eq. 14: queries are masked tokens
    model.zero_grad()
    obj.zero_grad()
    loss = obj.loss_sum(model, t)
    assert loss.ndim == 0 and torch.isfinite(loss) and loss > 0
    loss.backward()
    for p in (obj.query.weight, obj.key.weight, model.bert.encoder.layer[-1].output.dense.weight):
        assert p.grad is not None and p.grad.abs().sum() > 0
    # the loss is a sum over the queries of -log softmax over the other side's real tokens only
    b, p = (t["dwa_labels"] != IGNORE).nonzero(as_tuple=True)
    with torch.no_grad():
        h = model.bert(input_ids=t["input_ids"], attention_mask=t["attention_mask"]).last_hidden_state
        expected = 0.0
        for bi, pi in zip(b.tolist(), p.tolist(), strict=True):
            keys = (t["token_side"][bi] == 1 - t["token_side"][bi, pi]).nonzero().squeeze(1)
            scores = obj.key(h[bi, keys]) @ obj.query(h[bi, pi]) / math.sqrt(hidden)
            target = keys.tolist().index(int(t["dwa_labels"][bi, pi]))
            expected -= float(torch.log_softmax(scores, 0)[target])
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-4)


def test_dwa_loss_falls_when_overfitting_a_few_pairs(tok):
    torch.manual_seed(0)
    model = build_mlm(ModelConfig(**{**TINY, "dropout": 0.0, "attention_dropout": 0.0}), tok, seed=5)
    obj = dwa(model, tok, queries="all_aligned")
    batch = pair_batch(tok, some_pairs(tok, 4, seed=2))
    prep = obj.label(model, obj.prepare(batch, torch.Generator().manual_seed(0)))
    opt = torch.optim.Adam(list(model.parameters()) + list(obj.parameters()), lr=3e-3)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = obj.loss_sum(model, prep.tensors) / prep.num_targets
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.1 * losses[0], (losses[0], losses[-1])


def test_a_batch_without_queries_gives_a_zero_loss_that_reaches_the_head(model, tok):
    obj = dwa(model, tok)
    prep = obj.prepare(pair_batch(tok, [([11], [21])]), torch.Generator().manual_seed(0))
    loss = obj.loss_sum(model, prep.tensors)  # no labels yet: no queries
    assert float(loss) == 0.0 and loss.requires_grad


# -- config ---------------------------------------------------------------------------------------------------------
def test_bad_layers_are_errors_naming_the_key(model, tok):
    with pytest.raises(ConfigError, match=r"train\.objectives\.dwa\.label_layer: layer 3 is beyond the model's 2"):
        dwa(model, tok, label_layer=3)
    with pytest.raises(ConfigError, match=r"train\.objectives\.dwa\.dwa_layer"):
        dwa(model, tok, dwa_layer=9)
    with pytest.raises(ConfigError, match=r"dwa\.kernal: unknown key"):
        dwa(model, tok, kernal="paper")
    assert default_label_layer(12) == 10 and default_label_layer(6) == 5 and default_label_layer(2) == 2


# -- in the engine: shared forward, resume, export ------------------------------------------------------------------
def test_dwa_in_a_run_logs_its_loss_exports_its_head_and_warns_on_a_cold_start(parallel_template, tmp_path):
    cfg = load_config(make_config(parallel_template, tmp_path, steps=2),
                      ["train.objectives={mlm: 1.0, tlm: 1.0, dwa: 1.0}", "variants={x: {init: none}}"])
    with pytest.warns(UserWarning, match="self-label"):
        run_pretrain(cfg, "x", progress=False)
    rows = metrics(tmp_path / "run" / "pretrain" / "x")
    assert all(r["loss/dwa"] > 0 for r in rows if "loss/dwa" in r)
    assert len([r for r in rows if "loss/dwa" in r]) == 2
    head = load_file(str(tmp_path / "run" / "pretrain" / "x" / "final" / "objectives.safetensors"))
    assert {"dwa.query.weight", "dwa.query.bias", "dwa.key.weight", "dwa.key.bias"} <= set(head)


def test_encoder_passes_per_micro_batch(parallel_template, tmp_path, monkeypatch):
    from metaxlm.models.archs.bert import Bert

    passes = []
    real = Bert.encoder

    def counting(self, model):
        enc = real(self, model)
        passes.append(1)
        return enc

    cfg = load_config(make_config(parallel_template, tmp_path, steps=1, eval_every=100),
                      ["train.objectives={mlm: 1.0, tlm: 1.0, dwa: 1.0}"])
    from metaxlm.pretrain import engine

    counts = []
    real_forward = engine.ObjectiveModule.forward

    def forward(self, parts):
        monkeypatch.setattr(Bert, "encoder", counting)
        passes.clear()
        out = real_forward(self, parts)
        monkeypatch.setattr(Bert, "encoder", real)
        counts.append(len(passes))
        return out

    monkeypatch.setattr(engine.ObjectiveModule, "forward", forward)
    run_pretrain(cfg, "xlm", progress=False)
    assert counts == [2]  # mlm's batch and the pair: TLM and DWA share one pass


def test_resume_after_sigkill_is_exact_with_dwa(parallel_template, tmp_path):
    steps = 24
    ckpt = check_resume_after_sigkill(parallel_template, tmp_path, "train.objectives={mlm: 1.0, tlm: 1.0, dwa: 1.0}",
                                      steps=steps, save_every=4, kill_at=8, eval_every=12)
    head = load_file(str(ckpt / f"step_{steps:08d}" / "objectives.safetensors"))
    assert {"dwa.query.weight", "dwa.key.weight"} <= set(head)



def test_the_exported_head_continues_training(parallel_template, tmp_path, model, tok):
    cfg = load_config(make_config(parallel_template, tmp_path, steps=2),
                      ["train.objectives={tlm: 1.0, dwa: 1.0}"])
    run_pretrain(cfg, "xlm", progress=False)
    final = tmp_path / "run" / "pretrain" / "xlm" / "final"
    from transformers import AutoModelForMaskedLM

    loaded = AutoModelForMaskedLM.from_pretrained(str(final))
    obj = dwa(loaded, tok, head=str(final))
    saved = load_file(str(final / "objectives.safetensors"))
    assert torch.equal(obj.query.weight, saved["dwa.query.weight"])
    with pytest.raises(ConfigError, match="dwa.head: .* does not exist"):
        dwa(loaded, tok, head=str(tmp_path / "nowhere"))
