"""Unit tests of the demo-bundle builder on small inline inputs (no network, no Debian packages)."""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import os
import stat
import subprocess
from pathlib import Path

import pytest

from tools.demo_bundle import alignments as al
from tools.demo_bundle import build as bd
from tools.demo_bundle import dictionaries as dc
from tools.demo_bundle import libreoffice as lo
from tools.fetch import FetchError, fetch_deb

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64(n: int) -> str:
    """dictd's base64 number, written independently of the reader's decoder."""
    digits = ""
    while True:
        digits = _B64[n % 64] + digits
        n //= 64
        if not n:
            return digits


PAGE = """<html><body><script>var x = "<p id=par_id9>not text</p>";</script>
<h1 id="hd_id1" dir="auto">
<a name="x"></a>Adding &amp; Exceptions
</h1>
<p id="par_id2" class="listitem">Choose <span class="menuitem">Tools - AutoCorrect </span>, then  click
<span class="emph"><span class="menuitem">New</span></span>.</p>
<p id="par_id3">Press <span class="switchinline"><span hidden="true" id="MACx" class="MAC">Command</span><span
hidden="true" id="defaultx"><span class="keycode">Ctrl</span></span></span>+Z.<br>Done</p>
<span class="switch"><span hidden="true" id="WINx" class="WIN"><p id="par_id4" class="code">x = 1</p></span></span>
<p id="par_id2">a repeated id keeps its first paragraph</p><p id="bm_id5">bookmark</p><p>no id</p>
</body></html>"""


# -- HTML extraction ---------------------------------------------------------------------------------------
def test_parse_page_text_ids_and_classes():
    segs = lo.parse_page(PAGE)
    assert [s.sid for s in segs] == ["hd_id1", "par_id2", "par_id3", "par_id4"]
    by_id = {s.sid: s for s in segs}
    assert by_id["hd_id1"].text == "Adding & Exceptions"  # entity unescaped, whitespace collapsed
    assert by_id["hd_id1"].cls == "h1"
    assert by_id["par_id2"].text == "Choose Tools - AutoCorrect , then click New."
    assert by_id["par_id2"].cls == "listitem"
    # switchinline: the default variant, not the hidden Mac one; <br> becomes a space
    assert by_id["par_id3"].text == "Press Ctrl+Z. Done"
    # a paragraph inside a hidden block-level switch is still a paragraph of the page
    assert by_id["par_id4"].text == "x = 1" and by_id["par_id4"].cls == "code"


def test_spans_offsets_match_text_and_keep_outermost():
    by_id = {s.sid: s for s in lo.parse_page(PAGE)}
    p2 = by_id["par_id2"]
    assert [(p2.text[s:e], lab) for s, e, lab in p2.spans] == [("Tools - AutoCorrect", "menuitem"), ("New", "emph")]
    p3 = by_id["par_id3"]
    assert [(p3.text[s:e], lab) for s, e, lab in p3.spans] == [("Ctrl", "keycode")]


def test_empty_span_is_recorded_as_empty():
    (seg,) = lo.parse_page('<p id="par_id1">Click <span class="emph"> </span> here now</p>')
    assert seg.text == "Click here now"
    assert len(seg.spans) == 1 and seg.spans[0][0] == seg.spans[0][1]


def test_module_of_and_help_root(tmp_path):
    assert lo.module_of("text/sdatabase/main.html") == "sbase"
    assert lo.module_of("text/swriter/guide/x.html") == "swriter"
    assert lo.module_of("text/unknown/x.html") is None
    (tmp_path / "usr/share/libreoffice/help/zh-CN/text/shared").mkdir(parents=True)
    (tmp_path / "usr/share/libreoffice/help/media").mkdir()
    assert lo.help_root(tmp_path).name == "zh-CN"


# -- filters -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,cls,ok", [
    ("Opens the dialog.", "paragraph", True),
    ("Dim a As Integer", "code", False),
    ("ThisComponent.getText()", "paragraph", False),
    ("1, 2, 3", "paragraph", False),
    ("Ok", "paragraph", False),
    ("文件(默认)保存", "paragraph", True),  # CJK: no spaces, ASCII parentheses are not code
])
def test_is_text(text, cls, ok):
    assert lo.is_text(text, cls) is ok


@pytest.mark.parametrize("en,xx,lang,ok", [
    ("Opens the dialog.", "Öffnet den Dialog.", "de", True),
    ("Opens the dialog.", "Opens the dialog.", "de", False),
    ("Opens the dialog box.", "Opens the dialog box!", "fr", False),  # nearly equal
    ("Opens the dialog.", "Opens the dialog.", "ru", False),
    ("Opens the Basic IDE dialog.", "Opens the Basic IDE диалог.", "ru", False),  # too few non-ASCII letters
    ("Opens the dialog.", "Открывает диалог.", "ru", True),
    ("Opens the dialog.", "打开对话框。", "zh", True),
])
def test_is_translated(en, xx, lang, ok):
    assert lo.is_translated(en, xx, lang) is ok


# -- splits ------------------------------------------------------------------------------------------------
def test_stable_key_is_sha256_not_salted_hash():
    page = "text/swriter/guide/x.html"
    assert lo.stable_key(page) == hashlib.sha256(page.encode()).digest()


def test_assign_splits_is_deterministic_and_stratified():
    pages = [f"text/{m}/p{i:03d}.html" for m in ("swriter", "scalc", "smath") for i in range(40)]
    a = bd.assign_splits(pages)
    assert a == bd.assign_splits(list(reversed(pages)))  # independent of input order
    for m in ("swriter", "scalc", "smath"):
        got = [a[p] for p in pages if p.startswith(f"text/{m}/")]
        assert got.count("test") == 4 and got.count("dev") == 4 and got.count("train") == 32


# -- text data on a synthetic corpus ----------------------------------------------------------------------
def _seg(sid: str, text: str, spans=()) -> lo.Segment:
    return lo.Segment(sid, "paragraph", text, list(spans))


def _synthetic_corpus():
    """10 swriter pages; one paragraph per page is unique, one ("Shared line here") is on every page."""
    pages = [f"text/swriter/p{i}.html" for i in range(10)]
    en, de = {}, {}
    for i, page in enumerate(pages):
        words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
        en[page] = {"par_id1": _seg("par_id1", f"Choose the {words[i]} menu now",
                                    [(11, 11 + len(words[i]), "menuitem")]),
                    "par_id2": _seg("par_id2", "Shared line here")}
        de_text = f"Wählen Sie das Menü {words[i]} jetzt"
        de_spans = [(20, 20 + len(words[i]), "menuitem")] if i % 2 == 0 else [(20, 20 + len(words[i]), "emph")]
        de[page] = {"par_id1": _seg("par_id1", de_text, de_spans), "par_id2": _seg("par_id2", "Geteilte Zeile hier")}
    corpus = {lang: en for lang in bd.LANGS}  # untranslated everywhere ...
    corpus = dict(corpus, de=de)  # ... except German
    return corpus


def test_build_text_data_keeps_heldout_text_out_of_training():
    corpus = _synthetic_corpus()
    b = bd.build_text_data(corpus)
    test_pages = [p for p, s in b.split.items() if s == "test"]
    dev_pages = [p for p, s in b.split.items() if s == "dev"]
    assert len(test_pages) == 1 and len(dev_pages) == 1
    # "Shared line here" is on held-out pages too: it may not appear in any training file
    assert "Shared line here" not in b.mono["en"]
    assert "Geteilte Zeile hier" not in b.mono["de"]
    assert all(e != "Shared line here" for e, _ in b.parallel["de"])
    held = {corpus["en"][p]["par_id1"].text for p in test_pages + dev_pages}
    assert not held & set(b.mono["en"])
    assert not held & {e for e, _ in b.parallel["de"]}
    assert {r["text"] for r in b.module["train"]}.isdisjoint(held)
    # untranslated languages contribute nothing
    assert b.parallel["fr"] == [] and b.mono["ru"] == [] and b.module["test.ja"] == []
    # retrieval comes from the test page only
    assert set(b.retrieval["de"]) == {(corpus["en"][test_pages[0]][sid].text, corpus["de"][test_pages[0]][sid].text)
                                      for sid in ("par_id1", "par_id2")}


def test_spans_test_drops_changed_markup_and_keeps_ids():
    corpus = _synthetic_corpus()
    b = bd.build_text_data(corpus)
    (test_page,) = [p for p, s in b.split.items() if s == "test"]
    i = int(test_page.split("/p")[1].split(".")[0])
    en_ids = [r["id"] for r in b.spans["test.en"]]
    assert en_ids == [f"{test_page}#par_id1"]
    if i % 2 == 0:  # German kept the menuitem span
        assert [r["id"] for r in b.spans["test.de"]] == en_ids
        row = b.spans["test.de"][0]
        assert [row["text"][s:e] for s, e, _ in row["spans"]] == [corpus["de"][test_page]["par_id1"].text[20:-6]]
    else:  # German changed menuitem -> emph: dropped and counted
        assert b.spans["test.de"] == [] and b.spans_dropped["de"]["labels_changed"] == 1
    assert [r["id"] for r in b.module["test.de"]] == [r["id"] for r in b.module["test.en"]]
    assert {r["label"] for r in b.module["test.en"]} == {"swriter"}


# -- writing -----------------------------------------------------------------------------------------------
def test_write_xz_is_deterministic(tmp_path):
    lines = ["b\tβ", "a\tα", "日本語"]
    bd.write_xz(tmp_path / "x.txt.xz", lines)
    first = (tmp_path / "x.txt.xz").read_bytes()
    os.utime(tmp_path / "x.txt.xz", (0, 0))
    bd.write_xz(tmp_path / "y.txt.xz", lines)
    assert (tmp_path / "y.txt.xz").read_bytes() == first
    assert lzma.decompress(first).decode() == "b\tβ\na\tα\n日本語\n"
    assert bd.count_lines(tmp_path / "x.txt.xz") == 3
    with pytest.raises(bd.BuildError):
        bd.write_xz(tmp_path / "z.txt.xz", ["two\nlines"])


# -- dictionaries ------------------------------------------------------------------------------------------
def _write_dictd(root: Path, entries: dict[str, str]) -> Path:
    d = root / "usr/share/dictd"
    d.mkdir(parents=True)
    data, index = b"", []
    for head, body in sorted(entries.items()):
        raw = body.encode()
        index.append(f"{head}\t{b64(len(data))}\t{b64(len(raw))}")
        data += raw
    (d / "freedict-eng-deu.index").write_text("\n".join(index) + "\n", encoding="utf-8")
    with gzip.open(d / "freedict-eng-deu.dict.dz", "wb") as f:
        f.write(data)
    return root


def test_build_dictionary_filters_by_vocabulary(tmp_path):
    root = _write_dictd(tmp_path, {
        "menu": "menu /mˈɛnjuː/\nMenü <neut>, Speisekarte <fem>\n",
        "zebra": "zebra /zˈɛbɹə/\nZebra <neut>\n",
        "window": "window /wˈɪndəʊ/\nFenster <neut>\n",
        "a": "A /eɪ/\nAis\n",
        "long": "long /lɒŋ/\neine sehr lange Übersetzung mit vielen Wörtern\n",
    })
    en_vocab = dc.vocabulary(["Open the menu", "long lines"])
    de_vocab = dc.vocabulary(["Das Fenster"])
    pairs = dc.build_dictionary(root, "de", en_vocab, de_vocab)
    # menu: English word in the text; window: translation in the German text; zebra: neither;
    # "a": one letter; "long": translation too long
    assert pairs == [("menu", "Menü"), ("menu", "Speisekarte"), ("window", "Fenster")]


def test_keep_pair_rejects_english_glosses_for_non_latin_targets():
    assert dc.keep_pair("water", "水", "ja")
    assert not dc.keep_pair("water", "clear liquid", "ja")
    assert not dc.keep_pair("two words", "zwei", "de")


# -- gold alignments ---------------------------------------------------------------------------------------
def test_load_verses_and_pharaoh(tmp_path):
    data = tmp_path / "data"
    (data / "sources").mkdir(parents=True)
    (data / "eng/targets/BSB").mkdir(parents=True)
    (data / "eng/alignments/BSB").mkdir(parents=True)
    (data / "sources/SBLGNT.tsv").write_text(
        "id\taltId\ttext\n"
        "n40001001001\tx\tΒίβλος\nn40001001002\tx\tγενέσεως\n"
        "n40001002001\tx\tἈβραὰμ\n"
        "n40001003001\tx\tἸούδας\n", encoding="utf-8")
    (data / "eng/targets/BSB/nt_BSB.tsv").write_text(
        "id\tsource_verse\ttext\tskip_space_after\texclude\tid_range_end\tsource_verse_range_end\n"
        "40001001001\t40001001\tThe\t\t\t\t\n40001001002\t40001001\tbook\t\t\t\t\n"
        "40001001003\t40001001\t,\t\ty\t\t\n40001001004\t40001001\tgenealogy\t\t\t\t\n"
        "40001002001\t40001002\tAbraham\t\t\t\t\n"
        "40001003001\t40001002\tJudah\t\t\t\t\n", encoding="utf-8")  # verse 3 merged into 2 by BSB
    recs = [{"source": ["n40001001001"], "target": ["40001001001", "40001001002"]},
            {"source": ["n40001001002"], "target": ["40001001003", "40001001004"]},
            {"source": ["n40001002001"], "target": ["40001002001"]},
            {"source": ["n40001003001"], "target": ["40001003001"]}]
    (data / "eng/alignments/BSB/SBLGNT-BSB-manual.json").write_text(json.dumps({"records": recs}), encoding="utf-8")
    verses = al.load_verses(tmp_path)
    assert [v.vid for v in verses] == ["40001001"]  # 40001002/3 are merged by BSB
    (v,) = verses
    assert v.src == ["Βίβλος", "γενέσεως"] and v.tgt == ["The", "book", "genealogy"]  # "," excluded
    assert al.pharaoh(v.links) == "0-0 0-1 1-2"
    assert al.choose(verses, 5) == verses


# -- fetching (no network: a fake apt-get on PATH) ----------------------------------------------------------
def _fake_apt(tmp_path: Path, deb: Path | None) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "apt-get"
    body = f'cp "{deb}" .\n' if deb else 'echo "E: Unable to locate package $2" >&2\nexit 100\n'
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_fetch_deb_unpacks_once_and_reuses_cache(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN/control").write_text("Package: demo-pkg\nVersion: 1.0-1\nArchitecture: all\n"
                                        "Maintainer: x <x@example.org>\nDescription: test\n")
    (pkg / "usr/share/doc/demo-pkg").mkdir(parents=True)
    (pkg / "usr/share/doc/demo-pkg/copyright").write_text("MIT\n")
    deb = tmp_path / "demo-pkg_1.0-1_all.deb"
    subprocess.run(["dpkg-deb", "--build", str(pkg), str(deb)], check=True, capture_output=True)
    monkeypatch.setenv("PATH", _fake_apt(tmp_path, deb)["PATH"])
    got = fetch_deb("demo-pkg", tmp_path / "cache")
    assert got.version == "1.0-1"
    assert (got.root / "usr/share/doc/demo-pkg/copyright").read_text() == "MIT\n"
    deb.unlink()  # a second fetch must not download again
    assert fetch_deb("demo-pkg", tmp_path / "cache") == got


def test_fetch_deb_error_names_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _fake_apt(tmp_path, None)["PATH"])
    with pytest.raises(FetchError, match="no-such-pkg.*Unable to locate"):
        fetch_deb("no-such-pkg", tmp_path / "cache")
