import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel, DistilBertConfig, DistilBertModel

from metaxlm.errors import ConfigError
from metaxlm.features.layers import LayerRunner, encode_layers, inference, max_positions, resolve_layers
from metaxlm.models.pooling import cls_pool, mean_pool

TEXTS = ["the house is small", "das Haus ist klein und die Katze schläft auf dem roten Stuhl",
         "кошка спит", "房子很小", "the cat sleeps on the red chair near an open window and the house is small"]


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    return AutoTokenizer.from_pretrained(str(tokenizer_dir))


def tiny_bert(tokenizer, layers=3, positions=64, seed=0) -> BertModel:
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=positions, pad_token_id=tokenizer.pad_token_id)
    return BertModel(config).eval()


def mean_pool_alone(model, tokenizer, text: str) -> torch.Tensor:
    """Reference: one text, no padding, the model's own last hidden state."""
    enc = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        return model(**enc).last_hidden_state[0].mean(0)


def test_one_pass_equals_per_layer_passes(tokenizer):
    model = tiny_bert(tokenizer)
    got = encode_layers(model, tokenizer, TEXTS, batch_size=2, precision="fp32")
    assert list(got) == [0, 1, 2, 3]
    for k in range(4):  # a separate model cut after k layers, same weights, each text on its own
        cut = BertModel(BertConfig(**{**model.config.to_dict(), "num_hidden_layers": k})).eval()
        missing, _ = cut.load_state_dict(model.state_dict(), strict=False)
        assert not missing
        want = torch.stack([mean_pool_alone(cut, tokenizer, t) for t in TEXTS])
        torch.testing.assert_close(got[k], want, atol=1e-5, rtol=1e-5)


def test_only_needed_layers_run_and_the_model_is_unchanged(tokenizer):
    model = tiny_bert(tokenizer, layers=4).train()
    calls = [0] * 4
    for k, layer in enumerate(model.encoder.layer):
        layer.register_forward_hook(lambda *_, k=k: calls.__setitem__(k, calls[k] + 1))
    out = encode_layers(model, tokenizer, TEXTS, layers=[2, 0], batch_size=8, precision="fp32")
    assert list(out) == [0, 2] and calls == [1, 1, 0, 0]
    assert len(model.encoder.layer) == 4 and model.pooler is not None and model.training  # restored


def test_generic_fallback_for_models_without_an_encoder_layer_list(tokenizer):
    torch.manual_seed(0)
    model = DistilBertModel(DistilBertConfig(vocab_size=len(tokenizer), dim=32, n_layers=2, n_heads=2,
                                             hidden_dim=64, pad_token_id=tokenizer.pad_token_id)).eval()
    got = encode_layers(model, tokenizer, TEXTS[:2], layers=[1, 2], precision="fp32")
    for k, text in enumerate(TEXTS[:2]):
        with torch.no_grad():
            states = model(**tokenizer(text, return_tensors="pt"), output_hidden_states=True).hidden_states
        for layer in (1, 2):
            torch.testing.assert_close(got[layer][k], states[layer][0].mean(0), atol=1e-5, rtol=1e-5)


def test_runner_hidden_states_match_hf_output_hidden_states(tokenizer):
    model = tiny_bert(tokenizer)
    enc = tokenizer(TEXTS[:3], padding=True, return_tensors="pt")
    with inference(model, "fp32"):
        ours = LayerRunner(model, [0, 1, 2, 3])(enc["input_ids"], enc["attention_mask"])
        ours_again = LayerRunner(model, [1])(enc["input_ids"], enc["attention_mask"])  # no hooks left behind
        hf = model(**enc, output_hidden_states=True).hidden_states
    assert len(hf) == 4
    for layer in range(4):
        torch.testing.assert_close(ours[layer], hf[layer])
    torch.testing.assert_close(ours_again[1], hf[1])


def test_bf16_is_close_to_fp32_and_cls_pooling(tokenizer):
    model = tiny_bert(tokenizer)
    fp32 = encode_layers(model, tokenizer, TEXTS, layers=[3], precision="fp32")[3]
    bf16 = encode_layers(model, tokenizer, TEXTS, layers=[3])[3]
    assert bf16.dtype == torch.float32
    assert torch.nn.functional.cosine_similarity(fp32, bf16).min() > 0.99
    cls = encode_layers(model, tokenizer, TEXTS[:1], layers=[3], pooling="cls", precision="fp32")[3]
    with torch.no_grad():
        want = model(**tokenizer(TEXTS[:1], return_tensors="pt")).last_hidden_state[0, 0]
    torch.testing.assert_close(cls[0], want, atol=1e-5, rtol=1e-5)


def test_long_texts_are_truncated_with_a_warning(tokenizer):
    model = tiny_bert(tokenizer, positions=16)
    assert max_positions(model, tokenizer) == 16
    long_text = " ".join(["the house is small"] * 20)
    with pytest.warns(UserWarning, match="1 of 2 texts are longer than 16 tokens"):
        out = encode_layers(model, tokenizer, [long_text, "the cat"], layers=[1], precision="fp32")
    assert out[1].shape == (2, 32) and torch.isfinite(out[1]).all()


def test_layer_and_option_errors(tokenizer):
    model = tiny_bert(tokenizer)
    assert resolve_layers(model, None) == [0, 1, 2, 3]
    assert resolve_layers(model, [3, 1, 3]) == [1, 3]
    with pytest.raises(ConfigError, match="0..3"):
        resolve_layers(model, [4])
    with pytest.raises(ConfigError, match="pooling"):
        encode_layers(model, tokenizer, TEXTS, pooling="max")
    with pytest.raises(ConfigError, match="precision"):
        encode_layers(model, tokenizer, TEXTS, precision="fp16")


def test_mean_pool_ignores_padding_and_an_empty_row_gives_zeros():
    torch.manual_seed(0)
    hidden = torch.randn(3, 5, 4, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]])
    pooled = mean_pool(hidden, mask)
    torch.testing.assert_close(pooled[0], hidden[0].mean(0))
    torch.testing.assert_close(pooled[1], hidden[1, :2].mean(0))  # the padding's states do not count
    assert pooled[2].tolist() == [0.0] * 4
    assert pooled.dtype == torch.float64 and torch.equal(mean_pool(hidden, mask.bool()), pooled)
    assert torch.equal(cls_pool(hidden), hidden[:, 0])


@pytest.mark.parametrize("budget", [1, 10, 40, 1000, None])
def test_length_sorted_batches_cover_every_item_once_within_the_budget(budget):
    import random

    from metaxlm.data.padding import length_sorted_batches

    rng = random.Random(0)
    lengths = [rng.randint(1, 30) for _ in range(200)]
    batches = length_sorted_batches(lengths, 16, budget)
    assert sorted(k for batch in batches for k in batch) == list(range(200))  # every item once
    flat = [lengths[k] for batch in batches for k in batch]
    assert flat == sorted(flat)  # shortest first: batches hold similar lengths
    for batch in batches:
        assert len(batch) <= 16
        if budget is not None:
            assert len(batch) == 1 or len(batch) * max(lengths[k] for k in batch) <= budget
    assert length_sorted_batches([], 4, 8) == []
    assert length_sorted_batches([50], 4, 8) == [[0]]  # an item over the budget is a batch alone


def test_token_budget_batches_give_the_same_vectors(tokenizer):
    model = tiny_bert(tokenizer)
    whole = encode_layers(model, tokenizer, TEXTS, batch_size=64, batch_tokens=None, precision="fp32")
    small = encode_layers(model, tokenizer, TEXTS, batch_size=64, batch_tokens=20, precision="fp32")
    for layer in whole:
        torch.testing.assert_close(small[layer], whole[layer], atol=1e-5, rtol=1e-5)
