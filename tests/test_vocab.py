import json

import pytest
from transformers import AutoTokenizer

from metaxlm.config import CorpusSpec, VocabConfig
from metaxlm.data.readers import read_text
from metaxlm.errors import DataError
from metaxlm.vocab import load_tokenizer, train_vocab, trim_vocab
from metaxlm.vocab.load import SPM_FILE


def test_train_writes_autotokenizer_dir(tokenizer_dir, corpora):
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    assert (tokenizer_dir / SPM_FILE).exists()
    # XLM-R id layout
    assert [tok.bos_token_id, tok.pad_token_id, tok.eos_token_id, tok.unk_token_id] == [0, 1, 2, 3]
    assert tok.mask_token_id == len(tok) - 1
    for lang, path in corpora.items():
        line = next(read_text(path))
        ids = tok(line, add_special_tokens=False)["input_ids"]
        assert tok.unk_token_id not in ids, lang  # every script is covered
        assert tok.decode(ids) == line


def test_vocab_stats_follow_alpha(tokenizer_dir):
    stats = json.loads((tokenizer_dir / "vocab_stats.json").read_text())
    assert stats["corpus_sizes"] == {"en": 3000, "de": 1000, "ru": 300, "zh": 100}
    assert sum(stats["sampled_texts"].values()) == 4000
    # zh has 100 lines but gets p_zh * 4000 draws (upsampled): alpha rebalancing, not raw shares
    p = stats["sampling_probs"]
    assert stats["sampled_texts"]["zh"] == pytest.approx(p["zh"] * 4000, abs=1)
    assert stats["sampled_texts"]["zh"] > 100


def test_load_spm_model_file_and_dir(tokenizer_dir):
    from_file = load_tokenizer(tokenizer_dir / SPM_FILE)
    from_dir = load_tokenizer(tokenizer_dir)
    text = "the cat sleeps"
    assert from_file(text)["input_ids"] == from_dir(text)["input_ids"]


def test_load_errors(tmp_path):
    with pytest.raises(DataError, match="no such tokenizer"):
        load_tokenizer(tmp_path / "missing")
    bad = tmp_path / "x.txt"
    bad.write_text("hi")
    with pytest.raises(DataError, match="x.txt: expected a sentencepiece"):
        load_tokenizer(bad)


def test_trim_round_trip(tokenizer_dir, corpora, tmp_path):
    texts = list(read_text(corpora["de"]))[:200] + list(read_text(corpora["ru"]))[:50]
    info = trim_vocab(tokenizer_dir, texts, tmp_path / "trim", progress=False)
    old, new = load_tokenizer(tokenizer_dir), AutoTokenizer.from_pretrained(str(tmp_path / "trim"))
    assert info["new_vocab_size"] == len(new) < info["old_vocab_size"] == len(old)
    new_to_old = json.loads((tmp_path / "trim" / "trim_map.json").read_text())["new_to_old"]
    assert len(new_to_old) == len(new)
    for text in texts:  # the trimming corpus tokenizes exactly as before, up to the id map
        assert [new_to_old[i] for i in new(text)["input_ids"]] == old(text)["input_ids"]
    # special tokens keep their ids
    assert new_to_old[:4] == [0, 1, 2, 3] and new_to_old[new.mask_token_id] == old.mask_token_id
    # English-only pieces are gone
    en_only = old("window", add_special_tokens=False)["input_ids"]
    assert all(old.convert_ids_to_tokens(i) not in new.get_vocab() for i in en_only if i != old.unk_token_id)
    # the source tokenizer, whose ids the old ids are, is kept beside (full-vocabulary exports write it)
    untrimmed = AutoTokenizer.from_pretrained(str(tmp_path / "trim" / "untrimmed"))
    assert untrimmed.get_vocab() == old.get_vocab() and untrimmed("window")["input_ids"] == old("window")["input_ids"]


def test_trim_min_count_keeps_fewer(tokenizer_dir, corpora, tmp_path):
    texts = list(read_text(corpora["de"]))[:300]
    a = trim_vocab(tokenizer_dir, texts, tmp_path / "a", min_count=1, progress=False)
    b = trim_vocab(tokenizer_dir, texts, tmp_path / "b", min_count=10_000, progress=False)
    assert b["new_vocab_size"] < a["new_vocab_size"]


def test_trim_needs_sentencepiece(tmp_path):
    with pytest.raises(DataError, match="needs a sentencepiece tokenizer directory"):
        trim_vocab(tmp_path, ["x"], tmp_path / "out", progress=False)


def test_tiny_corpus_takes_the_size_it_supports(tmp_path):
    p = tmp_path / "en.txt"
    p.write_text("a b c\nb c d\n")
    stats = train_vocab({"en": CorpusSpec(path=str(p))}, VocabConfig(size=500, sample_sentences=10), tmp_path / "v",
                        alpha=0.7, progress=False)
    assert stats["vocab_size"] < 500 and stats["requested_size"] == 500


def test_a_saved_tokenizer_keeps_its_sentencepiece_model(tokenizer_dir, tmp_path):
    """save_pretrained of a fast tokenizer drops the sentencepiece model; every metaxlm export keeps it (trimming and
    vocabulary matching read it), and saving into the directory it came from is a no-op."""
    from metaxlm.vocab.load import save_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    tok.save_pretrained(tmp_path / "plain")
    assert not (tmp_path / "plain" / SPM_FILE).exists()  # why save_tokenizer exists
    save_tokenizer(tok, tmp_path / "kept")
    assert (tmp_path / "kept" / SPM_FILE).read_bytes() == (tokenizer_dir / SPM_FILE).read_bytes()
    again = load_tokenizer(tmp_path / "kept")
    save_tokenizer(again, tmp_path / "kept")
    assert load_tokenizer(tmp_path / "kept")("Hallo Welt")["input_ids"] == tok("Hallo Welt")["input_ids"]
