"""VECO (models/archs/veco.py, models/veco_export.py, pretrain/objectives/veco.py): the model's two modes, the
objectives' causal mask and stop-gradient, the NLU and NLG exports, starting from BERT encoders, and the engine's
exact resume with the VECO objectives (2 processes = 1, also sharded: tests/test_two_processes.py)."""

import json

import pytest
import torch
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
from metaxlm.models.archs.veco import (
    VecoForMaskedLM,
    export_encoder,
    is_veco,
    load_veco,
    to_bert_mlm,
    veco_from_encoder,
)
from metaxlm.models.seq2seq import save_seq2seq
from metaxlm.models.veco_export import assemble_seq2seq
from metaxlm.pretrain.batches import Batch, SegmentsSource, load_prepared
from metaxlm.pretrain.objectives import ObjectiveContext, build_objectives
from metaxlm.pretrain.objectives.encoding import shared_encodings
from metaxlm.pretrain.objectives.veco import cs_mlm_loss_sum
from metaxlm.vocab import load_tokenizer

NO_DROPOUT = {"dropout": 0.0, "attention_dropout": 0.0}


@pytest.fixture(scope="module")
def tok(tokenizer_dir):
    return load_tokenizer(tokenizer_dir)


def tiny_veco(tok, seed=3, **options) -> VecoForMaskedLM:
    cfg = {**TINY, **NO_DROPOUT, "arch": "veco", "options": options}
    return build_mlm(ModelConfig(**cfg), tok, seed=seed).eval()


def tiny_bert(tok, seed=4, **changes):
    return build_mlm(ModelConfig(**{**TINY, **NO_DROPOUT, **changes}), tok, seed=seed).eval()


def ordinary(tok) -> torch.Tensor:
    special = set(tok.all_special_ids)
    return torch.tensor([i for i in range(len(tok)) if i not in special])


def random_rows(tok, lengths, seed=0):
    """(ids, mask): `<s> w… </s>` rows of the given content lengths, padded at the end."""
    g = torch.Generator().manual_seed(seed)
    words = ordinary(tok)
    rows = [[tok.cls_token_id, *words[torch.randint(len(words), (n,), generator=g)].tolist(), tok.sep_token_id]
            for n in lengths]
    width = max(map(len, rows))
    ids = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rows])
    return ids, (ids != tok.pad_token_id).long()


def objectives(model, tok, spec):
    return build_objectives(spec, ObjectiveContext(tokenizer=tok, model_config=model.config, model=model, seed=0))


def sides_batch(tok, src_lengths, tgt_lengths, swap=None, kind="pair_sides", seed=0):
    src_ids, src_mask = random_rows(tok, src_lengths, seed)
    tgt_ids, tgt_mask = random_rows(tok, tgt_lengths, seed + 1)
    swap = torch.tensor(swap if swap is not None else [False] * len(src_lengths))
    return Batch(kind, ["en-de"] * len(src_lengths), {"src_ids": src_ids, "src_mask": src_mask, "tgt_ids": tgt_ids,
                                                       "tgt_mask": tgt_mask, "swap": swap})


# -- the model -------------------------------------------------------------------------------------------------------
def test_config_and_auto_class_round_trip(tok, tmp_path):
    from transformers import AutoModelForMaskedLM

    model = tiny_veco(tok, cross_attention_layers=[1])
    assert [layer.has_cross_attention for layer in model.bert.encoder.layer] == [False, True]
    names = {n for n, _ in model.named_parameters()}
    assert "bert.encoder.layer.1.crossattention.self.query.weight" in names
    assert "bert.encoder.layer.0.attention.output.LayerNorm.weight" in names and "cls.predictions.bias" in names
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight  # tied
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "veco" and saved["cross_attention_layers"] == [1]
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is VecoForMaskedLM and loaded.config.cross_attention_layers == [1]
    ids, mask = random_rows(tok, [5, 2])
    torch.testing.assert_close(loaded(ids, attention_mask=mask).logits, model(ids, attention_mask=mask).logits)
    assert [layer.has_cross_attention for layer in tiny_veco(tok).bert.encoder.layer] == [True, True]  # default


def test_is_mode_equals_the_exported_bert(tok, tmp_path):
    """IS-MLM = self-attention + FFN only: hidden states of every layer and MLM logits equal the NLU export's."""
    from transformers import AutoModel, AutoModelForMaskedLM, BertForMaskedLM

    model = tiny_veco(tok)
    with torch.no_grad():  # make sure cross-attention weights differ from anything else: skipping them matters
        for layer in model.bert.encoder.layer:
            for p in layer.crossattention.parameters():
                p.add_(torch.randn_like(p))
    ids, mask = random_rows(tok, [9, 3, 1])
    out = model(ids, attention_mask=mask, output_hidden_states=True)
    export_encoder(model, tok, tmp_path / "nlu")
    saved = json.loads((tmp_path / "nlu" / "config.json").read_text())
    assert saved["model_type"] == "bert" and saved["architectures"] == ["BertForMaskedLM"]
    assert "cross_attention_layers" not in saved
    assert not any("crossattention" in k for k in load_file(str(tmp_path / "nlu" / "model.safetensors")))
    bert = AutoModelForMaskedLM.from_pretrained(tmp_path / "nlu").eval()
    assert type(bert) is BertForMaskedLM
    ref = bert(ids, attention_mask=mask, output_hidden_states=True)
    assert len(out.hidden_states) == len(ref.hidden_states) == 3
    for a, b in zip(out.hidden_states, ref.hidden_states, strict=True):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(out.logits, ref.logits)
    base = AutoModel.from_pretrained(tmp_path / "nlu").eval()  # the bare encoder, as fine-tuning loads it
    torch.testing.assert_close(base(ids, attention_mask=mask).last_hidden_state, out.hidden_states[-1])
    torch.testing.assert_close(to_bert_mlm(model)(ids, attention_mask=mask).logits, out.logits)


def test_cs_mode_is_causal_in_the_target_and_reads_the_memory(tok):
    model = tiny_veco(tok)
    y, y_mask = random_rows(tok, [8, 5], seed=1)
    memory = torch.randn(2, 6, TINY["hidden"])
    memory_mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2])

    def logits(ids, mem=memory):
        return model(ids, attention_mask=y_mask, encoder_hidden_states=mem, encoder_attention_mask=memory_mask).logits

    base = logits(y)
    for t in (1, 4, 7):
        changed = y.clone()
        changed[0, t] = ordinary(tok)[0] if y[0, t] != ordinary(tok)[0] else ordinary(tok)[1]
        out = logits(changed)
        torch.testing.assert_close(out[0, :t], base[0, :t])  # no earlier position sees a later token
        assert not torch.allclose(out[0, t:], base[0, t:])     # later ones do
        torch.testing.assert_close(out[1], base[1])            # nor does another row
    # the cross-attention reads X(N) at its real positions only
    assert not torch.allclose(logits(y, memory + torch.randn_like(memory)), base)
    padded_changed = memory.clone()
    padded_changed[1, 4:] += 100.0
    torch.testing.assert_close(logits(y, padded_changed), base)
    # and the IS mode of the same weights is bidirectional
    is_logits = model(y, attention_mask=y_mask).logits
    changed = y.clone()
    changed[0, 7] = ordinary(tok)[2] if y[0, 7] != ordinary(tok)[2] else ordinary(tok)[3]
    assert not torch.allclose(model(changed, attention_mask=y_mask).logits[0, :7], is_logits[0, :7])


def test_cs_mlm_sends_no_gradient_into_x_n(tok):
    model = tiny_veco(tok)
    x, x_mask = random_rows(tok, [6, 4])
    y, y_mask = random_rows(tok, [5, 7], seed=2)
    labels = y.clone()
    labels[y_mask == 0] = -100
    x_n = model.bert(x, attention_mask=x_mask).last_hidden_state  # the IS pass, in the graph
    assert x_n.requires_grad
    cs = cs_mlm_loss_sum(model, y, y_mask, labels, x_n, x_mask)
    assert torch.autograd.grad(cs, x_n, allow_unused=True) == (None,)  # stop-gradient: nothing reaches X(N)
    x_n = model.bert(x, attention_mask=x_mask).last_hidden_state
    cs = cs_mlm_loss_sum(model, y, y_mask, labels, x_n, x_mask, detach=False)
    assert torch.autograd.grad(cs, x_n)[0].abs().sum() > 0  # without it, it would (the test can fail)
    x_n = model.bert(x, attention_mask=x_mask).last_hidden_state
    is_loss = model.cls(x_n).sum()
    assert torch.autograd.grad(is_loss, x_n)[0].abs().sum() > 0  # IS-MLM does train the encoder pass

    # in the objective: ∇(IS + CS) = ∇IS + ∇CS with X(N), Y(N) given as constants
    obj = objectives(model, tok, {"veco": {"mask_prob": 0.4}})["veco"]
    prep = obj.prepare(sides_batch(tok, [6, 4, 3], [5, 7, 2]), torch.Generator().manual_seed(0))

    def grads(spec):
        o = objectives(model, tok, {"veco": {"mask_prob": 0.4, **spec}})["veco"]
        model.zero_grad()
        with shared_encodings():
            o.loss_sum(model, prep.tensors).backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    both, is_only = grads({}), grads({"cs_xy": 0.0, "cs_yx": 0.0})
    cs_only = grads({"is_x": 0.0, "is_y": 0.0})
    assert not any("crossattention" in n for n in is_only)  # IS skips cross-attention
    for name, g in both.items():
        torch.testing.assert_close(g, is_only.get(name, torch.zeros_like(g)) + cs_only.get(name, torch.zeros_like(g)),
                                   rtol=1e-4, atol=1e-6)


# -- the objectives ------------------------------------------------------------------------------------------------
def test_objective_masks_both_sides_and_flips_by_the_coin(tok):
    model = tiny_veco(tok)
    batch = sides_batch(tok, [3, 6, 2, 4], [5, 1, 7, 4], swap=[True, False, True, False])
    t = batch.tensors
    for shuffle in (False, True):
        obj = objectives(model, tok, {"veco": {"mask_prob": 0.5, "shuffle": shuffle}})["veco"]
        prep = obj.prepare(batch, torch.Generator().manual_seed(0))
        p = prep.tensors
        width = p["x_ids"].shape[1]
        assert width == max(t["src_ids"].shape[1], t["tgt_ids"].shape[1])
        assert prep.num_targets == int((p["labels"] != -100).sum()) > 0
        for i, flip in enumerate(t["swap"].tolist()):
            x_side, y_side = ("tgt", "src") if shuffle and flip else ("src", "tgt")
            for name, side in (("x", x_side), ("y", y_side)):
                real = t[f"{side}_mask"][i].sum()
                assert int(p[f"{name}_mask"][i].sum()) == int(real)
                labels = p["labels"][i, :width] if name == "x" else p["labels"][i, width:]
                chosen = labels != -100
                assert torch.equal(labels[chosen], t[f"{side}_ids"][i, :width][chosen[:t[f"{side}_ids"].shape[1]]]) \
                    if chosen.any() else True
        loss = obj.loss_sum(model, prep.tensors)
        assert loss.requires_grad and torch.isfinite(loss) and loss > 0


def test_the_weights_of_the_four_terms(tok):
    model = tiny_veco(tok)
    batch = sides_batch(tok, [4, 6], [5, 3])

    def loss(**w):
        obj = objectives(model, tok, {"veco": {"mask_prob": 0.5, **w}})["veco"]
        prep = obj.prepare(batch, torch.Generator().manual_seed(1))
        with shared_encodings(), torch.no_grad():
            return float(obj.loss_sum(model, prep.tensors))

    zero = {"is_x": 0.0, "is_y": 0.0, "cs_xy": 0.0, "cs_yx": 0.0}
    terms = {k: loss(**{**zero, k: 1.0}) for k in zero}
    assert all(v > 0 for v in terms.values())
    assert loss() == pytest.approx(sum(terms.values()), rel=1e-5)
    assert loss(is_x=2.0, cs_yx=0.5) == pytest.approx(2 * terms["is_x"] + terms["is_y"] + terms["cs_xy"]
                                                      + 0.5 * terms["cs_yx"], rel=1e-5)


def test_is_and_cs_terms_are_logged_apart(tok):
    """evaluate() gives the mean IS-MLM and CS-MLM loss per target of the training rows since the last evaluation
    (each equal to its term alone), then starts over; a checkpoint state without the stats still loads."""
    model = tiny_veco(tok)
    batch = sides_batch(tok, [4, 6], [5, 3])
    obj = objectives(model, tok, {"veco": {"mask_prob": 0.5}})["veco"]
    prep = obj.prepare(batch, torch.Generator().manual_seed(1))
    model.train()
    with shared_encodings(), torch.no_grad():
        obj.loss_sum(model, prep.tensors)
    model.eval()
    logged = obj.evaluate(model, None)

    def alone(**w):
        only = objectives(model, tok, {"veco": {"mask_prob": 0.5, "is_x": 0.0, "is_y": 0.0, "cs_xy": 0.0,
                                                 "cs_yx": 0.0, **w}})["veco"]
        part = only.prepare(batch, torch.Generator().manual_seed(1))
        with shared_encodings(), torch.no_grad():
            return float(only.loss_sum(model, part.tensors))

    targets = int((prep.tensors["labels"] != -100).sum())  # each side's masked tokens, IS and CS alike
    assert logged["is_mlm"] == pytest.approx(alone(is_x=1.0, is_y=1.0) / targets, rel=1e-5)
    assert logged["cs_mlm"] == pytest.approx(alone(cs_xy=1.0, cs_yx=1.0) / targets, rel=1e-5)
    assert obj.evaluate(model, None) == {}  # nothing trained since
    state = obj.checkpoint_state()
    assert "term_stats" in state
    obj.load_checkpoint_state({k: v for k, v in state.items() if k != "term_stats"}, "old checkpoint")


def test_segments_batches_carry_resumable_order_coins(tok, run_template):
    data = load_prepared(run_template / "prepared", "mono")
    a = SegmentsSource(data, seq_len=32, alpha=0.7, seed=0, tokenizer=tok)
    first = a.next_batch(8)
    state = a.state_dict()
    nxt = a.next_batch(8)
    b = SegmentsSource(data, seq_len=32, alpha=0.7, seed=0, tokenizer=tok)
    b.load_state_dict(state)
    again = b.next_batch(8)
    assert torch.equal(nxt.tensors["swap"], again.tensors["swap"])
    assert torch.equal(nxt.tensors["src_ids"], again.tensors["src_ids"])
    coins = torch.cat([first.tensors["swap"], nxt.tensors["swap"]])
    assert 0 < int(coins.sum()) < 16
    model = tiny_veco(tok)
    obj = objectives(model, tok, {"veco_segments": {"shuffle": True}})["veco_segments"]
    assert obj.batch_kind == "segments"
    loss = obj.loss_sum(model, obj.prepare(first, torch.Generator().manual_seed(0)).tensors)
    assert torch.isfinite(loss)


def test_degenerate_inputs_do_not_crash(tok):
    one_layer = build_mlm(ModelConfig(**{**TINY, **NO_DROPOUT, "layers": 1, "arch": "veco"}), tok, seed=1)
    for model in (one_layer, tiny_veco(tok)):
        obj = objectives(model, tok, {"veco": {"mask_prob": 0.99}})["veco"]
        # one-token sides, and sides empty between <s> and </s> (nothing to mask: zero targets, loss 0)
        for src, tgt in (([1, 1], [1, 1]), ([0, 0], [0, 0]), ([0, 3], [2, 0])):
            batch = sides_batch(tok, src, tgt)
            prep = obj.prepare(batch, torch.Generator().manual_seed(0))
            with shared_encodings():
                loss = obj.loss_sum(model, prep.tensors)
            assert torch.isfinite(loss)
            if prep.num_targets == 0:
                assert float(loss.detach()) == 0.0
            loss.backward()
        # zero rows (a process's empty slice)
        empty = obj.prepare(sides_batch(tok, [2], [2]), torch.Generator().manual_seed(0)).rows(slice(0, 0))
        assert float(obj.loss_sum(model, empty.tensors)) == 0.0


# -- starting from an encoder ----------------------------------------------------------------------------------------
def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_from_encoder_copies_the_body_and_adds_cross_attention(tok):
    bert = tiny_bert(tok)
    veco = veco_from_encoder(bert, init="random", seed=1).eval()
    assert is_veco(veco) and veco.config.cross_attention_layers == [0, 1]
    assert _same(veco.bert.embeddings, bert.bert.embeddings) and _same(veco.cls, bert.cls)
    for v, b in zip(veco.bert.encoder.layer, bert.bert.encoder.layer, strict=True):
        for name in ("attention", "intermediate", "output"):
            assert _same(getattr(v, name), getattr(b, name)), name
        assert not torch.equal(v.crossattention.self.query.weight, v.attention.self.query.weight)  # new
    ids, mask = random_rows(tok, [7, 2])
    torch.testing.assert_close(veco(ids, attention_mask=mask).logits, bert(ids, attention_mask=mask).logits)
    again = veco_from_encoder(bert, init="random", seed=1)
    assert torch.equal(again.bert.encoder.layer[0].crossattention.self.key.weight,
                       veco.bert.encoder.layer[0].crossattention.self.key.weight)  # seeded
    copied = veco_from_encoder(bert, cross_attention_layers=[1], init="self")
    assert not copied.bert.encoder.layer[0].has_cross_attention
    assert _same(copied.bert.encoder.layer[1].crossattention, bert.bert.encoder.layer[1].attention)
    # a bare encoder (no MLM head): the body copied, a fresh head tied to the embeddings
    bare = veco_from_encoder(bert.bert)
    assert _same(bare.bert.encoder.layer[1].attention, bert.bert.encoder.layer[1].attention)
    assert bare.cls.predictions.decoder.weight is bare.bert.embeddings.word_embeddings.weight


def test_from_an_xlm_roberta_encoder_keeps_its_outputs(tok):
    """The RoBERTa family numbers positions from padding_idx + 1: the copied table is shifted to BERT's."""
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

    torch.manual_seed(0)
    xlmr = XLMRobertaForMaskedLM(XLMRobertaConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=40, pad_token_id=tok.pad_token_id, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, type_vocab_size=1)).eval()
    veco = veco_from_encoder(xlmr).eval()
    ids, mask = random_rows(tok, [9, 4])
    real = mask.bool()  # (padding positions get RoBERTa's padding position row: their outputs are never read)
    torch.testing.assert_close(veco(ids, attention_mask=mask).logits[real], xlmr(ids, attention_mask=mask).logits[real])


def test_start_from_a_bert_dir_with_model_arch_veco(tok, run_template, tmp_path):
    from metaxlm.pretrain.variant import load_start_model

    bert = tiny_bert(tok)
    bert.save_pretrained(tmp_path / "bert")
    tok.save_pretrained(tmp_path / "bert")
    cfg = load_config(make_config(run_template, tmp_path), [
        "model.arch=veco", "model.options={cross_attention_init: self}",
        f"variants={{v: {{start_from: {tmp_path / 'bert'}}}}}"])
    model = load_start_model(cfg, "v", tok, progress=False)
    assert is_veco(model)
    assert _same(model.bert.encoder.layer[0].attention, bert.bert.encoder.layer[0].attention)
    assert _same(model.bert.encoder.layer[0].crossattention, bert.bert.encoder.layer[0].attention)


def test_a_variant_can_be_veco_beside_a_plain_control(tok, run_template, tmp_path):
    """`variants.<v>.model` overrides the run's model section for that variant only (VECO and its MLM control in
    one config); a bad override is named."""
    from metaxlm.pretrain.variant import load_start_model

    bert = tiny_bert(tok)
    bert.save_pretrained(tmp_path / "bert")
    tok.save_pretrained(tmp_path / "bert")
    start = tmp_path / "bert"
    cfg = load_config(make_config(run_template, tmp_path), [
        f"variants={{control: {{start_from: {start}}}, "
        f"veco: {{start_from: {start}, model: {{arch: veco, options: {{cross_attention_layers: [1]}}}}}}}}"])
    assert cfg.model_for("control").arch == "bert" and cfg.model_for("veco").layers == cfg.model.layers
    assert not is_veco(load_start_model(cfg, "control", tok, progress=False))
    veco = load_start_model(cfg, "veco", tok, progress=False)
    assert is_veco(veco) and [layer.has_cross_attention for layer in veco.bert.encoder.layer] == [False, True]
    with pytest.raises(ConfigError, match=r"variants\.veco\.model\.heads"):
        load_config(make_config(run_template, tmp_path), ["variants={veco: {model: {heads: 0}}}"])


def test_a_veco_checkpoint_is_evaluated_through_its_nlu_view(tok, tmp_path):
    """Intermediate checkpoints hold VECO weights; evaluation reads their BertForMaskedLM export, written once."""
    from transformers import AutoModelForMaskedLM

    from metaxlm.models import get_arch

    veco = tiny_veco(tok)
    veco.save_pretrained(tmp_path / "step_00000002")
    nlu = get_arch("veco").encoder_dir(tmp_path / "step_00000002")
    assert nlu == tmp_path / "step_00000002" / "nlu"
    bert = AutoModelForMaskedLM.from_pretrained(nlu).eval()
    assert type(bert).__name__ == "BertForMaskedLM"
    ids, mask = random_rows(tok, [6, 3])
    torch.testing.assert_close(bert(ids, attention_mask=mask).logits, veco(ids, attention_mask=mask).logits)
    stamp = (nlu / "config.json").stat().st_mtime_ns
    assert get_arch("veco").encoder_dir(tmp_path / "step_00000002") == nlu
    assert (nlu / "config.json").stat().st_mtime_ns == stamp
    assert get_arch("bert").encoder_dir(tmp_path / "x") == tmp_path / "x"


def test_metaxlm_body_initialization_into_a_veco_model(tok):
    """`init: body|both` (MetaXLM) builds the VECO model, then copies a BERT source's body; cross-attention stays."""
    from metaxlm.transfer import initialize_from_source

    veco, bert = tiny_veco(tok), tiny_bert(tok)
    cross = {k: v.clone() for k, v in veco.state_dict().items() if ".crossattention." in k}
    report = initialize_from_source(veco, bert, None, mode="body")
    assert _same(veco.bert.encoder.layer[1].attention, bert.bert.encoder.layer[1].attention)
    assert all(torch.equal(veco.state_dict()[k], v) for k, v in cross.items())
    assert set(cross) <= set(report["kept"]) and not any("crossattention" in n for n in report["copied"])


# -- NLG: the encoder-decoder --------------------------------------------------------------------------------------
def test_assembled_seq2seq_holds_the_chosen_layers_and_reloads(tok, tmp_path):
    from transformers import AutoModelForSeq2SeqLM, EncoderDecoderModel

    model = build_mlm(ModelConfig(**{**TINY, **NO_DROPOUT, "layers": 3, "arch": "veco"}), tok, seed=5).eval()
    seq2seq = assemble_seq2seq(model, tok, decoder_layers=2)
    assert seq2seq.metaxlm_decoder_layers == [1, 2]  # the LAST n layers
    enc, dec = seq2seq.encoder, seq2seq.decoder
    assert len(enc.encoder.layer) == 3 and len(dec.bert.encoder.layer) == 2
    assert dec.config.is_decoder and dec.config.add_cross_attention
    for k, i in enumerate([1, 2]):
        assert _same(dec.bert.encoder.layer[k].attention, model.bert.encoder.layer[i].attention)
        assert _same(dec.bert.encoder.layer[k].crossattention, model.bert.encoder.layer[i].crossattention)
        assert _same(dec.bert.encoder.layer[k].output, model.bert.encoder.layer[i].output)
    for i in range(3):
        assert _same(enc.encoder.layer[i].attention, model.bert.encoder.layer[i].attention)
    assert _same(dec.cls, model.cls) and _same(enc.embeddings, model.bert.embeddings)
    assert dec.cls.predictions.decoder.weight is dec.bert.embeddings.word_embeddings.weight
    assert seq2seq.config.decoder_start_token_id == tok.cls_token_id
    assert seq2seq.generation_config.eos_token_id == tok.sep_token_id

    # the decoder computes what VECO's CS mode computes on the chosen layers
    src, src_mask = random_rows(tok, [6, 3])
    tgt, tgt_mask = random_rows(tok, [4, 5], seed=3)
    out = seq2seq(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask)
    torch.testing.assert_close(out.encoder_last_hidden_state,
                               model.bert(src, attention_mask=src_mask).last_hidden_state)

    # with every layer in the decoder, the decoder IS VECO's CS mode (the virtual decoder CS-MLM trains)
    whole = assemble_seq2seq(model, tok, decoder_layers=3)
    memory = model.bert(src, attention_mask=src_mask).last_hidden_state
    cs = model(tgt, attention_mask=tgt_mask, encoder_hidden_states=memory, encoder_attention_mask=src_mask).logits
    out_whole = whole(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask)
    torch.testing.assert_close(out_whole.logits, cs)

    save_seq2seq(seq2seq, tok, tmp_path / "nlg")
    for cls in (EncoderDecoderModel, AutoModelForSeq2SeqLM):
        reloaded = cls.from_pretrained(tmp_path / "nlg").eval()
        assert type(reloaded) is EncoderDecoderModel
        for kw in ({"num_beams": 1}, {"num_beams": 4}):
            a = seq2seq.generate(input_ids=src, attention_mask=src_mask, max_new_tokens=6, do_sample=False, **kw)
            b = reloaded.generate(input_ids=src, attention_mask=src_mask, max_new_tokens=6, do_sample=False, **kw)
            assert torch.equal(a, b), kw
            assert (a[:, 0] == tok.cls_token_id).all()
        torch.testing.assert_close(reloaded(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt,
                                            decoder_attention_mask=tgt_mask).logits, out.logits)


def test_seq2seq_inits_and_layer_choices(tok, tmp_path):
    model = tiny_veco(tok)
    model.save_pretrained(tmp_path / "veco")
    tok.save_pretrained(tmp_path / "veco")
    everything = assemble_seq2seq(tmp_path / "veco", decoder_layers=6)  # more than the model has: all of them
    assert everything.metaxlm_decoder_layers == [0, 1]
    picked = assemble_seq2seq(model, tok, decoder_layers=[0])
    assert _same(picked.decoder.bert.encoder.layer[0].crossattention, model.bert.encoder.layer[0].crossattention)
    # init encoder: self-attention/FFN copied in both halves, cross-attention new
    bert = tiny_bert(tok)
    enc = assemble_seq2seq(bert, tok, decoder_layers=1, init="encoder")
    layer = enc.decoder.bert.encoder.layer[0]
    assert _same(layer.attention, bert.bert.encoder.layer[1].attention)
    assert not torch.equal(layer.crossattention.self.query.weight, layer.attention.self.query.weight)
    # init random: same shapes, fresh weights
    rnd = assemble_seq2seq(model, tok, decoder_layers=1, init="random")
    assert rnd.decoder.bert.encoder.layer[0].attention.self.query.weight.shape == (32, 32)
    assert not torch.equal(rnd.encoder.encoder.layer[0].attention.self.query.weight,
                           model.bert.encoder.layer[0].attention.self.query.weight)
    with pytest.raises(ConfigError, match="decoder_layers"):
        assemble_seq2seq(model, tok, decoder_layers=[1, 0])
    with pytest.raises(ConfigError, match="decoder_layers"):
        assemble_seq2seq(model, tok, decoder_layers=0)
    with pytest.raises(ConfigError, match="init veco needs a VECO model"):
        assemble_seq2seq(bert, tok)
    with pytest.raises(ConfigError, match="init must be"):
        assemble_seq2seq(model, tok, init="copy")


# -- errors ----------------------------------------------------------------------------------------------------------
def test_bad_options_and_a_non_veco_model_are_errors_naming_the_key(tok):
    model = tiny_veco(tok)
    with pytest.raises(ConfigError, match=r"train\.objectives\.veco: IS/CS-MLM needs a VECO model"):
        objectives(tiny_bert(tok), tok, {"veco": 1.0})
    with pytest.raises(ConfigError, match=r"veco_segments: IS/CS-MLM needs a VECO model"):
        objectives(tiny_bert(tok), tok, {"veco_segments": 1.0})
    with pytest.raises(ConfigError, match=r"veco\.cs_xy"):
        objectives(model, tok, {"veco": {"cs_xy": -1.0}})
    with pytest.raises(ConfigError, match=r"veco\.flip: unknown key"):
        objectives(model, tok, {"veco": {"flip": True}})
    with pytest.raises(ConfigError, match="all 0"):
        objectives(model, tok, {"veco": {"is_x": 0, "is_y": 0, "cs_xy": 0, "cs_yx": 0}})
    with pytest.raises(ConfigError, match=r"model\.options\.cross_attention_layers"):
        objectives(tiny_veco(tok, cross_attention_layers=[]), tok, {"veco": 1.0})
    objectives(tiny_veco(tok, cross_attention_layers=[]), tok, {"veco": {"cs_xy": 0, "cs_yx": 0}})  # IS only: fine
    with pytest.raises(ConfigError, match=r"model\.options\.cross_attention_init"):
        tiny_veco(tok, cross_attention_init="copy")
    with pytest.raises(ConfigError, match=r"model\.options\.layers: unknown key"):
        tiny_veco(tok, layers=[0])
    with pytest.raises(ConfigError, match=r"model\.options\.cross_attention_layers"):
        tiny_veco(tok, cross_attention_layers=[2])
    with pytest.raises(ConfigError, match=r"model\.options: model\.arch 'bert' has no options"):
        build_mlm(ModelConfig(**{**TINY, "options": {"cross_attention_layers": [0]}}), tok)
    with pytest.raises(ConfigError, match="not a VECO model"):
        load_veco(tiny_bert(tok))


# -- in the engine -----------------------------------------------------------------------------------------------------
VECO_RUN = "train.objectives={veco: {weight: 1.0, shuffle: true}, veco_segments: {weight: 0.5, cs_yx: 0.5}}"


def test_a_veco_run_writes_the_nlu_export_and_the_veco_model(parallel_template, tmp_path):
    from transformers import AutoModelForMaskedLM, BertForMaskedLM

    from metaxlm.pretrain.variant import run_pretrain

    cfg = load_config(make_config(parallel_template, tmp_path, steps=2, eval_every=2), [
        "model.arch=veco", VECO_RUN, "variants={x: {init: none}}"])
    run_pretrain(cfg, "x", progress=False)
    out = tmp_path / "run" / "pretrain" / "x"
    rows = metrics(out)
    assert len([r for r in rows if "loss/veco" in r and "loss/veco_segments" in r]) == 2
    assert any("heldout_loss/mean" in r for r in rows)
    nlu = AutoModelForMaskedLM.from_pretrained(out / "final")
    assert type(nlu) is BertForMaskedLM
    veco = AutoModelForMaskedLM.from_pretrained(out / "final" / "veco")
    assert type(veco) is VecoForMaskedLM
    assert ((out / "final" / "tokenizer_config.json").exists()
            and (out / "final" / "veco" / "tokenizer_config.json").exists())
    # and the sentencepiece model beside each: a translation fine-tuning trims the vocabulary of final/ from it
    from metaxlm.vocab.load import SPM_FILE

    assert (out / "final" / SPM_FILE).exists() and (out / "final" / "veco" / SPM_FILE).exists()
    ids = torch.tensor([[veco.config.pad_token_id + 1, 7, 9, 12]])
    torch.testing.assert_close(nlu.eval()(ids).logits, veco.eval()(ids).logits)
    # a run's final/ is a valid source of assemble_seq2seq (it finds final/veco/)
    seq2seq = assemble_seq2seq(out / "final", decoder_layers=1)
    assert _same(seq2seq.decoder.bert.encoder.layer[0].crossattention, veco.bert.encoder.layer[1].crossattention)
    # continuing it as VECO (start_from a VECO variant) reads final/veco/, cross-attention included
    from metaxlm.pretrain.variant import load_start_model

    cont = load_config(make_config(parallel_template, tmp_path), ["model.arch=veco",
                                                                 "variants={x: {init: none}, y: {start_from: x}}"])
    again = load_start_model(cont, "y", load_tokenizer(out / "final"), progress=False)
    assert _same(again, veco)


def test_resume_after_sigkill_is_exact_with_veco(parallel_template, tmp_path):
    check_resume_after_sigkill(parallel_template, tmp_path, "model.arch=veco", VECO_RUN, steps=12, save_every=3,
                               kill_at=3, eval_every=6, files=("model.safetensors",))



def test_cli_exports(tok, tmp_path, capsys):
    from transformers import AutoModelForMaskedLM, AutoModelForSeq2SeqLM, BertForMaskedLM

    from metaxlm.cli import main

    model = tiny_veco(tok)
    model.save_pretrained(tmp_path / "veco")
    tok.save_pretrained(tmp_path / "veco")
    assert main(["veco", "export", "--model", str(tmp_path / "veco"), "--out", str(tmp_path / "nlu"), "--nlu"]) == 0
    assert type(AutoModelForMaskedLM.from_pretrained(tmp_path / "nlu")) is BertForMaskedLM
    assert main(["veco", "export", "--model", str(tmp_path / "veco"), "--out", str(tmp_path / "nlg"), "--nlg",
                 "--decoder-layers", "1", "--init", "veco"]) == 0
    nlg = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "nlg")
    assert nlg.config.decoder.num_hidden_layers == 1 and "layers [1] of the source" in capsys.readouterr().out
    assert main(["veco", "export", "--model", str(tmp_path / "nlu"), "--out", str(tmp_path / "bad"), "--nlu"]) == 2
    assert "not a VECO model" in capsys.readouterr().err
