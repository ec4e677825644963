"""Benchmark loaders: good files, bad files (reported at file:line), unlabelled test files rejected, real data."""

from __future__ import annotations

import json
import lzma
import math
import warnings
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import REPO, SHARED_DATA

from metaxlm.data.benchmarks import FORMATS, load_alignment, load_examples
from metaxlm.data.examples import (
    DEV_FRACTION,
    ClassificationExample,
    QAExample,
    SpanExample,
    TaggingExample,
    dev_test_split,
)
from metaxlm.errors import ConfigError, DataError, SkipReport

needs_shared = pytest.mark.skipif(not SHARED_DATA.exists(), reason="needs ../shared/data")
DEMO_TASKS = REPO / "data" / "demo" / "tasks"


def write(path: Path, text: str) -> Path:
    if path.suffix == ".xz":
        path.write_bytes(lzma.compress(text.encode("utf-8")))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def jsonl(*objects: dict) -> str:
    return "".join(json.dumps(obj, ensure_ascii=False) + "\n" for obj in objects)


def data_error(fmt: str, path: Path, **kw) -> DataError:
    with pytest.raises(DataError) as info:
        load_examples(fmt, path, **kw)
    return info.value


CONLLU = """# sent_id = s1
# text = Das ist's.
1\tDas\tder\tPRON\t_\t_\t2\tnsubj\t_\t_
2-3\tist's\t_\t_\t_\t_\t_\t_\t_\t_
2\tist\tsein\tAUX\t_\t_\t0\troot\t_\t_
3\t's\tes\tPRON\t_\t_\t2\tobj\t_\t_
3.1\tleer\t_\tX\t_\t_\t_\t_\t_\t_
4\t.\t.\tPUNCT\t_\t_\t2\tpunct\t_\t_

# sent_id = s2
1\tJa\tja\tINTJ\t_\t_\t0\troot\t_\t_
"""

SQUAD = {"version": "1.1", "data": [{"title": "T", "paragraphs": [{
    "context": "The cat sat on the mat. The cat slept.",
    "qas": [
        {"id": "q1", "question": "Who sat?", "answers": [{"text": "The cat", "answer_start": 0},
                                                         {"text": "cat", "answer_start": 4}]},
        # translated data: the offset points at the wrong place, the text occurs at 24 and 4
        {"id": "q2", "question": "Who slept?", "answers": [{"text": "cat slept", "answer_start": 20}]},
    ]}]}]}


# --- every format rejects an unlabelled test file, naming file and line --------------------------------

UNLABELLED = [
    ("demo_module", "m.jsonl", jsonl({"id": "a", "text": "x", "label": "scalc"}, {"id": "b", "text": "y"}), 2),
    ("demo_module", "m.jsonl", jsonl({"id": "a", "text": "x", "label": ""}), 1),
    ("demo_spans", "s.jsonl", jsonl({"id": "a", "text": "x"}), 1),
    ("demo_spans", "s.jsonl", jsonl({"id": "a", "text": "x", "spans": []}, {"id": "b", "text": "y", "spans": []}), 1),
    ("xnli", "test-de.tsv", "Er schläft.\tEr ist wach.\tcontradiction\nEr isst.\tEr hat Hunger.\n", 2),
    ("xnli", "xnli.test.tsv", "language\tsentence1\tsentence2\tpairID\nde\ta\tb\t1\n", 1),
    ("pawsx", "test_2k.tsv", "id\tsentence1\tsentence2\n1\ta\tb\n", 1),
    ("pawsx", "test-de.tsv", "a\tb\t1\nc\td\t\n", 2),
    ("sib200", "test.tsv", "index_id\ttext\n1\tHallo\n", 1),
    ("sib200", "test.tsv", "index_id\tcategory\ttext\n1\ttravel\tHallo\n2\t\tWelt\n", 3),
    ("reviews", "r.jsonl", jsonl({"review_body": "gut", "stars": 5}, {"review_body": "schlecht"}), 2),
    ("udpos", "u.conllu", CONLLU.replace("\tINTJ\t", "\t_\t"), 11),
    ("panx", "p.tsv", "de:Berlin\tB-LOC\nde:ist\tO\n\nde:Paris\n", 4),
    ("squad", "q.json", json.dumps({"data": [{"title": "T", "paragraphs": [{"context": "c", "qas": [
        {"id": "q1", "question": "?", "answers": [{"text": "c", "answer_start": 0}]},
        {"id": "q2", "question": "?", "answers": []}]}]}]}, indent=1), 20),
    ("tatoeba", "tatoeba.deu-eng.deu", "Hallo.\nWelt.\n", None),  # the .eng side (the gold) is missing
    ("parallel_tsv", "en-de.tsv", "Hello.\tHallo.\nWorld.\n", 2),  # no translation
]


@pytest.mark.parametrize("fmt,name,content,line", UNLABELLED)
def test_unlabelled_test_file_is_rejected_at_its_line(tmp_path, fmt, name, content, line):
    path = write(tmp_path / name, content)
    err = data_error(fmt, path)
    assert err.line == line, err
    assert Path(err.path).name.startswith(name.split(".")[0])
    if fmt not in ("udpos", "tatoeba"):  # read_conllu says "unknown UPOS '_'"; tatoeba "no such file"
        assert "label" in str(err) or "span" in str(err) or "answers" in str(err) or "tag" in str(err)


def test_every_format_is_registered_and_unknown_ones_are_config_errors(tmp_path):
    assert set(FORMATS.names()) == {"demo_module", "demo_spans", "xnli", "pawsx", "udpos", "panx", "squad", "sib200",
                            "reviews", "tatoeba", "parallel_tsv", "parallel_files"}
    # parallel_files (two files named by a template): tests/test_translation.py
    assert {fmt for fmt, *_ in UNLABELLED} | {"parallel_files"} == set(FORMATS.names())
    with pytest.raises(ConfigError, match="unknown benchmark format 'conll'"):
        load_examples("conll", tmp_path / "x")


def test_empty_file_raises_unless_allowed(tmp_path):
    path = write(tmp_path / "test.hi.jsonl.xz", "")
    assert data_error("demo_spans", path).message == "empty file"
    assert load_examples("demo_spans", path, allow_empty=True) == []


# --- demo tasks ----------------------------------------------------------------------------------------

def test_demo_module_and_spans_good_files(tmp_path):
    module = write(tmp_path / "m.jsonl.xz", jsonl({"id": "p#1", "text": "Zellen", "label": "scalc"}))
    assert load_examples("demo_module", module) == [ClassificationExample("p#1", "Zellen", "scalc")]
    spans = write(tmp_path / "s.jsonl", jsonl({"id": "p#2", "text": "Drücke Strg+C", "spans": [[7, 13, "keycode"]]},
                                              {"id": "p#3", "text": "nichts", "spans": []}))
    assert load_examples("demo_spans", spans) == [SpanExample("p#2", "Drücke Strg+C", ((7, 13, "keycode"),)),
                                                  SpanExample("p#3", "nichts", ())]


@pytest.mark.parametrize("spans", [[[7, 14, "keycode"]], [[3, 3, "emph"]], [[0, 2]], [["0", 2, "emph"]]])
def test_demo_spans_bad_span_is_reported(tmp_path, spans):
    path = write(tmp_path / "s.jsonl", jsonl({"id": "ok", "text": "abc", "spans": [[0, 1, "emph"]]},
                                             {"id": "bad", "text": "Drücke Strg+C", "spans": spans}))
    err = data_error("demo_spans", path)
    assert err.line == 2 and "bad span" in err.message


def test_demo_module_bad_json_is_reported(tmp_path):
    path = write(tmp_path / "m.jsonl", jsonl({"id": "a", "text": "x", "label": "y"}) + "{oops\n")
    err = data_error("demo_module", path)
    assert (err.line, err.message.startswith("invalid JSON")) == (2, True)
    # JSON that json.loads rejects with a RecursionError or a plain ValueError is reported the same way
    path = write(tmp_path / "deep.jsonl", '{"id": "a", "text": "x", "label": ' + "[" * 100_000 + "}\n")
    err = data_error("demo_module", path)
    assert (err.line, err.message) == (1, "invalid JSON: nested too deeply")
    path = write(tmp_path / "long.jsonl", '{"id": 1' + "0" * 5000 + "}\n")
    assert data_error("demo_module", path).message.startswith("invalid JSON: Exceeds the limit (4300 digits)")


# --- classification TSV ----------------------------------------------------------------------------------

def test_xnli_headerless_and_xnli10_header_with_language_filter(tmp_path):
    path = write(tmp_path / "test-de.tsv", "Er schläft.\tEr ist wach.\tcontradictory\n\nA\tB\tentailment\n")
    assert load_examples("xnli", path) == [ClassificationExample("0", "Er schläft.", "contradiction", "Er ist wach."),
                                           ClassificationExample("1", "A", "entailment", "B")]
    header = "language\tgold_label\tsentence1\tsentence2\tpairID\n"
    path = write(tmp_path / "xnli.test.tsv", header + "en\tneutral\tA\tB\t7\nde\tentailment\tC\tD\t7\n")
    assert load_examples("xnli", path, lang="de") == [ClassificationExample("7", "C", "entailment", "D")]
    assert len(load_examples("xnli", path)) == 2
    assert data_error("xnli", path, lang="fr").message == "no examples for language 'fr'"


def test_xnli_and_pawsx_bad_labels_and_columns(tmp_path):
    path = write(tmp_path / "x.tsv", "A\tB\tentailment\nC\tD\tmaybe\n")
    err = data_error("xnli", path)
    assert (err.line, "unknown label 'maybe'" in err.message) == (2, True)
    path = write(tmp_path / "p.tsv", "id\tsentence1\tsentence2\tlabel\n1\ta\tb\t1\n2\tc\td\t1\textra\n")
    err = data_error("pawsx", path)
    assert (err.line, err.message) == (3, "expected 4 tab-separated columns, got 5")


def test_pawsx_header_and_headerless(tmp_path):
    with_header = write(tmp_path / "test_2k.tsv", "id\tsentence1\tsentence2\tlabel\n17\ta b\tb a\t0\n")
    assert load_examples("pawsx", with_header) == [ClassificationExample("17", "a b", "0", "b a")]
    headerless = write(tmp_path / "test-de.tsv", "a b\tb a\t1\n")
    assert load_examples("pawsx", headerless) == [ClassificationExample("0", "a b", "1", "b a")]


def test_sib200_good_and_headerless(tmp_path):
    path = write(tmp_path / "test.tsv", "index_id\tcategory\ttext\n1523\tscience/technology\tMutation adds.\n")
    assert load_examples("sib200", path) == [ClassificationExample("1523", "Mutation adds.", "science/technology")]
    err = data_error("sib200", write(tmp_path / "bad.tsv", "1523\tscience/technology\tMutation adds.\n"))
    assert err.line == 1 and "header" in err.message


def test_reviews_marc_and_text_label(tmp_path):
    path = write(tmp_path / "r.jsonl", jsonl({"review_id": "de_1", "review_body": "Gut.", "stars": 4},
                                             {"text": "Schlecht.", "label": "neg"}))
    assert load_examples("reviews", path) == [ClassificationExample("de_1", "Gut.", "4"),
                                              ClassificationExample("2", "Schlecht.", "neg")]
    err = data_error("reviews", write(tmp_path / "bad.jsonl", jsonl({"stars": 3})))
    assert err.message == "missing string field 'text'"


# --- tagging ---------------------------------------------------------------------------------------------

def test_udpos_skips_multiword_ranges_and_empty_nodes(tmp_path):
    examples = load_examples("udpos", write(tmp_path / "u.conllu", CONLLU))
    assert examples == [TaggingExample("s1", ("Das", "ist", "'s", "."), ("PRON", "AUX", "PRON", "PUNCT")),
                        TaggingExample("s2", ("Ja",), ("INTJ",))]
    err = data_error("udpos", write(tmp_path / "bad.conllu", CONLLU.replace("2\tist\tsein", "5\tist\tsein")))
    assert err.line == 5 and "out of order" in err.message


def test_panx_prefix_and_sentences(tmp_path):
    text = "de:Berlin\tB-LOC\nde:ist\tO\n\n\nde:Angela\tB-PER\nde:Merkel\tI-PER\nde:de:x\tO\n"
    expected = [TaggingExample("0", ("Berlin", "ist"), ("B-LOC", "O")),
                TaggingExample("1", ("Angela", "Merkel", "de:x"), ("B-PER", "I-PER", "O"))]
    path = write(tmp_path / "p.tsv", text)
    assert load_examples("panx", path) == expected
    assert load_examples("panx", path, lang="de") == expected
    assert load_examples("panx", write(tmp_path / "plain.txt", "Berlin B-LOC\n"))[0].words == ("Berlin",)
    err = data_error("panx", write(tmp_path / "bad.tsv", "de:Berlin\tB-LOC\nde:ist\tX-LOC\n"))
    assert (err.line, err.message) == (2, "bad tag 'X-LOC', expected O, B-TYPE or I-TYPE")


# --- QA ----------------------------------------------------------------------------------------------------

def test_squad_answers_and_relocated_offsets(tmp_path):
    path = write(tmp_path / "xquad.de.json", json.dumps(SQUAD))
    with pytest.warns(UserWarning, match="moved 1 answer start"):
        examples = load_examples("squad", path, split="train")
    assert examples[0] == QAExample("q1", "Who sat?", SQUAD["data"][0]["paragraphs"][0]["context"],
                                    (("The cat", 0), ("cat", 4)), "T")
    assert examples[1].answers == (("cat slept", 28),)


def test_squad_answer_not_in_context(tmp_path):
    data = json.loads(json.dumps(SQUAD))
    data["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["text"] = "dog"
    path = write(tmp_path / "q.json", json.dumps(data, indent=2))
    err = data_error("squad", path, split="train")
    assert err.message == "question 'q2': answer 'dog' does not occur in its context"
    assert '"q2"' in path.read_text().splitlines()[err.line - 1]
    assert load_examples("squad", path, split="test")[1].answers == (("dog", -1),)  # the text is still scored


def test_squad_bad_json_and_layout(tmp_path):
    err = data_error("squad", write(tmp_path / "q.json", '{"data": [\n  {"title": }\n]}'))
    assert err.line == 2 and err.message.startswith("invalid JSON")
    err = data_error("squad", write(tmp_path / "list.json", "[]"))
    assert err.line == 1 and "SQuAD layout" in err.message
    err = data_error("squad", write(tmp_path / "deep.json", '{"data": ' + "[" * 100_000))
    assert (err.line, err.message) == (None, "invalid JSON: nested too deeply")


# --- Tatoeba -------------------------------------------------------------------------------------------------

def test_tatoeba_file_or_folder(tmp_path):
    write(tmp_path / "tatoeba.deu-eng.deu", "Hallo.\nDanke!\n")
    write(tmp_path / "tatoeba.deu-eng.eng", "Hello.\nThanks!\n")
    expected = (["Hallo.", "Danke!"], ["Hello.", "Thanks!"])
    assert load_examples("tatoeba", tmp_path / "tatoeba.deu-eng.deu") == expected
    assert load_examples("tatoeba", tmp_path, lang="deu") == expected
    write(tmp_path / "tatoeba.fra-eng.fra", "Salut.\nMerci.\n")
    write(tmp_path / "tatoeba.fra-eng.eng", "Hi.\n")
    err = data_error("tatoeba", tmp_path, lang="fra")
    assert (Path(err.path).name, err.line) == ("tatoeba.fra-eng.eng", 1)
    with pytest.raises(ConfigError, match="lang"):
        load_examples("tatoeba", tmp_path)


# --- gold word alignments ------------------------------------------------------------------------------------

def pair_files(tmp_path: Path, src: str, tgt: str) -> tuple[Path, Path]:
    return write(tmp_path / "test.src", src), write(tmp_path / "test.tgt", tgt)


def test_pharaoh_sure_and_possible_zero_based(tmp_path):
    src, tgt = pair_files(tmp_path, "a  b\tc\nd\n", "x y\ny z\n")  # runs of whitespace split words
    gold = write(tmp_path / "gold", "0-0 1p1 2-1\n0-1\n")
    aset = load_alignment(src, tgt, gold)
    assert aset.src == [["a", "b", "c"], ["d"]] and aset.tgt == [["x", "y"], ["y", "z"]]
    assert aset.sure == [{(0, 0), (2, 1)}, {(0, 1)}]
    assert aset.possible == [{(0, 0), (1, 1), (2, 1)}, {(0, 1)}]  # possible ⊇ sure


def test_pharaoh_one_file_with_separator_and_one_based(tmp_path):
    pairs = write(tmp_path / "enfr.src-tgt", "2 .   ||| 2 .  \noh , oh ! ||| oh , oh !\n")
    gold = write(tmp_path / "enfr.gold", "2-2 1-1\n4p4 1-1\n")
    aset = load_alignment(pairs, None, gold, src_base=1)
    assert aset.src == [["2", "."], ["oh", ",", "oh", "!"]]
    assert aset.sure == [{(1, 1), (0, 0)}, {(0, 0)}] and aset.possible[1] == {(0, 0), (3, 3)}


def test_sid_format_flags_and_bases(tmp_path):
    src, tgt = pair_files(tmp_path, "a b\nc d e\n", "x y\nz\n")
    gold = write(tmp_path / "align.txt", "0001 1 1 S\n0001 2 2 P\n0002 3 1\n")
    aset = load_alignment(src, tgt, gold, fmt="sid", src_base=1, sid_base=1)
    assert aset.sure == [{(0, 0)}, {(2, 0)}] and aset.possible == [{(0, 0), (1, 1)}, {(2, 0)}]
    err = pytest.raises(DataError, load_alignment, src, tgt, gold, fmt="sid", src_base=1, sid_base=0).value
    assert (err.line, "sentence id 0002 is outside 0..1" in err.message) == (3, True)


def test_invalid_links_are_skipped_with_a_count_or_raise_when_strict(tmp_path):
    src, tgt = pair_files(tmp_path, "a b c\nd e\n", "x y z\nu v\n")
    gold = write(tmp_path / "align.txt", "0 1 1\n0 2 3 S\n0 3 -99\n1 2 2 P\n1 3 1\n")
    report = SkipReport()
    with pytest.warns(UserWarning, match="skipped 2 invalid link"):
        aset = load_alignment(src, tgt, gold, fmt="sid", src_base=1, report=report)
    assert report.skipped == 2 and report.examples[0].startswith(f"{gold}:3: link 3 -99 of pair 0")
    assert aset.sure == [{(0, 0), (1, 2)}, set()] and aset.possible == [{(0, 0), (1, 2)}, {(1, 1)}]
    err = pytest.raises(DataError, load_alignment, src, tgt, gold, fmt="sid", src_base=1, strict=True).value
    assert (err.path, err.line) == (str(gold), 3)


def test_wrong_index_base_is_detected_not_shifted_silently(tmp_path):
    src, tgt = pair_files(tmp_path, "a b c\nd e\n", "x y z\nu v\n")
    gold = write(tmp_path / "gold", "1-1 2-2 3-3\n1-2 2-1\n")  # 1-based; index 3 falls off as 0-based
    err = pytest.raises(DataError, load_alignment, src, tgt, gold).value
    assert "only 0 with src_base=1, tgt_base=1" in err.message
    assert load_alignment(src, tgt, gold, src_base=1).sure[0] == {(0, 0), (1, 1), (2, 2)}


@pytest.mark.parametrize("fmt,gold,line,message", [
    ("pharaoh", "0-0 0:1\n0-0\n", 1, "bad link '0:1'"),
    ("pharaoh", "0-0\n", 1, "file ends here, but there are 2 sentence pairs"),
    ("pharaoh", "0-0\n0-0\n0-0\n", 3, "more gold lines than the 2 sentence pairs"),
    ("sid", "0 0 0 X\n", 1, "expected 'sid i j [S|P]'"),
    ("sid", "0 zero 0\n", 1, "expected integers"),
])
def test_malformed_gold_lines(tmp_path, fmt, gold, line, message):
    src, tgt = pair_files(tmp_path, "a b\nc\n", "x\ny z\n")
    err = pytest.raises(DataError, load_alignment, src, tgt, write(tmp_path / "gold", gold), fmt=fmt).value
    assert err.line == line and message in err.message


def test_alignment_text_files_must_be_line_aligned(tmp_path):
    src, tgt = pair_files(tmp_path, "a\nb\nc\n", "x\ny\n")
    err = pytest.raises(DataError, load_alignment, src, tgt, write(tmp_path / "g", "0-0\n")).value
    assert (err.path, err.line) == (str(tgt), 2)


def test_dev_test_split_is_disjoint_covers_the_set_and_depends_on_size_alone():
    for n in (4, 10, 100, 447, 508, 1001):
        for fraction in (0.1, 0.3, 0.55, 0.9):
            dev, test = dev_test_split(n, fraction)
            assert list(dev) + list(test) == list(range(n))  # disjoint, covering, in file order: dev first
            assert len(dev) == min(math.ceil(Fraction(str(fraction)) * n), n - 1) and len(test) >= 1
            assert dev_test_split(n, fraction) == (dev, test)  # the same every time
    assert dev_test_split(10, 0.3) == (range(3), range(3, 10))
    assert dev_test_split(100, 0.55) == (range(55), range(55, 100))  # exact: 0.55 · 100 is no 55.00000000000001
    assert [len(part) for part in dev_test_split(508)] == [153, 355]  # de-en, the default 0.3 (README)
    assert [len(part) for part in dev_test_split(447)] == [135, 312]  # en-fr
    assert DEV_FRACTION == 0.3


def test_dev_test_split_of_tiny_sets_keeps_a_test_pair():
    assert dev_test_split(0) == (range(0), range(0))
    assert dev_test_split(1) == (range(0), range(1))  # one pair: no dev part (the layer is then a fixed default)
    assert dev_test_split(2) == (range(1), range(1, 2))
    assert dev_test_split(3) == (range(1), range(1, 3))
    assert dev_test_split(5, 0.0) == (range(0), range(5))  # 0: no dev part at all
    assert dev_test_split(2, 0.99) == (range(1), range(1, 2))  # never everything dev
    for bad in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match="dev_fraction"):
            dev_test_split(10, bad)


def test_alignment_set_dev_test_parts(tmp_path):
    src, tgt = pair_files(tmp_path, "a\nb\nc\nd\n", "w\nx\ny\nz\n")
    aset = load_alignment(src, tgt, write(tmp_path / "gold", "0-0\n0p0\n\n0-0\n"))
    dev, test = aset.dev_test(0.5)
    assert (dev.src, dev.tgt, dev.sure, dev.possible) == ([["a"], ["b"]], [["w"], ["x"]], [{(0, 0)}, set()],
                                                        [{(0, 0)}, {(0, 0)}])
    assert (test.src, test.sure) == ([["c"], ["d"]], [set(), {(0, 0)}])


# --- real data ----------------------------------------------------------------------------------------------

def test_demo_task_files():
    for lang, n_module, n_spans in [("en", 4417, 1519), ("zh", 2700, 732), ("hi", 558, 0)]:
        module = load_examples("demo_module", DEMO_TASKS / "module" / f"test.{lang}.jsonl.xz")
        spans = load_examples("demo_spans", DEMO_TASKS / "spans" / f"test.{lang}.jsonl.xz", allow_empty=True)
        assert (len(module), len(spans)) == (n_module, n_spans)
    assert all(ex.text[s:e] for ex in spans for s, e, _ in ex.spans)
    assert {ex.label for ex in module} <= {"swriter", "scalc", "simpress", "sdraw", "smath", "schart", "sbase",
                                           "sbasic", "shared"}
    train = load_examples("demo_spans", DEMO_TASKS / "spans" / "train.en.jsonl.xz", split="train")
    assert len(train) == 7948 and sum(len(ex.spans) for ex in train) == 12025


def test_demo_gold_alignment():
    root = REPO / "data" / "demo" / "alignment" / "grc-en"
    aset = load_alignment(root / "test.grc", root / "test.en", root / "gold.txt", src_base=0)
    assert len(aset) == 500 and sum(map(len, aset.sure)) == 12488 and aset.possible == aset.sure


@needs_shared
def test_real_word_alignment_sets():
    root = SHARED_DATA / "word_alignment" / "xlmalign_simalign_sets"
    report = SkipReport()
    with pytest.warns(UserWarning, match="skipped 1 invalid link"):
        de_en = load_alignment(root / "de-en/test.de", root / "de-en/test.en", root / "de-en/alignv2.txt", fmt="sid",
                               src_base=1, sid_base=0, report=report)
    assert len(de_en) == 508 and report.skipped == 1 and "link 22 -99 of pair 178" in report.examples[0]
    assert sum(map(len, de_en.sure)) == 9612 and sum(map(len, de_en.possible)) == 10533
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # en-fr has no invalid link
        en_fr = load_alignment(root / "en-fr/test.en", root / "en-fr/test.fr", root / "en-fr/alignv2.txt",
                               fmt="sid", src_base=1, sid_base=1)
    # "13,400 possible" counts the P-only lines: sure + possible together are 17,438 links
    n_sure, n_possible = sum(map(len, en_fr.sure)), sum(map(len, en_fr.possible))
    assert (len(en_fr), n_sure, n_possible - n_sure, n_possible) == (447, 4038, 13400, 17438)
    # the awesome-align packaging of the same set ("src ||| tgt", 1-based i-j / ipj) loads to the same gold
    awesome = SHARED_DATA / "word_alignment" / "awesome_align_examples"
    same = load_alignment(awesome / "enfr.src-tgt", None, awesome / "enfr.gold", src_base=1)
    assert (same.src, same.tgt, same.sure, same.possible) == (en_fr.src, en_fr.tgt, en_fr.sure, en_fr.possible)


@needs_shared
def test_real_benchmark_files():
    pud = load_examples("udpos", SHARED_DATA / "ud" / "UD_German-PUD" / "de_pud-ud-test.conllu")
    assert len(pud) == 1000 and pud[0].id == "n01001011" and len(pud[0].words) == len(pud[0].tags)
    xquad = load_examples("squad", SHARED_DATA / "xquad" / "xquad.de.json")
    assert len(xquad) == 1190 and all(ctx.context[s:s + len(t)] == t for ctx in xquad for t, s in ctx.answers)
    sib = load_examples("sib200", SHARED_DATA / "sib200" / "deu_Latn" / "test.tsv")
    assert len(sib) == 204 and len({ex.label for ex in sib}) == 7
    src, tgt = load_examples("tatoeba", SHARED_DATA / "tatoeba", lang="deu")
    assert len(src) == len(tgt) == 1000
    amh, _ = load_examples("tatoeba", SHARED_DATA / "tatoeba" / "tatoeba.amh-eng.amh")
    assert 0 < len(amh) <= 1000
