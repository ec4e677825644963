"""Streaming readers for every input format metaxlm accepts, each validating what it reads.

Every reader builds on one line iterator (`_lines`) that opens plain, `.gz` and `.xz` files, decodes each
line strictly as UTF-8 and numbers it, so bad input is reported as `DataError("file:line: ...")` at the
line where it is. With `skip_bad=True` per-line errors are counted in the caller's `SkipReport` instead;
whole-file errors (missing, empty, parallel files of different lengths) are always raised.

Control characters: a line holding an ASCII control character other than TAB (U+0000-U+001F, U+007F; a CR
that does not end the line counts too) is a bad line, like one that is not UTF-8. Text that may span lines
(JSON text fields, dictd entries) may also hold LF and CR. See `text_problem`.
"""

from __future__ import annotations

import gzip
import json
import lzma
import re
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain, zip_longest
from pathlib import Path

from metaxlm.errors import ConfigError, DataError, SkipReport
from metaxlm.roots import missing_data_hint
from metaxlm.textpolicy import text_problem

__all__ = [
    "Sentence", "Token", "count_lines", "iter_lines", "parse_json", "read_conllu", "read_corpus", "read_freedict",
    "read_jsonl", "read_jsonl_text", "read_muse_dict", "read_parallel", "read_text", "text_problem",
]

PathLike = str | Path


# --- the shared line iterator ---------------------------------------------------------------------------

# What reading a truncated or corrupt .gz/.xz (or an unreadable file) raises; zlib's error is no OSError.
_READ_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error)


def _open_binary(path: Path):
    if path.is_dir():
        raise DataError(path, None, "is a directory, expected a file")
    if not path.exists():
        raise DataError(path, None, "no such file" + missing_data_hint(path))
    opener = {".gz": gzip.open, ".xz": lzma.open}.get(path.suffix, open)
    return opener(path, "rb")


def _lines(path: PathLike) -> Iterator[tuple[int, str | DataError]]:
    """(line_no, text) for every line; a line that is not UTF-8 or holds a control character comes as a
    DataError, so that callers that must keep lines aligned (parallel files, CoNLL-U sentences) decide how
    to skip it."""
    path = Path(path)
    has_text = False
    line_no = 0
    try:
        with _open_binary(path) as f:
            for line_no, raw in enumerate(f, 1):  # byte lines: a bad byte is reported at its own line
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    has_text = True
                    message = f"invalid UTF-8 (byte {raw[e.start]:#04x} at column {e.start + 1})"
                    yield line_no, DataError(path, line_no, message)
                    continue
                if line_no == 1:
                    text = text.removeprefix("\ufeff")
                text = text.rstrip("\r\n")
                if problem := text_problem(text):
                    has_text = True
                    yield line_no, DataError(path, line_no, problem)
                    continue
                has_text = has_text or bool(text.strip())
                yield line_no, text
    except _READ_ERRORS as e:
        raise DataError(path, line_no + 1 if line_no else None, f"cannot read: {e}") from None
    if not has_text:
        raise DataError(path, None, "empty file")


def _fail(error: DataError, skip_bad: bool, report: SkipReport | None) -> None:
    """Raise a per-line error, or with skip_bad count it and let the caller move on."""
    if not skip_bad:
        raise error
    if report is not None:
        report.add(error)


def iter_lines(
    path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None
) -> Iterator[tuple[int, str]]:
    """(line_no, line without newline) for every line, blank ones included."""
    for line_no, text in _lines(path):
        if isinstance(text, DataError):
            _fail(text, skip_bad, report)
            continue
        yield line_no, text


def count_lines(path: PathLike, *, nonblank: bool = False) -> int:
    """Number of lines (a last line without newline counts), reading in 1 MiB blocks; with `nonblank`, only
    lines with a byte other than space, TAB, CR and LF (without decoding: what read_text yields or reports
    as bad, give or take lines of non-ASCII spaces; a line of form feeds is bad, not blank)."""
    try:
        with _open_binary(Path(path)) as f:
            if nonblank:
                return sum(1 for line in f if line.strip(b" \t\r\n"))
            n, last = 0, b"\n"
            while block := f.read(1 << 20):
                n += block.count(b"\n")
                last = block[-1:]
    except _READ_ERRORS as e:
        raise DataError(path, None, f"cannot read: {e}") from None
    return n + (last != b"\n")


# --- plain text, JSON lines, corpora --------------------------------------------------------------------

def read_text(path: PathLike, *, unit: str = "line", skip_bad: bool = False,
              report: SkipReport | None = None) -> Iterator[str]:
    """unit="line": the non-blank lines, stripped; unit="document": blank-line-separated documents."""
    if unit not in ("line", "document"):
        raise ConfigError(f"unit must be 'line' or 'document', got {unit!r}")
    doc: list[str] = []
    for _, line in iter_lines(path, skip_bad=skip_bad, report=report):
        line = line.strip()
        if unit == "line":
            if line:
                yield line
        elif line:
            doc.append(line)
        elif doc:
            yield "\n".join(doc)
            doc = []
    if doc:
        yield "\n".join(doc)


def parse_json(text: str, path: PathLike, line_no: int | None = None) -> object:
    """json.loads with each way hostile JSON fails as a DataError: bad syntax, but also nesting past Python's
    recursion limit and integers past its 4300-digit limit, which json raises differently. `line_no` is the
    line `text` comes from; None when `text` is a whole file, whose syntax errors then name their own line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        line = e.lineno if line_no is None else line_no
        raise DataError(path, line, f"invalid JSON: {e.msg} (column {e.colno})") from None
    except RecursionError:
        raise DataError(path, line_no, "invalid JSON: nested too deeply") from None
    except ValueError as e:  # "Exceeds the limit (4300 digits) for integer string conversion: ...; use ..."
        raise DataError(path, line_no, f"invalid JSON: {str(e).split(';')[0]}") from None


def read_jsonl(path: PathLike, *, text_field: str = "text", skip_bad: bool = False,
               report: SkipReport | None = None) -> Iterator[dict]:
    """One JSON object per non-blank line, each with a string `text_field` that passes `text_problem`."""
    for line_no, line in iter_lines(path, skip_bad=skip_bad, report=report):
        if not line.strip():
            continue
        try:
            obj = parse_json(line, path, line_no)
        except DataError as error:
            _fail(error, skip_bad, report)
            continue
        if not isinstance(obj, dict):
            problem = f"expected a JSON object, got {type(obj).__name__}"
        elif text_field not in obj:
            problem = f"missing field {text_field!r}"
        elif not isinstance(obj[text_field], str):
            problem = f"field {text_field!r} must be a string, got {type(obj[text_field]).__name__}"
        elif text_issue := text_problem(obj[text_field], multiline=True):  # JSON escapes ("\u0000") hide them
            problem = f"field {text_field!r}: {text_issue}"
        else:
            yield obj
            continue
        _fail(DataError(path, line_no, problem), skip_bad, report)


def read_jsonl_text(path: PathLike, *, text_field: str = "text", skip_bad: bool = False,
                    report: SkipReport | None = None) -> Iterator[str]:
    """The `text_field` of each JSON line; empty texts carry nothing to train on and are dropped."""
    for obj in read_jsonl(path, text_field=text_field, skip_bad=skip_bad, report=report):
        if obj[text_field].strip():
            yield obj[text_field]


def read_corpus(path: PathLike, *, fmt: str = "auto", text_field: str = "text", unit: str = "line",
                skip_bad: bool = False, report: SkipReport | None = None) -> Iterator[str]:
    """Texts of a corpus file; fmt "auto" picks jsonl for .jsonl/.json (also under .gz/.xz), else text."""
    if fmt not in ("auto", "text", "jsonl"):
        raise ConfigError(f"fmt must be 'auto', 'text' or 'jsonl', got {fmt!r}")
    path = Path(path)
    if path.is_dir():  # callers expand directories, so that each file is named in errors and reports
        raise DataError(path, None, "is a directory, expected a file")
    if fmt == "auto":
        name = path.name.removesuffix(".gz").removesuffix(".xz")
        fmt = "jsonl" if name.endswith((".jsonl", ".json")) else "text"
    if fmt == "jsonl":
        return read_jsonl_text(path, text_field=text_field, skip_bad=skip_bad, report=report)
    return read_text(path, unit=unit, skip_bad=skip_bad, report=report)


# --- parallel text and bilingual dictionaries -----------------------------------------------------------

def read_parallel(src_path: PathLike, tgt_path: PathLike | None = None, *, skip_bad: bool = False,
                  report: SkipReport | None = None) -> Iterator[tuple[str, str]]:
    """(source, target) pairs from two line-aligned files, or from one TSV file when tgt_path is None.

    Lines blank on both sides are skipped; a line empty on one side only is an error at that line.
    """
    if tgt_path is None:
        for line_no, line in iter_lines(src_path, skip_bad=skip_bad, report=report):
            if not line.strip():
                continue
            cols = [c.strip() for c in line.split("\t")]
            if len(cols) == 2 and all(cols):
                yield cols[0], cols[1]
            else:
                problem = f"got {len(cols)} columns" if len(cols) != 2 else "a column is empty"
                _fail(DataError(src_path, line_no, f"expected 2 non-empty tab-separated columns, {problem}"),
                      skip_bad, report)
        return
    # Bad UTF-8 on either side drops the pair, never one line of it, so the files stay aligned.
    n_src = n_tgt = 0
    for src, tgt in zip_longest(_lines(src_path), _lines(tgt_path)):
        if src is None or tgt is None:
            short, n, other = (src_path, n_src, tgt_path) if src is None else (tgt_path, n_tgt, src_path)
            raise DataError(short, n, f"file ends here, but {other} has more lines (files must be line-aligned)")
        (n_src, s), (n_tgt, t) = src, tgt
        if isinstance(s, DataError) or isinstance(t, DataError):
            _fail(s if isinstance(s, DataError) else t, skip_bad, report)
            continue
        s, t = s.strip(), t.strip()
        if s and t:
            yield s, t
        elif s or t:
            _fail(DataError(tgt_path if s else src_path, n_src, "empty line, but the other side is not"),
                  skip_bad, report)


def read_muse_dict(path: PathLike, *, skip_bad: bool = False,
                   report: SkipReport | None = None) -> Iterator[tuple[str, str]]:
    """MUSE pairs "src tgt": tab-separated (sides may contain spaces), else exactly two words."""
    for line_no, line in iter_lines(path, skip_bad=skip_bad, report=report):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split("\t")] if "\t" in line else line.split()
        if len(fields) == 2 and all(fields):
            yield fields[0], fields[1]
        else:
            problem = f"expected 'source<TAB>target' or 'source target', got {line.strip()!r}"
            _fail(DataError(path, line_no, problem), skip_bad, report)


# dictd .index numbers are base64 digits, most significant first.
_DICTD_DIGITS = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
_LABEL = re.compile(r"(see|Synonyms?|Antonyms?|Note):")  # cross-references and usage notes, not translations
_SENSE = re.compile(r"\d+\.(\s+|$)")
_NOTE = re.compile(r"[<(\[{][^<>()\[\]{}]*[>)\]}]")  # grammar/domain/usage note; eng-hin mixes "{...)"
_PRONUNCIATION = re.compile(r"\s/[^/]+/(?=[\s,]|$)")  # eng-deu: "Lt., /ˌɛltˈiː/" (not "er/sie")
_SENSE_REFS = re.compile(r"(\s+\d+\.)+$")  # WikDict (eng-jpn) "水 2." = also sense 2
# eng-tur senses run on into sub-entries after a full stop ("zarif. superbly muhteşem bir şekilde"); the
# dots of "b.h.", "ing." (İngiltere) and "..." are not full stops.
_FULL_STOP = re.compile(r"(?<![.])(?<!\.\w)(?<!\bing)\.(?:\s|$)")
_UNMATCHED = re.compile(r"^[^<(\[{]*[>)\]}]|[<(\[{].*$")  # a note cut by a sense or item boundary


def _dictd_number(digits: str) -> int:
    n = 0
    for c in digits:
        n = n * 64 + _DICTD_DIGITS[c]
    return n


def _dictd_key(word: str) -> str:
    """dictd's index key: lower case, letters, digits and spaces only."""
    return " ".join("".join(c for c in word.lower() if c.isalnum() or c.isspace()).split())


def _freedict_headword(index_word: str, entry: str) -> str:
    """The headword as spelt in the entry ("Adam's wine", "1SG"), which the index key lowercases and strips
    of punctuation ("adams wine"); the index key itself when no spelling in the header line matches."""
    header = entry.split("\n", 1)[0]  # "run /ɹˈʌn/ (ran /ɹˈan/ <>, run /ɹˈʌn/ <>) <v>"
    spellings = re.split(r"\s+/+[^/]+/+|\s*<[^>]*>|\s*[(),]\s*", header)
    key = _dictd_key(index_word)
    return next((w.strip() for w in spellings if w.strip() and _dictd_key(w) == key), index_word.strip())


def _freedict_translations(entry: str) -> list[str]:
    """Translations of one TEI-derived plain-text entry (formats of eng-deu/fra/spa/ell/jpn/tur/hin).

    A sense is a numbered line "2. ...", or in an unnumbered entry its first content line. Indented lines
    after it continue wrapped text (eng-ell); unindented ones are English glosses (eng-jpn), skipped.
    """
    senses: list[str] = []
    numbered: list[bool] = []
    in_sense = False
    for line in entry.split("\n")[1:]:  # line 1 repeats headword and pronunciation
        text = line.strip()
        if not line or text.startswith('"') or _LABEL.match(text):  # blank, example, cross-reference
            continue
        m = _SENSE.match(text)
        if m or not senses:  # eng-jpn has " " as an empty first line, so it counts as one
            senses.append(text[m.end():] if m else text)
            numbered.append(m is not None)
            in_sense = True
        elif in_sense and line[0].isspace():
            senses[-1] += " " + text
        else:
            in_sense = False  # an English gloss (eng-jpn) ends the sense's translations
    out: list[str] = []
    for sense, is_numbered in zip(senses, numbered, strict=True):
        while (stripped := _NOTE.sub(" ", sense)) != sense:  # repeat for nested notes
            sense = stripped
        sense = _PRONUNCIATION.sub(" ", sense).replace("~", " ")  # eng-hin joins words with "~"
        sense = _SENSE_REFS.sub("", sense)
        if is_numbered:  # only numbered senses (eng-tur, -hin, -fra, -spa) end in full stops
            sense = _FULL_STOP.split(sense, maxsplit=1)[0]
        for item in re.split(r"[,;]", sense):
            item = " ".join(_UNMATCHED.sub("", item).split())
            if any(c.isalpha() for c in item) and item not in out:
                out.append(item)
    return out


def read_freedict(index_path: PathLike, dict_path: PathLike, *, skip_bad: bool = False,
                  report: SkipReport | None = None) -> Iterator[tuple[str, list[str]]]:
    """(headword, translations) for each entry of a FreeDict dictd dictionary (.index + .dict[.dz]).

    Meta entries ("00database...") and entries without translations are left out.
    """
    dict_path = Path(dict_path)
    # The index is sorted by headword, not by offset: unpack the data once into a temporary file to seek
    # in, instead of re-reading the gzip stream from its start for every backward jump.
    if not dict_path.is_file():
        raise DataError(dict_path, None, "no such file")
    with tempfile.TemporaryFile() as data:
        try:
            with (gzip.open if dict_path.suffix == ".dz" else open)(dict_path, "rb") as f:
                shutil.copyfileobj(f, data)
        except _READ_ERRORS as e:  # not gzip, or truncated
            raise DataError(dict_path, None, f"cannot read: {e}") from None
        size = data.tell()
        for line_no, line in iter_lines(index_path, skip_bad=skip_bad, report=report):
            if not line.strip():
                continue
            word, *numbers = line.split("\t")
            if len(numbers) != 2 or not all(numbers) or not set("".join(numbers)) <= _DICTD_DIGITS.keys():
                problem = "expected 'headword<TAB>offset<TAB>length' (dictd base64 numbers)"
                _fail(DataError(index_path, line_no, problem), skip_bad, report)
                continue
            offset, length = map(_dictd_number, numbers)
            if offset + length > size:
                problem = f"entry at offset {offset} (+{length}) is beyond the end of {dict_path} ({size} bytes)"
                _fail(DataError(index_path, line_no, problem), skip_bad, report)
                continue
            if not _dictd_key(word) or _dictd_key(word).replace(" ", "").startswith("00database"):
                continue  # meta entries, and symbol keys dictd reduced to nothing
            data.seek(offset)
            try:
                entry = data.read(length).decode("utf-8")
            except UnicodeDecodeError:
                problem = f"entry at offset {offset} of {dict_path} is not valid UTF-8"
                _fail(DataError(index_path, line_no, problem), skip_bad, report)
                continue
            if entry_issue := text_problem(entry, multiline=True):
                _fail(DataError(index_path, line_no, f"entry at offset {offset} of {dict_path}: {entry_issue}"),
                      skip_bad, report)
                continue
            if translations := _freedict_translations(entry):
                yield _freedict_headword(word, entry), translations


# --- CoNLL-U ---------------------------------------------------------------------------------------------

UPOS_TAGS = frozenset(
    "ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X".split()
)


@dataclass
class Token:
    id: int
    form: str
    lemma: str
    upos: str
    xpos: str
    feats: str
    head: str
    deprel: str


@dataclass
class Sentence:
    sent_id: str | None
    text: str | None
    tokens: list[Token]
    line: int  # where the sentence starts


def _conllu_token(cols: list[str], expected_id: int) -> Token | str:
    """The token of a 10-column line, or what is wrong with it."""
    if len(cols) != 10:
        return f"expected 10 tab-separated columns, got {len(cols)}"
    if not (cols[0].isascii() and cols[0].isdigit()):  # isdigit() alone takes "²", which int() does not
        return f"bad token id {cols[0]!r}"
    if cols[0].lstrip("0") != str(expected_id):  # as text: int() refuses ids of more than 4300 digits
        return f"token id {cols[0]} out of order, expected {expected_id}"
    if cols[3] not in UPOS_TAGS:
        return f"unknown UPOS {cols[3]!r}"
    return Token(expected_id, *cols[1:8])


def read_conllu(path: PathLike, *, skip_bad: bool = False,
                report: SkipReport | None = None) -> Iterator[Sentence]:
    """Sentences of a CoNLL-U file; multiword ranges ("1-2") and empty nodes ("1.1") are not tokens.
    With skip_bad a sentence with an error is skipped whole and counted once."""
    sent: Sentence | None = None
    error: DataError | None = None
    # The sentinel blank line ends a last sentence that has no blank line after it.
    for line_no, line in chain(_lines(path), [(None, "")]):
        if isinstance(line, str) and not line.strip():
            if error is not None:
                _fail(error, skip_bad, report)
            elif sent is not None:
                if not sent.tokens:
                    _fail(DataError(path, sent.line, "sentence has no tokens"), skip_bad, report)
                else:
                    yield sent
            sent, error = None, None
            continue
        if sent is None:
            sent = Sentence(None, None, [], line_no)
        if error is not None:
            continue  # the rest of a bad sentence
        if isinstance(line, DataError):
            error = line
        elif line.startswith("#"):
            key, eq, value = line[1:].partition("=")
            if eq and key.strip() in ("sent_id", "text"):
                setattr(sent, key.strip(), value.strip())
        elif re.fullmatch(r"[0-9]+(-[0-9]+|\.[0-9]+)", line.split("\t", 1)[0]) and line.count("\t") == 9:
            continue  # multiword token range or empty node
        else:
            token = _conllu_token(line.split("\t"), len(sent.tokens) + 1)
            if isinstance(token, str):
                error = DataError(path, line_no, token)
            else:
                sent.tokens.append(token)
        if error is not None and not skip_bad:
            raise error
