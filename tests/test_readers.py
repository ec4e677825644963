"""Readers: good input in every container (.gz, .xz), and bad input reported at the exact file and line."""

from __future__ import annotations

import gzip
import lzma
from pathlib import Path

import pytest

from metaxlm.data.readers import (
    Sentence,
    Token,
    count_lines,
    iter_lines,
    read_conllu,
    read_corpus,
    read_freedict,
    read_jsonl,
    read_jsonl_text,
    read_muse_dict,
    read_parallel,
    read_text,
)
from metaxlm.errors import ConfigError, DataError, SkipReport

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SUFFIXES = ["", ".gz", ".xz"]


def write(path: Path, content: str | bytes) -> Path:
    """Write content (text is UTF-8 encoded as is, so \\r\\n and a BOM survive), compressed by suffix."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    opener = {".gz": gzip.open, ".xz": lzma.open}.get(path.suffix, open)
    with opener(path, "wb") as f:
        f.write(data)
    return path


def error_of(make) -> DataError:
    """The DataError raised while consuming the iterator `make()` returns."""
    with pytest.raises(DataError) as info:
        list(make())
    return info.value


# --- iter_lines and count_lines -------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", SUFFIXES)
def test_iter_lines_strips_bom_and_crlf_keeps_blank_lines(tmp_path, suffix):
    p = write(tmp_path / f"a.txt{suffix}", "\ufeffone\r\n\r\ntwo\nthree")
    assert list(iter_lines(p)) == [(1, "one"), (2, ""), (3, "two"), (4, "three")]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_invalid_utf8_is_reported_at_its_line(tmp_path, suffix):
    p = write(tmp_path / f"file.txt{suffix}", b"ok\nfine\nbad \xff byte\nlast\n")
    err = error_of(lambda: iter_lines(p))
    assert (err.path, err.line) == (str(p), 3)
    assert str(err) == f"{p}:3: invalid UTF-8 (byte 0xff at column 5)"
    assert "file.txt" + suffix + ":3" in str(err)


def test_invalid_utf8_skipped_and_counted(tmp_path):
    p = write(tmp_path / "a.txt", b"\xc3\x28\nok\n\xe2\x82\nalso ok\n")
    report = SkipReport()
    assert list(iter_lines(p, skip_bad=True, report=report)) == [(2, "ok"), (4, "also ok")]
    assert report.skipped == 2
    assert report.examples == [f"{p}:1: invalid UTF-8 (byte 0xc3 at column 1)",
                               f"{p}:3: invalid UTF-8 (byte 0xe2 at column 1)"]


@pytest.mark.parametrize("content", ["", "\n  \n\t\n", "\ufeff\r\n"])
def test_empty_file(tmp_path, content):
    p = write(tmp_path / "e.txt.gz", content)
    err = error_of(lambda: iter_lines(p))
    assert str(err) == f"{p}: empty file" and err.line is None


def test_empty_file_raised_even_with_skip_bad(tmp_path):
    p = write(tmp_path / "e.txt", "")
    with pytest.raises(DataError, match="empty file"):
        list(read_text(p, skip_bad=True, report=SkipReport()))


def test_missing_file(tmp_path):
    p = tmp_path / "nope.txt"
    for make in (lambda: iter_lines(p), lambda: read_text(p), lambda: read_jsonl(p), lambda: read_conllu(p),
                 lambda: read_muse_dict(p), lambda: read_parallel(p), lambda: read_corpus(p)):
        err = error_of(make)
        assert str(err) == f"{p}: no such file" and err.line is None
    with pytest.raises(DataError, match="no such file"):
        count_lines(p)


def test_corrupt_gzip_is_a_data_error(tmp_path):
    p = tmp_path / "broken.txt.gz"
    whole = gzip.compress("".join(f"line {i}\n" for i in range(5000)).encode())
    p.write_bytes(whole[: len(whole) // 2])  # truncated
    err = error_of(lambda: iter_lines(p))
    assert str(err).startswith(f"{p}") and "cannot read" in str(err)


def corrupt_deflate_gzip(lines: int = 100) -> bytes:
    """A .gz whose header is fine but whose deflate data is not: zlib raises its own error, not an OSError."""
    whole = gzip.compress(b"hello world\n" * lines, mtime=0)
    return whole[:10] + bytes(b ^ 0x55 for b in whole[10:30]) + whole[30:]


def test_corrupt_deflate_data_is_a_data_error(tmp_path):
    p = tmp_path / "broken.txt.gz"
    p.write_bytes(corrupt_deflate_gzip())
    assert str(error_of(lambda: iter_lines(p))) == (f"{p}: cannot read: "
                                                    f"Error -3 while decompressing data: invalid block type")
    for nonblank in (False, True):
        with pytest.raises(DataError, match="cannot read: Error -3") as info:
            count_lines(p, nonblank=nonblank)
        assert (info.value.path, info.value.line) == (str(p), None)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_count_lines(tmp_path, suffix):
    assert count_lines(write(tmp_path / f"a{suffix}", "a\nb\n\nc\n")) == 4
    assert count_lines(write(tmp_path / f"b{suffix}", "a\nb")) == 2  # last line without newline counts
    assert count_lines(write(tmp_path / f"c{suffix}", "")) == 0


# --- text, JSON lines, corpus dispatch ------------------------------------------------------------------

@pytest.mark.parametrize("suffix", SUFFIXES)
def test_read_text_lines_and_documents(tmp_path, suffix):
    p = write(tmp_path / f"c.txt{suffix}", "\ufeff  first doc line 1 \r\nline 2\r\n\r\n\n second doc\n\n")
    assert list(read_text(p)) == ["first doc line 1", "line 2", "second doc"]
    assert list(read_text(p, unit="document")) == ["first doc line 1\nline 2", "second doc"]


def test_read_text_last_document_without_trailing_blank(tmp_path):
    p = write(tmp_path / "c.txt", "a\nb\n\nc\nd")
    assert list(read_text(p, unit="document")) == ["a\nb", "c\nd"]


def test_read_text_unknown_unit(tmp_path):
    p = write(tmp_path / "c.txt", "a\n")
    with pytest.raises(ConfigError, match="unit must be 'line' or 'document', got 'para'"):
        list(read_text(p, unit="para"))


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_read_jsonl(tmp_path, suffix):
    p = write(tmp_path / f"d.jsonl{suffix}", '\ufeff{"text": "hello", "id": 1}\r\n\n{"text": "wörld"}\n')
    assert list(read_jsonl(p)) == [{"text": "hello", "id": 1}, {"text": "wörld"}]
    assert list(read_jsonl_text(p)) == ["hello", "wörld"]


def test_read_jsonl_custom_field_and_empty_texts_dropped(tmp_path):
    p = write(tmp_path / "d.jsonl", '{"body": "a"}\n{"body": "  "}\n{"body": "b\\nc"}\n')
    assert list(read_jsonl_text(p, text_field="body")) == ["a", "b\nc"]


@pytest.mark.parametrize(("line", "message"), [
    ('{"text": "a",}', "invalid JSON: Expecting property name enclosed in double quotes (column 14)"),
    ("not json", "invalid JSON: Expecting value (column 1)"),
    ('["text", "a"]', "expected a JSON object, got list"),
    ('{"txt": "a"}', "missing field 'text'"),
    ('{"text": 5}', "field 'text' must be a string, got int"),
    ('{"text": "a", "n": 1' + "0" * 5000 + "}",
     "invalid JSON: Exceeds the limit (4300 digits) for integer string conversion: value has 5001 digits"),
    ('{"text": "a", "n": ' + "[" * 100_000 + "]" * 100_000 + "}", "invalid JSON: nested too deeply"),
])
def test_read_jsonl_bad_line(tmp_path, line, message):
    p = write(tmp_path / "bad.jsonl", '{"text": "ok"}\n' + line + "\n")
    err = error_of(lambda: read_jsonl(p))
    assert str(err) == f"{p}:2: {message}"


def test_read_jsonl_skip_bad_counts(tmp_path):
    p = write(tmp_path / "d.jsonl", '{"text": "a"}\n{oops\n[1]\n{"text": null}\n\n{"text": "b"}\n')
    report = SkipReport()
    assert list(read_jsonl_text(p, skip_bad=True, report=report)) == ["a", "b"]
    assert report.skipped == 3
    assert [e.split(": ")[0] for e in report.examples] == [f"{p}:2", f"{p}:3", f"{p}:4"]
    assert report.summary().startswith("skipped 3 bad lines")


def test_read_corpus_dispatch(tmp_path):
    jl = write(tmp_path / "c.jsonl.gz", '{"text": "from json"}\n')
    js = write(tmp_path / "c.json", '{"text": "json lines too"}\n')
    tx = write(tmp_path / "c.txt.xz", "plain\n\nmore\n")
    forced = write(tmp_path / "c.data", '{"text": "forced"}\n')
    assert list(read_corpus(jl)) == ["from json"]
    assert list(read_corpus(js)) == ["json lines too"]
    assert list(read_corpus(tx)) == ["plain", "more"]
    assert list(read_corpus(tx, unit="document")) == ["plain", "more"]
    assert list(read_corpus(forced)) == ['{"text": "forced"}']
    assert list(read_corpus(forced, fmt="jsonl")) == ["forced"]
    with pytest.raises(ConfigError, match="fmt must be"):
        read_corpus(tx, fmt="csv")
    with pytest.raises(DataError, match="is a directory"):
        read_corpus(tmp_path)


# --- parallel text --------------------------------------------------------------------------------------

def test_read_parallel_two_files(tmp_path):
    src = write(tmp_path / "x.en", "Hello .\r\n\nGood night\n")
    tgt = write(tmp_path / "x.de.gz", "\ufeffHallo .\n\n Gute Nacht \n")
    assert list(read_parallel(src, tgt)) == [("Hello .", "Hallo ."), ("Good night", "Gute Nacht")]


@pytest.mark.parametrize("skip_bad", [False, True])
def test_read_parallel_different_lengths(tmp_path, skip_bad):
    long = write(tmp_path / "long.en", "a\nb\nc\nd\n")
    short = write(tmp_path / "short.de", "A\nB\n")
    report = SkipReport()
    err = error_of(lambda: read_parallel(long, short, skip_bad=skip_bad, report=report))
    assert (err.path, err.line) == (str(short), 2)
    assert str(err) == f"{short}:2: file ends here, but {long} has more lines (files must be line-aligned)"
    err = error_of(lambda: read_parallel(short, long, skip_bad=skip_bad, report=report))
    assert (err.path, err.line) == (str(short), 2)
    assert report.skipped == 0


def test_read_parallel_one_side_empty(tmp_path):
    src = write(tmp_path / "s.txt", "a\n\nc\nd\n")
    tgt = write(tmp_path / "t.txt", "A\nB\n\nD\n")
    err = error_of(lambda: read_parallel(src, tgt))
    assert str(err) == f"{src}:2: empty line, but the other side is not"
    report = SkipReport()
    assert list(read_parallel(src, tgt, skip_bad=True, report=report)) == [("a", "A"), ("d", "D")]
    assert report.skipped == 2
    assert report.examples[1] == f"{tgt}:3: empty line, but the other side is not"


def test_read_parallel_bad_utf8_drops_the_pair_keeps_alignment(tmp_path):
    src = write(tmp_path / "s.txt", "a\nb\nc\n")
    tgt = write(tmp_path / "t.txt", b"A\n\xffB\nC\n")
    report = SkipReport()
    assert list(read_parallel(src, tgt, skip_bad=True, report=report)) == [("a", "A"), ("c", "C")]
    assert report.skipped == 1 and report.examples[0].startswith(f"{tgt}:2: invalid UTF-8")


def test_read_parallel_tsv(tmp_path):
    p = write(tmp_path / "p.tsv.xz", "cat\tKatze\r\n\nbig house\t großes Haus\n")
    assert list(read_parallel(p)) == [("cat", "Katze"), ("big house", "großes Haus")]


@pytest.mark.parametrize(("line", "problem"), [
    ("a\tb\tc", "got 3 columns"),
    ("just one", "got 1 columns"),
    ("a\t ", "a column is empty"),
])
def test_read_parallel_tsv_bad_line(tmp_path, line, problem):
    p = write(tmp_path / "p.tsv", f"x\ty\n{line}\nz\tw\n")
    err = error_of(lambda: read_parallel(p))
    assert str(err) == f"{p}:2: expected 2 non-empty tab-separated columns, {problem}"
    report = SkipReport()
    assert list(read_parallel(p, skip_bad=True, report=report)) == [("x", "y"), ("z", "w")]
    assert report.skipped == 1


# --- MUSE dictionaries ----------------------------------------------------------------------------------

def test_read_muse_dict(tmp_path):
    p = write(tmp_path / "en-de.txt.gz", "cat Katze\ndog\tHund\nice cream\tSpeise eis\n\n  the   die \n")
    assert list(read_muse_dict(p)) == [("cat", "Katze"), ("dog", "Hund"), ("ice cream", "Speise eis"),
                                       ("the", "die")]


def test_read_muse_dict_malformed(tmp_path):
    p = write(tmp_path / "d.txt", "cat Katze\nice cream Eis\nlonely\ta\tb\nok fine\n")
    err = error_of(lambda: read_muse_dict(p))
    assert str(err) == f"{p}:2: expected 'source<TAB>target' or 'source target', got 'ice cream Eis'"
    report = SkipReport()
    assert list(read_muse_dict(p, skip_bad=True, report=report)) == [("cat", "Katze"), ("ok", "fine")]
    assert report.skipped == 2 and report.examples[1].startswith(f"{p}:3: ")


# --- FreeDict (dictd) -----------------------------------------------------------------------------------

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64(n: int) -> str:
    """dictd's base64 number, written independently of the reader's decoder."""
    digits = ""
    while True:
        digits = _B64[n % 64] + digits
        n //= 64
        if not n:
            return digits


# Entries copied in the shapes of the real eng-deu, eng-tur, eng-jpn, eng-ell and eng-hin files.
ENTRIES = [
    ("00-database-info", "00-database-info\nThis is a meta entry\n"),
    ("bank", "bank /bˈaŋk/\nBankinstitut <neut>, Bank <fem> [fin.]\n"
             "      \"the presenting bank\"  - die vorlegende Bank\n"
             " see: {banks}, {private bank}\n\n"),
    ("run", "run /ɹˈʌn/ <v>\n [Am.] Laufmasche <fem>, Fallmasche <fem> [textil.]\n   Synonym: {ladder}\n\n"
            "         Note: colours\n"),
    ("adams wine", "Adam's wine /ˈadəmz wˈaɪn/\n [humor.]  [dated] Gänsewein <masc> [humor.]\n"),
    ("2lt", "Second Lieutenant /sˈɛkənd lɛftˈɛnənt/ (2LT /tˈuː ˌɛltˈiː/)\n"
            " [Br.] Leutnant <masc> [mil.] Lt.,  /ˌɛltˈiː/\n"),
    ("pluck", "pluck /plˈʌk/\n1. koparmak (çiçek, meyva), yolmak\n2. (argo) yağma etmek\n"
              "3. cesaret vermek. pluck up söküp çıkarmak\n4. b.h. tüylerini yolmak.\n5. ing. yazı masası\n"),
    ("bank", "bank //bæŋk// /[beɪŋk]/ <n>\n1. 貯金箱\ndevice used to store coins\n2. 銀行, バンク 2.\n"
             "institution\n 3.\nbranch office\n"),
    ("tue", "Tue /tjˈuː/ <n>\n火, 火曜\nabbreviation of Tuesday\n"),
    ("ive", "ive //ɪv// <suffix>\n \nUsed to form adjectives.\n"),
    ("annual percentage rate", "annual percentage rate, APR /ˈanjuːəl/\n\nετήσιο, ετήσιο ποσό επιβαρύνσεων,\n"
                               "    ΕΠΕ\n"),
    ("galley", "galley /ɡˈalɪ/ <N>\n1. लम्बी~नाव\n      \"Galleys were rowed by slaves.\"\n2. रसोईघर\n"),
    ("", "acute /ɐkjˈuːt/ (´)\nAkut <masc>\n"),  # a symbol key that dictd reduced to nothing
    ("bicolor chromis", "bicolor chromis /baɪkˈʌlə/\n\n"),  # no translation
]
EXPECTED = [
    ("bank", ["Bankinstitut", "Bank"]),
    ("run", ["Laufmasche", "Fallmasche"]),
    ("Adam's wine", ["Gänsewein"]),
    ("2LT", ["Leutnant Lt."]),
    ("pluck", ["koparmak", "yolmak", "yağma etmek", "cesaret vermek", "b.h. tüylerini yolmak",
               "ing. yazı masası"]),
    ("bank", ["貯金箱", "銀行", "バンク"]),
    ("Tue", ["火", "火曜"]),
    ("annual percentage rate", ["ετήσιο", "ετήσιο ποσό επιβαρύνσεων", "ΕΠΕ"]),
    ("galley", ["लम्बी नाव", "रसोईघर"]),
]


def make_dictd(tmp_path: Path, extra_index: str = "", suffix: str = ".dict.dz") -> tuple[Path, Path]:
    data, index = b"", []
    for word, text in ENTRIES:
        raw = text.encode("utf-8")
        index.append(f"{word}\t{b64(len(data))}\t{b64(len(raw))}\n")
        data += raw
    dict_path = tmp_path / f"eng-xxx{suffix}"
    dict_path.write_bytes(gzip.compress(data) if suffix.endswith(".dz") else data)
    index_path = write(tmp_path / "eng-xxx.index", "".join(index) + extra_index)
    return index_path, dict_path


@pytest.mark.parametrize("suffix", [".dict.dz", ".dict"])
def test_read_freedict(tmp_path, suffix):
    index_path, dict_path = make_dictd(tmp_path, suffix=suffix)
    assert list(read_freedict(index_path, dict_path)) == EXPECTED


def test_read_freedict_base64_numbers_beyond_one_digit(tmp_path):
    # 300 entries push offsets past 64 and 4096: multi-digit numbers must decode most significant first.
    entries = [(f"word{i}", f"word{i} /w/\nWort{i} <neut>\n") for i in range(300)]
    data = "".join(text for _, text in entries).encode()
    offsets = [0]
    for _, text in entries:
        offsets.append(offsets[-1] + len(text.encode()))
    index = "".join(f"{w}\t{b64(o)}\t{b64(len(t.encode()))}\n" for (w, t), o in zip(entries, offsets[:-1], strict=True))
    (tmp_path / "d.dict.dz").write_bytes(gzip.compress(data))
    write(tmp_path / "d.index", index)
    got = list(read_freedict(tmp_path / "d.index", tmp_path / "d.dict.dz"))
    assert len(got) == 300 and got[299] == ("word299", ["Wort299"]) and offsets[299] > 4096


@pytest.mark.parametrize(("line", "message"), [
    ("broken line without tabs", "expected 'headword<TAB>offset<TAB>length' (dictd base64 numbers)"),
    ("word\tA!\tB", "expected 'headword<TAB>offset<TAB>length' (dictd base64 numbers)"),
    ("word\t\tB", "expected 'headword<TAB>offset<TAB>length' (dictd base64 numbers)"),
    ("word\tBAAA\tB", "entry at offset 262144 (+1) is beyond the end of {dict} ({size} bytes)"),
])
def test_read_freedict_malformed_index_line(tmp_path, line, message):
    index_path, dict_path = make_dictd(tmp_path, extra_index=line + "\n")
    size = len(gzip.decompress(dict_path.read_bytes()))
    bad_line = len(ENTRIES) + 1
    err = error_of(lambda: read_freedict(index_path, dict_path))
    assert (err.path, err.line) == (str(index_path), bad_line)
    assert str(err) == f"{index_path}:{bad_line}: " + message.format(dict=dict_path, size=size)
    report = SkipReport()
    assert list(read_freedict(index_path, dict_path, skip_bad=True, report=report)) == EXPECTED
    assert report.skipped == 1


def test_read_freedict_corrupt_dz(tmp_path):
    index_path, dict_path = make_dictd(tmp_path)
    dict_path.write_bytes(corrupt_deflate_gzip())
    assert str(error_of(lambda: read_freedict(index_path, dict_path))).startswith(f"{dict_path}: cannot read: Error -3")


def test_read_freedict_missing_dict(tmp_path):
    index_path, _ = make_dictd(tmp_path)
    missing = tmp_path / "missing.dict.dz"
    assert str(error_of(lambda: read_freedict(index_path, missing))) == f"{missing}: no such file"


# --- CoNLL-U --------------------------------------------------------------------------------------------

def conllu_row(i, form, upos="NOUN", head="0", deprel="root"):
    return f"{i}\t{form}\t{form.lower()}\t{upos}\t_\t_\t{head}\t{deprel}\t_\t_"


GOOD_CONLLU = "\n".join([
    "# newdoc id = d1",
    "# sent_id = s1",
    "# text = Don't go.",
    "1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_",
    conllu_row(1, "Do", "AUX", "3", "aux"),
    conllu_row(2, "n't", "PART", "3", "advmod"),
    conllu_row(3, "go", "VERB"),
    "3.1\tgone\tgo\tVERB\t_\t_\t_\t_\t3:conj\t_",
    conllu_row(4, ".", "PUNCT", "3", "punct"),
    "",
    "# sent_id = s2",
    conllu_row(1, "Yes", "INTJ"),
]) + "\n"  # no blank line after the last sentence


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_read_conllu(tmp_path, suffix):
    p = write(tmp_path / f"t.conllu{suffix}", GOOD_CONLLU.replace("\n", "\r\n"))
    s1, s2 = read_conllu(p)
    assert (s1.sent_id, s1.text, s1.line) == ("s1", "Don't go.", 1)
    assert [t.form for t in s1.tokens] == ["Do", "n't", "go", "."]
    assert s1.tokens[0] == Token(1, "Do", "do", "AUX", "_", "_", "3", "aux")
    assert s2 == Sentence("s2", None, [Token(1, "Yes", "yes", "INTJ", "_", "_", "0", "root")], 11)


@pytest.mark.parametrize(("bad", "message"), [
    ("2\tgo\tgo\tVERB\t_\t_\t0\troot\t_", "expected 10 tab-separated columns, got 9"),
    ("two" + conllu_row(2, "go")[1:], "bad token id 'two'"),
    (conllu_row(3, "go"), "token id 3 out of order, expected 2"),
    (conllu_row(2, "go", "VERBAL"), "unknown UPOS 'VERBAL'"),
    (conllu_row(2, "go", "_"), "unknown UPOS '_'"),
    ("²" + conllu_row(2, "go")[1:], "bad token id '²'"),  # a digit to str.isdigit, not to int()
    ("٢" + conllu_row(2, "go")[1:], "bad token id '٢'"),
    ("9" * 5000 + conllu_row(2, "go")[1:], f"token id {'9' * 5000} out of order, expected 2"),
])
def test_read_conllu_bad_line(tmp_path, bad, message):
    text = "\n".join(["# sent_id = a", conllu_row(1, "Ok"), "", "# sent_id = b", conllu_row(1, "We"), bad,
                      conllu_row(3, "x"), "", conllu_row(1, "Fine"), ""])
    p = write(tmp_path / "bad.conllu", text)
    err = error_of(lambda: read_conllu(p))
    assert str(err) == f"{p}:6: {message}"
    report = SkipReport()
    got = list(read_conllu(p, skip_bad=True, report=report))
    assert [s.tokens[0].form for s in got] == ["Ok", "Fine"]
    assert report.skipped == 1  # the bad sentence counts once, however many bad lines it has
    assert report.examples == [f"{p}:6: {message}"]


def test_read_conllu_bad_utf8_skips_the_sentence(tmp_path):
    text = "\n".join([conllu_row(1, "A"), "", conllu_row(1, "B"), "2\tb\xff"]).encode("latin-1") + b"\n"
    p = write(tmp_path / "u.conllu", text)
    assert str(error_of(lambda: read_conllu(p))).startswith(f"{p}:4: invalid UTF-8")
    report = SkipReport()
    assert [s.tokens[0].form for s in read_conllu(p, skip_bad=True, report=report)] == ["A"]
    assert report.skipped == 1


@pytest.mark.shared
def test_read_conllu_ud_english_ewt_train():
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent")
    paths = sorted((SHARED_DATA / "ud" / "UD_English-EWT").glob("*train*.conllu"))
    if not paths:
        pytest.skip("UD_English-EWT train file is absent")
    sentences = list(read_conllu(paths[0]))
    assert len(sentences) == 12544  # as documented in shared/data/README.md
    assert all(s.sent_id and s.text and s.tokens for s in sentences)
    assert sentences[0].line == 1 and sentences[0].tokens[0].upos == "PROPN"


# --- control characters: the hostile-text policy ---------------------------------------------------------

@pytest.mark.parametrize("suffix", SUFFIXES)
def test_nul_makes_a_bad_line_named_by_file_and_line(tmp_path, suffix):
    p = write(tmp_path / f"c.txt{suffix}", "Hallo\nHola\0mundo\nBonjour\n")
    err = error_of(lambda: read_text(p))
    assert (err.path, err.line) == (str(p), 2)
    assert str(err) == f"{p}:2: control character U+0000 at column 5"
    report = SkipReport()
    assert list(read_text(p, skip_bad=True, report=report)) == ["Hallo", "Bonjour"]
    assert report.skipped == 1 and report.examples == [f"{p}:2: control character U+0000 at column 5"]


@pytest.mark.parametrize("char", [chr(c) for c in (*range(0x00, 0x09), *range(0x0b, 0x20), 0x7f)])
def test_every_ascii_control_but_tab_is_bad(tmp_path, char):
    p = write(tmp_path / "c.txt", f"ok\nx{char}y\n")
    assert str(error_of(lambda: iter_lines(p))) == f"{p}:2: control character U+{ord(char):04X} at column 2"


def test_tab_crlf_and_c1_controls_are_text(tmp_path):
    # C1 controls stay: the demo's zh and ko corpora hold some (mis-converted punctuation).
    p = write(tmp_path / "c.txt", "a\tb\r\nnext\x85line \x9b\u2028\n")
    assert list(iter_lines(p)) == [(1, "a\tb"), (2, "next\x85line \x9b\u2028")]


def test_a_lone_cr_inside_a_line_is_bad(tmp_path):
    p = write(tmp_path / "c.txt", "old\rmac\r\n")
    assert str(error_of(lambda: iter_lines(p))) == f"{p}:1: control character U+000D at column 4"


def test_a_file_of_control_characters_is_bad_not_empty(tmp_path):
    p = write(tmp_path / "c.txt", "\x0c\n\x00\n")
    assert count_lines(p, nonblank=True) == 2  # counted like the lines read_text reports
    report = SkipReport()
    assert list(read_text(p, skip_bad=True, report=report)) == [] and report.skipped == 2


@pytest.mark.parametrize(("field", "message"), [
    ('"Hola\\u0000mundo"', "field 'text': control character U+0000 at character 5"),
    ('"bell \\u0007"', "field 'text': control character U+0007 at character 6"),
    ('"half \\ud800 pair"', "field 'text': lone surrogate U+D800 at character 6"),
])
def test_jsonl_escapes_cannot_smuggle_control_characters(tmp_path, field, message):
    p = write(tmp_path / "d.jsonl", '{"text": "ok"}\n{"text": ' + field + '}\n{"text": "a\\tb\\r\\nc"}\n')
    assert str(error_of(lambda: read_jsonl_text(p))) == f"{p}:2: {message}"
    report = SkipReport()
    assert list(read_jsonl_text(p, skip_bad=True, report=report)) == ["ok", "a\tb\r\nc"]  # line breaks stay
    assert report.skipped == 1


def test_parallel_control_character_drops_the_pair_keeps_alignment(tmp_path):
    src = write(tmp_path / "s.txt", "a\nb\x1b[31m\nc\n")
    tgt = write(tmp_path / "t.txt", "A\nB\nC\n")
    assert str(error_of(lambda: read_parallel(src, tgt))) == f"{src}:2: control character U+001B at column 2"
    report = SkipReport()
    assert list(read_parallel(src, tgt, skip_bad=True, report=report)) == [("a", "A"), ("c", "C")]
    assert report.skipped == 1


@pytest.mark.parametrize(("read", "name", "content"), [
    (read_parallel, "p.tsv", "x\ty\nbad\0\tside\nz\tw\n"),
    (read_muse_dict, "d.txt", "cat Katze\nbad\0 side\ndog Hund\n"),
    (read_corpus, "c.jsonl", '{"text": "a"}\n{"text": "\0"}\n{"text": "b"}\n'),  # a raw NUL, not an escape
])
def test_line_readers_report_and_skip_control_characters(tmp_path, read, name, content):
    p = write(tmp_path / name, content)
    err = error_of(lambda: read(p))
    assert (err.path, err.line) == (str(p), 2) and "control character U+0000" in err.message
    report = SkipReport()
    assert len(list(read(p, skip_bad=True, report=report))) == 2 and report.skipped == 1


def test_conllu_control_character_skips_the_sentence(tmp_path):
    text = "\n".join([conllu_row(1, "A"), "", conllu_row(1, "B\x08"), conllu_row(2, "c"), "", conllu_row(1, "D")])
    p = write(tmp_path / "c.conllu", text + "\n")
    assert str(error_of(lambda: read_conllu(p))) == f"{p}:3: control character U+0008 at column 4"
    report = SkipReport()
    assert [s.tokens[0].form for s in read_conllu(p, skip_bad=True, report=report)] == ["A", "D"]
    assert report.skipped == 1


def test_freedict_control_characters_in_index_and_entry(tmp_path):
    index_path, dict_path = make_dictd(tmp_path, extra_index="bad\0word\tA\tB\n")
    assert str(error_of(lambda: read_freedict(index_path, dict_path))).endswith(
        f":{len(ENTRIES) + 1}: control character U+0000 at column 4")
    # ESC in place of a letter of the entry "bank" (index line 2), offsets unchanged: reported at its index line.
    raw = "".join(text for _, text in ENTRIES).replace("Bankinstitut", "Bank\x1bnstitut").encode()
    dict_path.write_bytes(gzip.compress(raw))
    err = error_of(lambda: read_freedict(index_path, dict_path))
    offset = len(ENTRIES[0][1].encode())
    assert (err.line, err.message) == (2, f"entry at offset {offset} of {dict_path}: "
                                          "control character U+001B at character 18")
