"""transfer.pieces: how a vocabulary marks word starts (metaspace, WordPiece, byte-level) and its specials."""

import pytest
from tokenizers import Tokenizer, decoders, pre_tokenizers
from tokenizers.models import BPE, WordPiece
from transformers import BertTokenizer, PreTrainedTokenizerFast, XLMRobertaTokenizer

from metaxlm.transfer.pieces import PieceScheme, scheme_of, special_ids

BERT_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "house", "##ing"]


@pytest.mark.parametrize("kind, marker, piece, expected", [
    ("wordpiece", "##", "house", (True, "house")),
    ("wordpiece", "##", "##ing", (False, "ing")),
    ("wordpiece", "##", "##", (True, "##")),  # the marker alone is a word, not an empty continuation
    ("metaspace", "▁", "▁house", (True, "house")),
    ("metaspace", "▁", "ing", (False, "ing")),
    ("metaspace", "▁", "▁New▁York", (True, "New York")),
    ("bytelevel", "Ġ", "ĠcafÃ©", (True, "café")),
    ("bytelevel", "Ġ", "ing", (False, "ing")),
    ("bytelevel", "Ġ", "Ã", (True, None)),  # half of a UTF-8 character: not text
    ("bytelevel", "Ġ", "ĠÃ", (False, None)),
])
def test_split(kind, marker, piece, expected):
    assert PieceScheme(kind, marker).split(piece) == expected


def test_scheme_of_each_tokenizer_kind():
    bert = BertTokenizer(vocab={p: i for i, p in enumerate(BERT_VOCAB)})
    assert scheme_of(bert) == PieceScheme("wordpiece", "##")
    xlmr = XLMRobertaTokenizer(vocab=[("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁a", -1.0)])
    assert scheme_of(xlmr) == PieceScheme("metaspace", "▁")

    wp = Tokenizer(WordPiece({"[UNK]": 0, "a": 1, "@@b": 2}, unk_token="[UNK]", continuing_subword_prefix="@@"))
    assert scheme_of(PreTrainedTokenizerFast(tokenizer_object=wp)) == PieceScheme("wordpiece", "@@")

    bl = Tokenizer(BPE({"a": 0, "Ġa": 1}, []))
    bl.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bl.decoder = decoders.ByteLevel()
    assert scheme_of(PreTrainedTokenizerFast(tokenizer_object=bl)) == PieceScheme("bytelevel", "Ġ")

    ms = Tokenizer(BPE({"a": 0, "_a": 1}, []))
    ms.pre_tokenizer = pre_tokenizers.Metaspace(replacement="_")
    assert scheme_of(PreTrainedTokenizerFast(tokenizer_object=ms)) == PieceScheme("metaspace", "_")


def test_special_ids():
    bert = BertTokenizer(vocab={p: i for i, p in enumerate(BERT_VOCAB)})
    assert special_ids(bert) == {0, 1, 2, 3, 4}
    xlmr = XLMRobertaTokenizer(vocab=[("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁a", -1.0),
                                      ("<mask>", 0.0)])
    assert special_ids(xlmr) == {0, 1, 2, 3, 5}
