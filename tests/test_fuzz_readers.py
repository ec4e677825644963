"""Fuzzing every text reader with hypothesis: hostile files in, a correct read or a DataError naming the file out.

The files are built from generated lines (text with NUL and other control characters, invalid UTF-8, blank and
whitespace-only lines, CRLF and lone CR, very long lines, missing tabs, wrong column counts, hostile JSON) or are
random bytes, stored plain or as .gz/.xz, some with corrupt payloads. Each reader is checked against a model of the
policy written here without the readers (`model_lines`): with skip_bad the items read are exactly those of the
valid lines and every bad line is counted in the SkipReport (nothing dropped silently); without it the DataError
names the file and the first bad line, and is the SkipReport's first example. Any other exception fails the test,
and so does an input using more than 5 s of CPU time (a hang; see fuzz_helpers.py).

Budget: each of the 12 tests below tries FUZZ_EXAMPLES inputs (fuzz_helpers.py: 150, so 1,800 generated inputs
per run, each read with and without skip_bad); METAXLM_FUZZ_EXAMPLES=2000 runs a deeper search.
"""

from __future__ import annotations

import gzip
import json
import lzma
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fuzz_helpers import fuzz
from hypothesis import strategies as st

from metaxlm.data.readers import (
    UPOS_TAGS,
    count_lines,
    iter_lines,
    read_conllu,
    read_corpus,
    read_freedict,
    read_muse_dict,
    read_parallel,
)
from metaxlm.errors import DataError, SkipReport
from metaxlm.features.alignment import read_pairs
from metaxlm.finetune.translate import read_sentences

# --- the policy, modelled independently of the readers ---------------------------------------------------------

BAD_IN_LINE = frozenset(map(chr, [*range(0x00, 0x09), *range(0x0A, 0x20), 0x7F]))  # all ASCII controls but TAB
BAD_IN_TEXT = BAD_IN_LINE - {"\n", "\r"}  # text spanning lines (JSON fields, dictd entries) keeps line breaks


def has_bad_char(text: str, *, multiline: bool = False) -> bool:
    if multiline:
        return any(c in BAD_IN_TEXT or "\ud800" <= c <= "\udfff" for c in text)
    return any(c in BAD_IN_LINE for c in text)


def model_lines(data: bytes) -> list[tuple[int, str | None]]:
    """(line number, text) for each line of `data`; text None for a bad line (not UTF-8, or a control character)."""
    pieces = data.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()  # a final newline ends the last line, it does not start another
    out: list[tuple[int, str | None]] = []
    for n, raw in enumerate(pieces, 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            out.append((n, None))
            continue
        if n == 1 and text.startswith("\ufeff"):
            text = text[1:]
        text = text.rstrip("\r")
        out.append((n, None if has_bad_char(text) else text))
    return out


def is_empty(lines: list[tuple[int, str | None]]) -> bool:
    """No line with content (a bad line counts as content): the readers' "empty file" error."""
    return all(text is not None and not text.strip() for _, text in lines)


BAD = object()  # what `item_of` returns for a bad line


@dataclass
class Expected:
    items: list = field(default_factory=list)
    bad: list[int] = field(default_factory=list)  # line numbers, in file order
    empty: bool = False


def expect(lines: list[tuple[int, str | None]], item_of: Callable[[str], object]) -> Expected:
    """Items of the valid lines under `item_of` (None: the line gives nothing, BAD: the line is bad)."""
    out = Expected(empty=is_empty(lines))
    for n, text in lines:
        item = BAD if text is None else item_of(text)
        if item is BAD:
            out.bad.append(n)
        elif item is not None:
            out.items.append(item)
    return out


# --- generated input -------------------------------------------------------------------------------------------

ANY_CHAR = st.characters(codec="utf-8", exclude_characters="\n")  # control characters included
HOSTILE = ["\0", "Hola\0mundo", "\x1b[31m", "\x07", "\x08", "\x0b", "\x0c", "\r", "\x7f", "\x1c", "\x85", "\x9b",
           "\u2028", "\ufeff", "\t", " ", "\u3000", "\xa0", "²", "١", "|||"]
INVALID_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xe2\x82", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\x80"]

text_piece = st.one_of(st.text(ANY_CHAR, max_size=10), st.sampled_from(HOSTILE))
# Valid text half of the time, so that lines get past the control-character check into each format's own parsing.
clean_text = st.lists(st.sampled_from(["Hola", "mundo", "Haus", "猫", "ދިވެހި", "go", ".", "1", "a-b"]),
                      max_size=4).map(" ".join)
line_text = st.one_of(clean_text, st.lists(text_piece, max_size=4).map("".join))
long_line = st.builds(lambda unit, times: unit * times, st.text(ANY_CHAR, min_size=1, max_size=3),
                      st.integers(2_000, 30_000))


def encoded(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    return strategy.map(lambda text: text.encode("utf-8", "surrogatepass"))


def no_newline(data: bytes) -> bytes:
    return data.replace(b"\n", b" ")


invalid_utf8_line = st.lists(st.one_of(encoded(text_piece), st.sampled_from(INVALID_UTF8)), min_size=1,
                             max_size=4).map(b"".join)
blank_line = st.sampled_from([b"", b" ", b"\t", b"\r", b"  \t ", "\u3000".encode()])
any_line = st.one_of(encoded(line_text), invalid_utf8_line, blank_line, st.binary(max_size=16).map(no_newline),
                     encoded(long_line))


@st.composite
def file_bytes(draw, line: st.SearchStrategy[bytes] = any_line, max_lines: int = 8) -> bytes:
    """Lines with LF or CRLF ends (the last maybe none), maybe a BOM; or, now and then, random bytes."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=200))
    lines = draw(st.lists(line, max_size=max_lines))
    data = b"".join(no_newline(text) + draw(st.sampled_from([b"\n", b"\r\n"])) for text in lines)
    if lines and draw(st.booleans()):
        data = data.rstrip(b"\r\n")
    if draw(st.integers(0, 9)) == 0:
        data = "\ufeff".encode() + data
    return data


@dataclass
class Stored:
    suffix: str  # "", ".gz" or ".xz"
    payload: bytes  # what is written to disk
    intact: bool  # False: a damaged container, whose reading may fail with a DataError naming the file
    content: bytes | None  # what the standard library unpacks the payload to (None: it cannot)


def unpacked(suffix: str, payload: bytes) -> bytes | None:
    try:
        return gzip.decompress(payload) if suffix == ".gz" else lzma.decompress(payload)
    except (OSError, EOFError, lzma.LZMAError, zlib.error):
        return None


@st.composite
def stored(draw, data: bytes, suffixes: tuple[str, ...] = ("", ".gz", ".xz")) -> Stored:
    suffix = draw(st.sampled_from(suffixes))
    if not suffix:
        return Stored(suffix, data, True, data)
    packed = gzip.compress(data, mtime=0) if suffix == ".gz" else lzma.compress(data)
    damage = draw(st.sampled_from(["none", "none", "truncate", "flip", "garbage"]))
    if damage == "truncate":
        packed = packed[: draw(st.integers(0, len(packed) - 1))]
    elif damage == "flip":
        at = draw(st.integers(0, len(packed) - 1))
        packed = packed[:at] + bytes([packed[at] ^ draw(st.integers(1, 255))]) + packed[at + 1:]
    elif damage == "garbage":
        packed = draw(st.binary(max_size=64))
    return Stored(suffix, packed, damage == "none", data if damage == "none" else unpacked(suffix, packed))


def put(directory: str, name: str, file: Stored) -> Path:
    path = Path(directory) / (name + file.suffix)
    path.write_bytes(file.payload)
    return path


# --- running a reader --------------------------------------------------------------------------------------------

@dataclass
class Outcome:
    items: list | None
    error: DataError | None
    report: SkipReport


def run(read: Callable[..., object], **kw) -> Outcome:
    """Items read, or the DataError; any other exception propagates and fails the test."""
    report = SkipReport(max_examples=1)
    try:
        return Outcome(list(read(report=report, **kw)), None, report)
    except DataError as error:
        return Outcome(None, error, report)


def readable_content(file: Stored, *outcomes: Outcome) -> bytes | None:
    """The content the readers must have read, or None when a DataError was the right answer (damaged container)."""
    if not file.intact and any(outcome.error for outcome in outcomes):
        return None
    assert file.content is not None, "read a container that the standard library cannot unpack"
    return file.content


def check(read: Callable[..., object], path: Path, file: Stored, model: Callable[[bytes], Expected]) -> None:
    """`read(skip_bad=..., report=...)` with and without skip_bad against the model of the file at `path`."""
    skipping, strict = run(read, skip_bad=True), run(read, skip_bad=False)
    for outcome in (skipping, strict):
        if outcome.error is not None:
            assert outcome.error.path == str(path), outcome.error
            assert outcome.error.line is None or outcome.error.line >= 1
    content = readable_content(file, skipping, strict)
    if content is None:
        return
    expected = model(content)
    if expected.empty:
        for outcome in (skipping, strict):
            assert outcome.error is not None and (outcome.error.line, outcome.error.message) == (None, "empty file")
        return
    assert skipping.error is None, skipping.error
    assert (skipping.items, skipping.report.skipped) == (expected.items, len(expected.bad))
    if expected.bad:
        assert strict.error is not None and strict.error.line == expected.bad[0], strict.error
        assert skipping.report.examples == [str(strict.error)]  # the same message, whether raised or counted
    else:
        assert (strict.items, strict.error) == (expected.items, None)


# --- iter_lines and count_lines ----------------------------------------------------------------------------------

def expect_numbered_lines(content: bytes) -> Expected:
    lines = model_lines(content)
    return Expected([(n, text) for n, text in lines if text is not None], [n for n, text in lines if text is None],
                    is_empty(lines))


@fuzz(st.data())
def test_fuzz_iter_lines_and_count_lines(data):
    file = data.draw(stored(data.draw(file_bytes())))
    with tempfile.TemporaryDirectory() as tmp:
        path = put(tmp, "lines.txt", file)
        check(lambda **kw: iter_lines(path, **kw), path, file, expect_numbered_lines)
        for nonblank in (False, True):
            try:
                counted = count_lines(path, nonblank=nonblank)
            except DataError as error:
                assert not file.intact and (error.path, error.line) == (str(path), None), error
                continue
            assert file.content is not None, "counted a container that the standard library cannot unpack"
            raw_lines = file.content.split(b"\n")[: len(model_lines(file.content))]
            assert counted == sum(1 for raw in raw_lines if not nonblank or raw.strip(b" \t\r\n"))


# --- text, JSON lines and read_corpus's dispatch -----------------------------------------------------------------

@fuzz(st.data())
def test_fuzz_read_corpus_text_lines(data):
    file = data.draw(stored(data.draw(file_bytes())))
    with tempfile.TemporaryDirectory() as tmp:
        path = put(tmp, "corpus.txt", file)
        check(lambda **kw: read_corpus(path, **kw), path, file,
              lambda content: expect(model_lines(content), lambda text: text.strip() or None))


def expect_documents(lines: list[tuple[int, str | None]]) -> Expected:
    """Blank lines end documents; a bad line is left out (counted), the document goes on around it."""
    out = Expected(empty=is_empty(lines))
    document: list[str] = []
    for n, text in lines:
        if text is None:
            out.bad.append(n)
        elif text.strip():
            document.append(text.strip())
        elif document:
            out.items.append("\n".join(document))
            document = []
    if document:
        out.items.append("\n".join(document))
    return out


@fuzz(st.data())
def test_fuzz_read_corpus_text_documents(data):
    file = data.draw(stored(data.draw(file_bytes(max_lines=12))))
    with tempfile.TemporaryDirectory() as tmp:
        path = put(tmp, "corpus.txt", file)
        check(lambda **kw: read_corpus(path, unit="document", **kw), path, file,
              lambda content: expect_documents(model_lines(content)))


json_text = st.one_of(st.text(st.characters(codec="utf-8"), max_size=12), st.sampled_from(HOSTILE),
                      st.sampled_from(["\ud800", "a\udfffb", "line\nbreak", "crlf\r\nbreak", "  "]))
json_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), json_text)
json_value = st.recursive(json_scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                               st.dictionaries(json_text, inner, max_size=3)),
                          max_leaves=6)
json_object = st.dictionaries(st.one_of(st.sampled_from(["text", "id"]), json_text), json_value, max_size=3)
HOSTILE_JSON = ['{"text": "ok", "n": 1' + "0" * 5000 + "}", '{"text": "ok", "deep": ' + "[" * 3000 + "]" * 3000 + "}",
                "[" * 100_000, '{"text": "a", "text": 5}', '{"text": "x"} trailing', "NaN", '{"text": "\\u0000"}',
                '{"text": "\\ud800"}', '{"text": "\\uZZZZ"}', '{"text": "\t"}', "{}", '{"text": "ok"}']


@st.composite
def json_line(draw) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind <= 5:
        value = draw(json_object) if kind <= 3 else draw(json_value)
        return json.dumps(value, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    if kind <= 7:
        return draw(st.sampled_from(HOSTILE_JSON)).encode()
    return draw(any_line)


def json_item(text: str) -> object:
    """The text field of a JSON line, None (blank line or empty text), or BAD."""
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):  # the model may use anything: only the readers are under test
        return BAD
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str) or has_bad_char(obj["text"], multiline=True):
        return BAD
    return obj["text"] if obj["text"].strip() else None


@fuzz(st.data())
def test_fuzz_read_corpus_jsonl(data):
    file = data.draw(stored(data.draw(file_bytes(line=json_line()))))
    with tempfile.TemporaryDirectory() as tmp:
        path = put(tmp, "corpus.jsonl", file)
        check(lambda **kw: read_corpus(path, **kw), path, file, lambda content: expect(model_lines(content), json_item))


# --- parallel text and MUSE dictionaries -------------------------------------------------------------------------

column = st.one_of(line_text.map(lambda text: text.replace("\t", " ")), st.sampled_from(["", " ", "word"]))
tsv_line = st.one_of(st.lists(column, max_size=4).map("\t".join), line_text).map(lambda text: text.encode())


def tsv_pair(text: str) -> object:
    if not text.strip():
        return None
    columns = [c.strip() for c in text.split("\t")]
    return (columns[0], columns[1]) if len(columns) == 2 and all(columns) else BAD


@fuzz(st.data())
def test_fuzz_read_parallel_tsv(data):
    file = data.draw(stored(data.draw(file_bytes(line=st.one_of(tsv_line, any_line)))))
    with tempfile.TemporaryDirectory() as tmp:
        path = put(tmp, "pairs.tsv", file)
        check(lambda **kw: read_parallel(path, **kw), path, file,
              lambda content: expect(model_lines(content), tsv_pair))


def expect_aligned(src: list[tuple[int, str | None]], tgt: list[tuple[int, str | None]]) -> Expected:
    """Pairs of two equally long files: a bad line on either side, or text on one side only, drops the pair."""
    out = Expected()
    for (n, s), (_, t) in zip(src, tgt, strict=True):
        if s is None or t is None or bool(s.strip()) != bool(t.strip()):
            out.bad.append(n)
        elif s.strip():
            out.items.append((s.strip(), t.strip()))
    return out


@fuzz(st.data())
def test_fuzz_read_parallel_two_files(data):
    src_content = data.draw(file_bytes(max_lines=6))
    # often as long as the source, so that the pairs are read, not just the length mismatch reported
    if data.draw(st.booleans()):
        tgt_content = b"".join(no_newline(data.draw(any_line)) + b"\n" for _ in model_lines(src_content))
    else:
        tgt_content = data.draw(file_bytes(max_lines=6))
    src_file, tgt_file = data.draw(stored(src_content)), data.draw(stored(tgt_content))
    with tempfile.TemporaryDirectory() as tmp:
        src_path, tgt_path = put(tmp, "x.en", src_file), put(tmp, "x.de", tgt_file)
        skipping, strict = (run(read_parallel, src_path=src_path, tgt_path=tgt_path, skip_bad=skip)
                            for skip in (True, False))
        for outcome in (skipping, strict):
            if outcome.error is not None:
                assert outcome.error.path in (str(src_path), str(tgt_path)), outcome.error
        src_read, tgt_read = readable_content(src_file, skipping, strict), readable_content(tgt_file, skipping, strict)
        if src_read is None or tgt_read is None:
            return
        src, tgt = model_lines(src_read), model_lines(tgt_read)
        if is_empty(src) or is_empty(tgt):  # "empty file", unless a bad line or the length mismatch comes first
            assert skipping.error is not None and strict.error is not None
        elif len(src) != len(tgt):
            short = (str(src_path), len(src)) if len(src) < len(tgt) else (str(tgt_path), len(tgt))
            assert skipping.error is not None and (skipping.error.path, skipping.error.line) == short, skipping.error
            assert strict.error is not None
        else:
            expected = expect_aligned(src, tgt)
            assert skipping.error is None, skipping.error
            assert (skipping.items, skipping.report.skipped) == (expected.items, len(expected.bad))
            if expected.bad:
                assert strict.error is not None and strict.error.line == expected.bad[0], strict.error
                assert skipping.report.examples == [str(strict.error)]
            else:
                assert (strict.items, strict.error) == (expected.items, None)


muse_line = st.one_of(st.lists(column, max_size=3).map("\t".join),
                      st.lists(column, max_size=3).map(" ".join), line_text).map(lambda text: text.encode())


def muse_pair(text: str) -> object:
    if not text.strip():
        return None
    fields = [f.strip() for f in text.split("\t")] if "\t" in text else text.split()
    return (fields[0], fields[1]) if len(fields) == 2 and all(fields) else BAD


@fuzz(st.data())
def test_fuzz_read_muse_dict(data):
    file = data.draw(stored(data.draw(file_bytes(line=st.one_of(muse_line, any_line)))))
    with tempfile.TemporaryDirectory() as tmp:
        path = put(tmp, "en-de.txt", file)
        check(lambda **kw: read_muse_dict(path, **kw), path, file,
              lambda content: expect(model_lines(content), muse_pair))


# --- FreeDict (dictd) ----------------------------------------------------------------------------------------------

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64(n: int) -> str:
    digits = ""
    while True:
        digits, n = B64[n % 64] + digits, n // 64
        if not n:
            return digits


def b64_value(digits: str) -> int:
    value = 0
    for c in digits:
        value = value * 64 + B64.index(c)
    return value


def dictd_key(word: str) -> str:
    return " ".join("".join(c for c in word.lower() if c.isalnum() or c.isspace()).split())


sense_line = st.one_of(st.sampled_from(["1. Haus, Heim", "2. (argo) Bank <fem>", "  wrapped on", '"an example"',
                                        "see: {x}", "3.", " 1. 2.", "/prə/ x", "{a) b", "b.h. yolmak.", ""]),
                       line_text)
entry_text = st.builds(lambda head, senses: "\n".join([head, *senses]) + "\n", line_text,
                       st.lists(sense_line, max_size=4))
entry_bytes = st.one_of(encoded(entry_text), invalid_utf8_line, encoded(long_line))
headword = st.one_of(st.text("abcdefgh ", min_size=1, max_size=8), st.sampled_from(["00databaseinfo",
                     "00-database-short", "!!", "Adam's"]), line_text)


@st.composite
def dictd_files(draw) -> tuple[bytes, bytes]:
    """(index, data): index lines pointing at generated entries, mixed with hostile index lines."""
    entries = draw(st.lists(entry_bytes, max_size=5))
    data, index = b"", []
    for entry in entries:
        word = draw(headword).replace("\t", " ")
        index.append(f"{word}\t{b64(len(data))}\t{b64(len(entry))}".encode("utf-8", "surrogatepass"))
        data += entry
    bad_numbers = st.sampled_from(["w\tA\t", "w\t!\tB", "w\tA", "w\tA\tB\tC", f"w\t{b64(len(data))}\tB",
                                   "w\t" + "/" * 40 + "\tB", "no tabs at all"]).map(str.encode)
    index += draw(st.lists(st.one_of(bad_numbers, any_line), max_size=3))
    order = draw(st.permutations(range(len(index))))
    return b"".join(no_newline(index[i]) + b"\n" for i in order), data


def expect_freedict(index: list[tuple[int, str | None]], data: bytes) -> tuple[Expected, int]:
    """The bad index lines, and how many entries at most can give translations (the rest give nothing)."""
    out, candidates = Expected(empty=is_empty(index)), 0
    for n, text in index:
        if text is None:
            out.bad.append(n)
            continue
        if not text.strip():
            continue
        word, *numbers = text.split("\t")
        if len(numbers) != 2 or not all(numbers) or not set("".join(numbers)) <= set(B64):
            out.bad.append(n)
            continue
        offset, length = map(b64_value, numbers)
        if offset + length > len(data):
            out.bad.append(n)
            continue
        if not dictd_key(word) or dictd_key(word).replace(" ", "").startswith("00database"):
            continue
        try:
            entry = data[offset:offset + length].decode("utf-8")
        except UnicodeDecodeError:
            out.bad.append(n)
            continue
        if has_bad_char(entry, multiline=True):
            out.bad.append(n)
        else:
            candidates += 1
    return out, candidates


@fuzz(st.data())
def test_fuzz_read_freedict(data):
    index_content, dict_content = data.draw(dictd_files())
    dict_file = data.draw(stored(dict_content, suffixes=("", ".gz")))  # dictd data is plain or gzip (.dict.dz)
    with tempfile.TemporaryDirectory() as tmp:
        index_path = Path(tmp) / "eng-deu.index"
        index_path.write_bytes(index_content)
        dict_path = Path(tmp) / ("eng-deu.dict" + (".dz" if dict_file.suffix else ""))
        dict_path.write_bytes(dict_file.payload)
        skipping, strict = (run(read_freedict, index_path=index_path, dict_path=dict_path, skip_bad=skip)
                            for skip in (True, False))
        for outcome in (skipping, strict):
            if outcome.error is not None:
                assert outcome.error.path in (str(index_path), str(dict_path)), outcome.error
        dict_read = readable_content(dict_file, skipping, strict)
        if dict_read is None:
            return
        expected, candidates = expect_freedict(model_lines(index_content), dict_read)
        if expected.empty:
            assert skipping.error is not None and skipping.error.message == "empty file"
            return
        assert skipping.error is None, skipping.error
        assert skipping.report.skipped == len(expected.bad) and len(skipping.items) <= candidates
        for word, translations in skipping.items:
            assert isinstance(word, str) and translations and all(isinstance(t, str) and t for t in translations)
            assert not any(has_bad_char(text) for text in (word, *translations))
        if expected.bad:
            assert strict.error is not None and (strict.error.path, strict.error.line) == \
                (str(index_path), expected.bad[0])
        else:
            assert (strict.items, strict.error) == (skipping.items, None)


# --- CoNLL-U -------------------------------------------------------------------------------------------------------

token_id = st.one_of(st.integers(0, 5).map(str), st.sampled_from(["1-2", "2-3", "1.1", "01", "²", "١", "9" * 5000,
                                                                   "", "x", "-1", " 1", "1e3"]))
conllu_text = line_text.map(lambda text: text.replace("\t", " "))
upos = st.one_of(st.sampled_from(sorted(UPOS_TAGS)), st.sampled_from(["_", "VERBAL", "noun"]), conllu_text)


@st.composite
def conllu_line(draw) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind <= 5:
        columns = [draw(token_id), draw(conllu_text), draw(conllu_text), draw(upos), "_", "_", "0", "root", "_", "_"]
        columns = columns[: draw(st.sampled_from([10, 10, 10, 9, 1]))] + ["_"] * draw(st.sampled_from([0, 0, 1]))
        return "\t".join(columns).encode("utf-8")
    if kind <= 7:
        return draw(st.sampled_from(["# sent_id = s", "# text = a b", "#", "# text", "", " "])).encode()
    return draw(any_line)


def blocks(lines: list[tuple[int, str | None]]) -> list[int]:
    """First line of each run of non-blank lines (a bad line is not blank): the sentences to account for."""
    starts, previous_blank = [], True
    for n, text in lines:
        blank = text is not None and not text.strip()
        if not blank and previous_blank:
            starts.append(n)
        previous_blank = blank
    return starts


@fuzz(st.data())
def test_fuzz_read_conllu(data):
    file = data.draw(stored(data.draw(file_bytes(line=conllu_line(), max_lines=14))))
    with tempfile.TemporaryDirectory() as tmp:
        path = put(tmp, "ud.conllu", file)
        skipping, strict = (run(lambda **kw: read_conllu(path, **kw), skip_bad=skip) for skip in (True, False))
        for outcome in (skipping, strict):
            if outcome.error is not None:
                assert outcome.error.path == str(path) and (outcome.error.line is None or outcome.error.line >= 1)
        content = readable_content(file, skipping, strict)
        if content is None:
            return
        lines = model_lines(content)
        if is_empty(lines):
            assert skipping.error is not None and skipping.error.message == "empty file"
            return
        starts = blocks(lines)
        assert skipping.error is None, skipping.error
        # every sentence is read or counted as skipped, none lost
        assert len(skipping.items) + skipping.report.skipped == len(starts)
        for sentence in skipping.items:
            assert sentence.line in starts
            assert [token.id for token in sentence.tokens] == list(range(1, len(sentence.tokens) + 1))
            assert all(token.upos in UPOS_TAGS and not has_bad_char(token.form) for token in sentence.tokens)
        if strict.error is None:
            assert strict.items == skipping.items and skipping.report.skipped == 0
        else:
            assert skipping.report.examples[0] == str(strict.error)


# --- the readers outside readers.py: `metaxlm translate` and `metaxlm align` inputs ----------------------------------

@fuzz(st.data())
def test_fuzz_read_sentences(data):
    file = data.draw(stored(data.draw(file_bytes())))
    with tempfile.TemporaryDirectory() as tmp:
        path = put(tmp, "src.txt", file)
        outcome = run(lambda report: read_sentences(path))
        if outcome.error is not None:
            assert outcome.error.path == str(path)
        content = readable_content(file, outcome)
        if content is None:
            return
        lines = model_lines(content)
        bad = [n for n, text in lines if text is None]
        if bad:
            assert outcome.error is not None and outcome.error.line == bad[0], outcome.error
            return
        assert outcome.error is None, outcome.error
        # one output per input line, blank ones included, so translations stay line-aligned
        assert outcome.items == ([""] * len(lines) if is_empty(lines) else [text for _, text in lines])


def alignment_pair(text: str) -> object:
    sides = text.split("|||")
    return (sides[0].split(), sides[1].split()) if len(sides) == 2 else BAD


@fuzz(st.data())
def test_fuzz_read_pairs_fast_align_format(data):
    pair_line = st.builds(lambda a, b: f"{a} ||| {b}".encode(), line_text, line_text)
    file = data.draw(stored(data.draw(file_bytes(line=st.one_of(pair_line, pair_line, any_line)))))
    with tempfile.TemporaryDirectory() as tmp:
        path = put(tmp, "pairs.txt", file)
        strict = run(lambda report: read_pairs(path, None))
        if strict.error is not None:
            assert strict.error.path == str(path)
        content = readable_content(file, strict)
        if content is None:
            return
        expected = expect(model_lines(content), alignment_pair)  # a blank line is bad here: it has no "|||"
        if expected.bad:
            assert strict.error is not None and strict.error.line == expected.bad[0], strict.error
        elif expected.empty:
            assert strict.error is not None and strict.error.message == "empty file"
        else:
            assert (strict.items, strict.error) == (expected.items, None)


@fuzz(st.data())
def test_fuzz_read_pairs_two_files(data):
    src_content, tgt_content = data.draw(file_bytes(max_lines=5)), data.draw(file_bytes(max_lines=5))
    src, tgt = model_lines(src_content), model_lines(tgt_content)
    with tempfile.TemporaryDirectory() as tmp:
        src_path, tgt_path = Path(tmp) / "a.src", Path(tmp) / "a.tgt"
        src_path.write_bytes(src_content)
        tgt_path.write_bytes(tgt_content)
        outcome = run(lambda report: read_pairs(src_path, tgt_path))
        if outcome.error is not None:
            assert outcome.error.path in (str(src_path), str(tgt_path))
            assert outcome.error.line is None or outcome.error.line >= 1
            return
        assert len(src) == len(tgt) and not is_empty(src) and not is_empty(tgt)
        assert all(text is not None for _, text in src + tgt)
        assert outcome.items == [(s.split(), t.split()) for (_, s), (_, t) in zip(src, tgt, strict=True)]

