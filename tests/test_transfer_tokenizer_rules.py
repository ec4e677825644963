"""transfer.tokenizer_rules: what the source tokenizer does to text (normalizer, isolated characters)."""

from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordPiece
from transformers import BertTokenizer, PreTrainedTokenizerFast

from metaxlm.transfer.tokenizer_rules import is_cjk, is_punct, normalizer_for, splits_cjk, splits_punct

VOCAB = {"[UNK]": 0, "a": 1}


def slow_bert(lower=True, **kw):
    return BertTokenizer(vocab=VOCAB, do_lower_case=lower, **kw)


def fast(normalizer=None, pre_tokenizer=None):
    tk = Tokenizer(WordPiece(VOCAB, unk_token="[UNK]"))
    if normalizer is not None:
        tk.normalizer = normalizer
    if pre_tokenizer is not None:
        tk.pre_tokenizer = pre_tokenizer
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]")


def test_normalizer_of_python_and_fast_bert():
    assert normalizer_for(slow_bert())("Café HAUS") == "cafe haus"  # uncased BERT: lowercase + strip accents
    assert normalizer_for(slow_bert(lower=False))("Café HAUS") == "Café HAUS"
    assert normalizer_for(slow_bert(strip_accents=False))("Café") == "café"
    uncased = fast(normalizers.BertNormalizer(lowercase=True))
    assert normalizer_for(uncased)("Café\tHAUS\x00") == "cafe haus"  # clean_text: tab -> space, NUL dropped
    cased = fast(normalizers.BertNormalizer(lowercase=False))
    assert normalizer_for(cased)("Café HAUS") == "Café HAUS"
    assert normalizer_for(fast())("Café HAUS") == "Café HAUS"  # no normalizer: nothing changes


def test_normalizer_sequences_and_other_components():
    seq = fast(normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()]))
    assert normalizer_for(seq)("Café Ｘ") == "café x"  # NFKC folds the full-width X; accents stay
    strip = fast(normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Strip(right=False)]))
    assert normalizer_for(strip)("  Café  ") == "Cafe  "
    # A component with no Python equivalent here runs through the component itself.
    replace = fast(normalizers.Sequence([normalizers.Replace("``", '"'), normalizers.Lowercase()]))
    assert normalizer_for(replace)("``A``") == '"a"'


def test_isolated_characters():
    assert is_cjk("東") and is_cjk("京")
    assert not is_cjk("あ") and not is_cjk("한") and not is_cjk("a")  # kana and hangul are not split by BERT
    assert is_punct(".") and is_punct("$") and is_punct("^") and is_punct("。") and is_punct("«")
    assert not is_punct("a") and not is_punct("東") and not is_punct(" ")

    assert splits_cjk(slow_bert()) and splits_punct(slow_bert())
    bert_fast = fast(normalizers.BertNormalizer(), pre_tokenizers.BertPreTokenizer())
    assert splits_cjk(bert_fast) and splits_punct(bert_fast)
    no_cjk = fast(normalizers.BertNormalizer(handle_chinese_chars=False), pre_tokenizers.BertPreTokenizer())
    assert not splits_cjk(no_cjk) and splits_punct(no_cjk)
    nested = fast(None, pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]))
    assert splits_punct(nested) and not splits_cjk(nested)
    whitespace = fast(None, pre_tokenizers.WhitespaceSplit())
    assert not splits_punct(whitespace) and not splits_cjk(whitespace)
