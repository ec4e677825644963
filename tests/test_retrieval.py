import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from metaxlm.errors import MetaXLMError
from metaxlm.features.layers import encode_layers
from metaxlm.features.retrieval import retrieval_by_layer

SRC = ["the house is small", "the cat sleeps", "an open window", "the red chair near the window", "die Katze"]
TGT = ["das Haus ist klein", "die Katze schläft", "ein offenes Fenster", "der rote Stuhl am Fenster", "the cat"]


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    return AutoTokenizer.from_pretrained(str(tokenizer_dir))


@pytest.fixture(scope="module")
def model(tokenizer):
    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                                intermediate_size=64, pad_token_id=tokenizer.pad_token_id)).eval()


def test_identical_sides_retrieve_perfectly_at_every_layer(model, tokenizer):
    result = retrieval_by_layer(model, tokenizer, SRC, SRC, precision="fp32")
    assert result["layers"] == [0, 1, 2, 3]
    assert result["src2tgt"] == result["tgt2src"] == result["mean"] == [1.0] * 4


def test_accuracy_matches_a_direct_cosine_nearest_neighbour_count(model, tokenizer):
    result = retrieval_by_layer(model, tokenizer, SRC, TGT, layers=[1, 3], batch_size=2, precision="fp32")
    vectors = encode_layers(model, tokenizer, SRC + TGT, layers=[1, 3], precision="fp32")
    assert result["layers"] == [1, 3]
    for k, layer in enumerate([1, 3]):
        s, t = vectors[layer][:5], vectors[layer][5:]
        cos = torch.nn.functional.cosine_similarity(s[:, None], t[None], dim=-1)  # (src, tgt)
        src2tgt = sum(int(cos[i].argmax()) == i for i in range(5)) / 5
        tgt2src = sum(int(cos[:, j].argmax()) == j for j in range(5)) / 5
        assert result["src2tgt"][k] == pytest.approx(src2tgt)
        assert result["tgt2src"][k] == pytest.approx(tgt2src)
        assert result["mean"][k] == pytest.approx((src2tgt + tgt2src) / 2)


def test_sides_must_pair_up(model, tokenizer):
    with pytest.raises(MetaXLMError, match="same non-zero number"):
        retrieval_by_layer(model, tokenizer, SRC, TGT[:3])
    with pytest.raises(MetaXLMError):
        retrieval_by_layer(model, tokenizer, [], [])
