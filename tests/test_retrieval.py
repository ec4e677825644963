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


# -- the dev/test split (issue 65): the first pairs are dev, each part retrieved among its own pairs ----------------
MORE_SRC = [*SRC, "the small cat", "a red house", "the window is open", "the chair is red", "das Fenster"]
MORE_TGT = [*TGT, "die kleine Katze", "ein rotes Haus", "das Fenster ist offen", "der Stuhl ist rot", "the window"]


def test_each_part_scores_as_the_set_of_its_own_pairs(model, tokenizer):
    """dev = the first 30% (3 of 10), test = the rest; each part's accuracy is that of retrieval on its pairs alone:
    a dev sentence is never a distractor of a test query."""
    from metaxlm.features.retrieval import retrieval_dev_test

    split = retrieval_dev_test(model, tokenizer, MORE_SRC, MORE_TGT, dev_fraction=0.3, precision="fp32")
    assert split["pairs"] == {"dev": 3, "test": 7}
    dev = retrieval_by_layer(model, tokenizer, MORE_SRC[:3], MORE_TGT[:3], precision="fp32")
    test = retrieval_by_layer(model, tokenizer, MORE_SRC[3:], MORE_TGT[3:], precision="fp32", ranks=True)
    for key in ("src2tgt", "tgt2src", "mean"):
        assert split["dev"][key] == pytest.approx(dev[key]) and split["test"][key] == pytest.approx(test[key])
    assert split["test"]["ranks"] == test["ranks"] and "ranks" not in split["dev"]
    whole = retrieval_dev_test(model, tokenizer, MORE_SRC, MORE_TGT, dev_fraction=0.0, precision="fp32")
    assert "dev" not in whole and whole["pairs"] == {"dev": 0, "test": 10}
    assert whole["test"]["mean"] == pytest.approx(retrieval_by_layer(model, tokenizer, MORE_SRC, MORE_TGT,
                                                                     precision="fp32")["mean"])


def test_tatoeba_split_rule():
    """Tatoeba's 1,000 pairs a language: 300 dev / 700 test (README, docs/evaluation.md)."""
    from metaxlm.config import RetrievalEvalSpec
    from metaxlm.data.examples import dev_test_split

    assert RetrievalEvalSpec(path="x", format="tatoeba").dev_fraction == 0.3
    assert dev_test_split(1000, 0.3) == (range(300), range(300, 1000))


def test_the_reported_layer_is_chosen_on_dev_and_scored_on_test(model, tokenizer, tmp_path, monkeypatch):
    from metaxlm.config import EvalConfig, RetrievalEvalSpec
    from metaxlm.evaluation import recipe
    from metaxlm.metrics import highest_accuracy_layer
    from metaxlm.records import RetrievalResult

    pairs = {"de": (MORE_SRC, MORE_TGT), "fr": (MORE_TGT, MORE_SRC)}
    monkeypatch.setattr(recipe, "retrieval_pairs", lambda spec, lang, pivot: pairs[lang])
    eval_cfg = EvalConfig(precision="fp32")
    result = recipe.evaluate_retrieval(model, tokenizer, RetrievalEvalSpec(path="x"), ["en", "de", "fr"], "en",
                                       eval_cfg, False)
    RetrievalResult.model_validate(result)
    assert result["split"] == {"dev_fraction": 0.3, "dev_pairs": {"de": 3, "fr": 3}, "test_pairs": {"de": 7, "fr": 7}}
    dev = [(a + b) / 2 for a, b in zip(result["per_language"]["de"]["dev"]["mean"],
                                       result["per_language"]["fr"]["dev"]["mean"], strict=True)]
    assert result["dev_average"] == pytest.approx(dev) and result["chosen_on"] == "dev"
    assert result["chosen_layer"] == highest_accuracy_layer(result["layers"], dev)
    test = [(a + b) / 2 for a, b in zip(result["per_language"]["de"]["mean"], result["per_language"]["fr"]["mean"],
                                        strict=True)]
    assert result["average"] == pytest.approx(test)
    assert len(result["items"]["per_language"]["de"]["rows"][0]) == 7  # the test pairs' ranks
    whole = recipe.evaluate_retrieval(model, tokenizer, RetrievalEvalSpec(path="x", dev_fraction=0), ["en", "de"],
                                      "en", eval_cfg, False)
    assert whole["chosen_layer"] == whole["layers"][-1] and whole["chosen_on"] == "fixed default"
    assert "dev_average" not in whole


def test_ties_go_to_the_shallower_layer():
    from metaxlm.metrics import highest_accuracy_layer

    assert highest_accuracy_layer([0, 1, 2, 3], [0.5, 0.9, 0.9, 0.2]) == 1
    assert highest_accuracy_layer([0, 1], [float("nan"), None]) is None
