import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertModel

from metaxlm.errors import MetaXLMError
from metaxlm.transfer import (
    VocabMatch,
    body_parameter_names,
    embedding_parameter_names,
    freeze_body,
    initialize_from_source,
)

WORD = "bert.embeddings.word_embeddings.weight"
BIAS = "cls.predictions.bias"
POS = "bert.embeddings.position_embeddings.weight"
HEAD = ["cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
        "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias"]

# 12 target ids: rows 0-4 specials, 5-6 one source row each, 7 the mean of three, 8-9 unmatched, 10-11 more.
MATCH = VocabMatch(
    sources=[[2], [0], [3], [1], [4], [5], [6], [7, 8, 12], [], [], [9], [10]],
    rules=["special"] * 5 + ["exact", "normalized", "dict", "fallback", "fallback", "exact", "exact"],
)
MATCHED = [t for t, s in enumerate(MATCH.sources) if s]
UNMATCHED = [t for t, s in enumerate(MATCH.sources) if not s]


def config(**kw):
    base = dict(vocab_size=12, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                max_position_embeddings=40, type_vocab_size=2)
    return BertConfig(**{**base, **kw})


def random_model(seed, **kw):
    torch.manual_seed(seed)
    m = BertForMaskedLM(config(**kw))
    with torch.no_grad():  # every tensor distinct and nonzero, so "copied" and "kept" are tellable apart
        for p in m.parameters():
            p.normal_(0, 1)
    return m


@pytest.fixture
def source():
    return random_model(1, vocab_size=16, max_position_embeddings=24)


@pytest.fixture
def target():
    return random_model(2)


def snapshot(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def expected_rows(src_rows, sources):
    return torch.stack([src_rows[s].mean(0) for s in sources])


@pytest.mark.parametrize("mode", ["none", "body", "emb", "both"])
def test_modes_touch_exactly_the_intended_tensors(mode, source, target):
    before, src = snapshot(target), snapshot(source)
    report = initialize_from_source(target, source, MATCH, mode=mode)
    after = snapshot(target)
    body, emb = mode in ("body", "both"), mode in ("emb", "both")
    assert set(body_parameter_names(target)) | set(embedding_parameter_names(target)) == set(after)
    for name in body_parameter_names(target):
        if name == POS:  # source has 24 positions, target 40: the first 24 rows come from the source
            assert torch.equal(after[name][:24], src[name] if body else before[name][:24])
            assert torch.equal(after[name][24:], before[name][24:])
        else:
            assert torch.equal(after[name], src[name] if body else before[name]), name
    for name in (WORD, BIAS):
        if emb:
            assert torch.allclose(after[name][MATCHED], expected_rows(src[name], [MATCH.sources[t] for t in MATCHED]))
            assert torch.equal(after[name][UNMATCHED], before[name][UNMATCHED])  # fallback random: own init
        else:
            assert torch.equal(after[name], before[name])
    assert target.cls.predictions.decoder.weight is target.bert.embeddings.word_embeddings.weight
    assert set(report["kept"]) == {n for n in after if torch.equal(after[n], before[n])}
    if mode == "both":
        assert report["rows_copied"] == {POS: {"rows": 24, "of": 40}}
        assert set(report["from_match"]) == {WORD, BIAS}
        assert report["embedding_rows"] == {"matched": 10, "unmatched": 2, "fallback": "random"}


def test_hand_checked_mean_and_fallback_mean(source, target):
    src_w = source.bert.embeddings.word_embeddings.weight.detach().clone()
    initialize_from_source(target, source, MATCH, mode="emb", fallback="mean")
    w = target.bert.embeddings.word_embeddings.weight.detach()
    assert torch.allclose(w[7], (src_w[7] + src_w[8] + src_w[12]) / 3)
    assert torch.equal(w[0], src_w[2])
    matched_mean = w[MATCHED].mean(0)
    for t in UNMATCHED:
        assert torch.allclose(w[t], matched_mean)
    b = target.cls.predictions.bias.detach()
    assert torch.allclose(b[UNMATCHED], b[MATCHED].mean().expand(len(UNMATCHED)))


def test_tying_survives_save_and_load(source, target, tmp_path):
    initialize_from_source(target, source, MATCH, mode="both")
    target.save_pretrained(tmp_path)
    loaded = BertForMaskedLM.from_pretrained(tmp_path)
    assert loaded.cls.predictions.decoder.weight is loaded.bert.embeddings.word_embeddings.weight
    assert loaded.cls.predictions.decoder.bias is loaded.cls.predictions.bias
    for name, p in target.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], p), name
    x = torch.tensor([[0, 5, 7, 2]])
    assert torch.allclose(loaded.eval()(x).logits, target.eval()(x).logits)


@pytest.mark.parametrize(("kw", "message"), [
    ({"intermediate_size": 48}, "bert.encoder.layer.0.intermediate.dense.weight has shape"),
    ({"num_hidden_layers": 3}, "bert.encoder.layer.2.attention.self.query.weight .* is not in the source"),
    ({"num_hidden_layers": 1}, "the source has bert.encoder.layer.1"),
    ({"num_attention_heads": 4}, "4 heads in the target but 2 in the source"),
])
def test_body_mismatch_is_a_clear_error(source, kw, message):
    target = random_model(3, **kw)
    before = snapshot(target)
    with pytest.raises(MetaXLMError, match=message):
        initialize_from_source(target, source, MATCH, mode="both")
    assert all(torch.equal(p, before[n]) for n, p in snapshot(target).items())  # nothing half-copied
    initialize_from_source(target, source, MATCH, mode="emb")  # the embeddings alone still fit


def test_embedding_errors(source):
    narrow = random_model(3, hidden_size=16, intermediate_size=32)
    with pytest.raises(MetaXLMError, match="word_embeddings.weight has hidden size 16 in the target but 32"):
        initialize_from_source(narrow, source, MATCH, mode="emb")
    with pytest.raises(MetaXLMError, match="covers 12 target ids but .* only 8 rows"):
        initialize_from_source(random_model(3, vocab_size=8), source, MATCH, mode="emb")
    bad = VocabMatch(sources=[[99]] + [[]] * 11, rules=["exact"] + ["fallback"] * 11)
    with pytest.raises(MetaXLMError, match="source id 99 but the source's .* has 16 rows"):
        initialize_from_source(random_model(3), source, bad, mode="both")
    with pytest.raises(MetaXLMError, match="mode must be one of"):
        initialize_from_source(random_model(3), source, MATCH, mode="all")


def test_bare_bert_model_source(target):
    torch.manual_seed(5)
    bare = BertModel(config(vocab_size=16), add_pooling_layer=True)
    before = snapshot(target)
    report = initialize_from_source(target, bare, MATCH, mode="both")
    assert set(report["missing_in_source"]) == set(HEAD) | {BIAS}
    after = snapshot(target)
    for name in HEAD + [BIAS]:
        assert torch.equal(after[name], before[name])
    assert torch.equal(after["bert.encoder.layer.1.output.dense.weight"], bare.encoder.layer[1].output.dense.weight)
    assert torch.equal(after[WORD][5], bare.embeddings.word_embeddings.weight[5])


def test_freeze_body_leaves_embeddings_and_head_trainable(source, target):
    initialize_from_source(target, source, MATCH, mode="both")
    frozen = freeze_body(target)
    trainable = {n for n, p in target.named_parameters() if p.requires_grad}
    assert trainable == {WORD, BIAS, *HEAD}
    assert set(frozen) == {n for n, _ in target.named_parameters()} - trainable
    assert embedding_parameter_names(target) == [WORD, BIAS]

    before = snapshot(target)
    opt = torch.optim.AdamW(target.parameters(), lr=1e-2, weight_decay=0.1)
    x = torch.tensor([[0, 5, 6, 7, 10, 2], [0, 11, 4, 4, 6, 2]])
    target.train()(input_ids=x, labels=x).loss.backward()
    opt.step()
    changed = {n for n, p in target.named_parameters() if not torch.equal(p, before[n])}
    assert changed == trainable
    assert target.cls.predictions.decoder.weight is target.bert.embeddings.word_embeddings.weight
