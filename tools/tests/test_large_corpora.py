"""Unit tests of the pure parts of the large-corpora builder, on small synthetic inputs (no network)."""

from __future__ import annotations

import gettext
import gzip
import shutil
import struct
from pathlib import Path

import pytest

from metaxlm.errors import DataError
from tools.fetch import FetchError, Package
from tools.large_corpora import build as large_build
from tools.large_corpora.build import DedupWriter, build_large_corpora
from tools.large_corpora.catalogues import clean_pair, mo_pairs, read_mo, strip_accelerators
from tools.large_corpora.debian import pick_locale
from tools.large_corpora.fortunes import split_fortunes
from tools.large_corpora.gcide import gcide_paragraphs
from tools.large_corpora.html import html_paragraphs
from tools.large_corpora.manpages import clean_terminal_text, is_so_stub, render_man_page, roff_paragraphs
from tools.large_corpora.text import decode_text, keep_line, normalize_line, word_count

# --- fortunes --------------------------------------------------------------------------------------------------


def test_split_fortunes_separates_entries_and_paragraphs():
    text = "First fortune,\nwrapped over two lines.\n%\nSecond one.\n\n\t-- Someone\n%\n%\nLast, no trailing sep"
    assert split_fortunes(text) == [
        "First fortune, wrapped over two lines.",
        "Second one.",
        "-- Someone",
        "Last, no trailing sep",
    ]


def test_latin1_fortune_file_is_decoded(tmp_path):
    path = tmp_path / "sprueche"
    path.write_bytes("Größe ist nicht alles, sagte der Bär.\n%\nÜbung macht den Meister.\n".encode("latin-1"))
    entries = split_fortunes(decode_text(path.read_bytes(), "de"))
    assert entries == ["Größe ist nicht alles, sagte der Bär.", "Übung macht den Meister."]


def test_decode_text_utf8_bom_and_cyrillic_legacy():
    assert decode_text("\ufeffЁлка".encode(), "ru") == "Ёлка"
    russian = "Тише едешь, дальше будешь."
    assert decode_text(russian.encode("koi8-r"), "ru") == russian
    assert decode_text(russian.encode("cp1251"), "ru") == russian


# --- man pages -------------------------------------------------------------------------------------------------


def test_clean_terminal_text_strips_overstrikes_and_ansi():
    bold = "".join(f"{c}\b{c}" for c in "NAME")
    underlined = "".join(f"_\b{c}" for c in "file")
    assert clean_terminal_text(f"{bold}\n  open {underlined} now") == "NAME\n  open file now"
    assert clean_terminal_text("\x1b[1mbold\x1b[0m and \x1b[4mline\x1b[24m") == "bold and line"


def test_roff_paragraphs_drops_header_footer_and_splits_on_indent():
    rendered = (
        "LS(1)            User Commands            LS(1)\n\n"
        "N\bNA\bAM\bME\bE\n"
        "       ls - list directory contents\n\n"
        "       -a, --all\n"
        "              do not ignore entries\n"
        "              starting with .\n\n"
        "GNU coreutils 9.1      September 2022      LS(1)\n"
    )
    assert roff_paragraphs(rendered) == [
        "NAME",
        "ls - list directory contents",
        "-a, --all",
        "do not ignore entries starting with .",
    ]


def test_is_so_stub():
    assert is_so_stub('.\\" comment\n\n.so man3/printf.3\n')
    assert not is_so_stub(".TH LS 1\n.SH NAME\nls \\- list\n.so never-reached\n")


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff not installed")
def test_render_man_page_with_groff(tmp_path):
    page = tmp_path / "tool.1.gz"
    roff = ".TH TOOL 1\n.SH BEZEICHNUNG\ntool \\- macht Größeres\n.SH BESCHREIBUNG\n" \
           "\\fBtool\\fP liest eine \\fIDatei\\fP und\nschreibt sie wieder.\n"
    page.write_bytes(gzip.compress(roff.encode("utf-8")))
    paragraphs = render_man_page(page, "de")
    assert "tool - macht Größeres" in paragraphs
    assert "tool liest eine Datei und schreibt sie wieder." in paragraphs
    stub = tmp_path / "alias.1"
    stub.write_text(".so man1/tool.1\n")
    assert render_man_page(stub, "de") == []


# --- HTML ------------------------------------------------------------------------------------------------------


def test_handbook_html_paragraphs():
    html = """<?xml version="1.0" encoding="UTF-8"?><html><head><title>T</title></head><body>
    <div id="banner"><a href="x"><span>Download the ebook</span></a></div>
    <ul class="docnav top"><li><a href="p.html"><strong>Zurück</strong></a></li></ul>
    <div class="chapter"><h1 class="title"><a id="apt"></a>Kapitel 6. Die APT-Tools</h1>
    <div class="toc"><dl><dt><a href="#a">6.1. Inhalt</a></dt></dl></div>
    <div class="para">
        Debian ist <span class="emphasis"><em>beliebt</em></span> &amp; einfach.
    </div><a id="x" class="indexterm"/>
    <div class="para">Zweiter<br/>Absatz mit <code class="command">apt</code>.
      <pre class="screen">$ apt update</pre>
    </div><script>var x = "no";</script></div></body></html>"""
    assert html_paragraphs(html) == [
        "Kapitel 6. Die APT-Tools",
        "Debian ist beliebt & einfach.",
        "Zweiter Absatz mit apt.",
    ]


def test_sphinx_chrome_is_skipped():
    html = ('<div class="related"><a>next</a></div><div class="body"><h1>os.path<a class="headerlink" '
            'href="#">¶</a></h1><dl><dt class="sig sig-object py">os.path.join(a)</dt><dd><p>Join paths.</p>'
            '</dd></dl><div class="highlight"><pre>print(1)</pre></div></div><footer>© PSF</footer>')
    assert html_paragraphs(html) == ["os.path", "Join paths."]


# --- GCIDE -----------------------------------------------------------------------------------------------------


def test_gcide_paragraphs_drop_tags_and_pronunciation():
    lines = ["00-database-short\n", "   GCIDE\n", "\n",
             'Affear \\Af*fear"\\, v. t. [OE. aferen. See\n', "   {Afeard}.]\n", "   To frighten. [Obs.]\n",
             "   [1913 Webster]\n", "\n"]
    assert list(gcide_paragraphs(lines)) == ["Affear  v. t. [OE. aferen. See Afeard.] To frighten. [Obs.] "]


# --- gettext .mo -----------------------------------------------------------------------------------------------


def write_mo(path: Path, messages: dict[bytes, bytes]) -> None:
    """The GNU .mo layout (as msgfmt writes it): header, two offset tables, then the strings."""
    keys = sorted(messages)
    ids = b"".join(k + b"\0" for k in keys)
    strs = b"".join(messages[k] + b"\0" for k in keys)
    start = 7 * 4 + 16 * len(keys)
    id_table, str_table, id_at, str_at = [], [], start, start + len(ids)
    for k in keys:
        id_table += [len(k), id_at]
        str_table += [len(messages[k]), str_at]
        id_at += len(k) + 1
        str_at += len(messages[k]) + 1
    header = struct.pack("<7I", 0x950412DE, 0, len(keys), 7 * 4, 7 * 4 + 8 * len(keys), 0, 0)
    path.write_bytes(header + struct.pack(f"<{len(id_table)}I", *id_table)
                     + struct.pack(f"<{len(str_table)}I", *str_table) + ids + strs)


@pytest.fixture
def mo_file(tmp_path):
    path = tmp_path / "nemo.mo"
    write_mo(path, {
        b"": b"Content-Type: text/plain; charset=UTF-8\nPlural-Forms: nplurals=2; plural=(n != 1);\n",
        b"_Open": "_Öffnen".encode(),
        b"menu\x04Sort _favorites": b"_Favoriten sortieren",
        b"%d file\x00%d files": b"%d Datei\x00%d Dateien",
        b"OK": b"OK",
        b"Empty": b"",
        b"%s: %s": b"%s : %s",
        b"translator-credits": b"Jane Doe",
        b"Renaming \"%s\"": "»%s« wird umbenannt".encode(),
    })
    return path


def test_read_mo_matches_stdlib_gettext(mo_file):
    entries = {(e.context, e.msgid): e for e in read_mo(mo_file)}
    catalog = gettext.GNUTranslations(open(mo_file, "rb"))._catalog
    assert entries[("menu", "Sort _favorites")].msgstrs == ("_Favoriten sortieren",)
    assert catalog["menu\x04Sort _favorites"] == "_Favoriten sortieren"
    plural = entries[(None, "%d file")]
    assert plural.msgid_plural == "%d files" and plural.msgstrs == ("%d Datei", "%d Dateien")
    assert catalog[("%d file", 1)] == "%d Dateien"


def test_mo_pairs_policy(mo_file):
    assert list(mo_pairs(mo_file, "de", markers="_")) == [
        ('Renaming "%s"', "»%s« wird umbenannt"),  # in msgid order, as in the catalogue
        ("Sort favorites", "Favoriten sortieren"),
        ("Open", "Öffnen"),
    ]


def test_read_mo_rejects_other_files(tmp_path):
    bad = tmp_path / "x.mo"
    bad.write_bytes(b"not a catalogue at all")
    with pytest.raises(DataError):
        read_mo(bad)


def test_strip_accelerators():
    assert strip_accelerators("T_rash", "_") == "Trash"
    assert strip_accelerators("ファイル(_F)", "_") == "ファイル"
    assert strip_accelerators("file_name_here", "_") == "file_name_here"
    assert strip_accelerators("&Save", "&") == "Save"
    assert strip_accelerators("Tom &amp; &Jerry", "&") == "Tom &amp; Jerry"
    assert strip_accelerators("~Insert", "~") == "Insert"


def test_clean_pair_script_check():
    assert clean_pair("Open file", "Открыть файл", "ru") == ("Open file", "Открыть файл")
    assert clean_pair("Open file", "Open File", "ru") is None  # untranslated (case only)
    assert clean_pair("Open file", "Open the file", "ru") is None  # Latin script: not translated into Russian


# --- filters, dedup, locales -----------------------------------------------------------------------------------


def test_keep_line_and_word_count():
    assert keep_line("Die Einträge werden alphabetisch sortiert.", "de")
    assert not keep_line("BESCHREIBUNG", "de")  # a heading
    assert not keep_line("0x0000 0x0001 0x0002 0x0003 0x0004", "en")  # numbers
    assert not keep_line("This paragraph was never translated.", "ru")
    assert keep_line("列出目录内容", "zh")
    assert word_count("Die Einträge werden sortiert", "de") == 4
    assert word_count("列出目录内容", "zh") == 3


def test_dedup_writer(tmp_path):
    writer = DedupWriter(tmp_path / "de.txt.gz", "de")
    assert writer.add("Ein  erster Satz, lang genug.", "a")
    assert not writer.add("Ein erster Satz, lang genug. ", "b")  # same after normalisation
    assert not writer.add("kurz", "b")
    assert writer.add("Ein zweiter Satz, lang genug.", "b")
    writer.close()
    lines = gzip.decompress((tmp_path / "de.txt.gz").read_bytes()).decode().splitlines()
    assert lines == ["Ein erster Satz, lang genug.", "Ein zweiter Satz, lang genug."]
    assert (writer.total.lines, writer.by_source["a"].lines, writer.by_source["b"].words) == (2, 1, 5)


def test_empty_writer_leaves_valid_gzip(tmp_path):
    writer = DedupWriter(tmp_path / "hi.txt.gz", "hi")
    writer.close()
    assert gzip.decompress((tmp_path / "hi.txt.gz").read_bytes()) == b""


def test_gzip_output_is_reproducible(tmp_path):
    for name in ("a", "b"):
        writer = DedupWriter(tmp_path / name / "en.txt.gz", "en")
        writer.add("The same sentence every time.", "x")
        writer.close()
    assert (tmp_path / "a/en.txt.gz").read_bytes() == (tmp_path / "b/en.txt.gz").read_bytes()


def test_normalize_line():
    assert normalize_line("  a\u0308b\tc\x0bd  ") == "äb c d"


def test_pick_locale():
    assert pick_locale(["de", "de_AT", "fr_CA"], "de") == "de"
    assert pick_locale(["de-DE", "en-US", "zh-CN", "zh-TW"], "zh") == "zh-CN"
    assert pick_locale(["zh_TW"], "zh") is None
    assert pick_locale(["sr", "sr@latin"], "sr") == "sr"
    assert pick_locale(["en-US", "ko-KR"], "ko") == "ko-KR"
    assert pick_locale(["man1", "de"], "hi") is None


def test_untranslated_english_and_option_tags_are_dropped():
    assert not keep_line("If the file is not found, the command exits with an error.", "fr")
    assert keep_line("Si le fichier n'est pas trouvé, la commande se termine avec une erreur.", "fr")
    assert keep_line("Jeder will alt werden, aber keiner will es sein.", "de")
    assert keep_line("If the file is not found, the command exits with an error.", "en")
    assert not keep_line("-S, --skel=VERZEICHNIS", "de")
    assert keep_line("-q 静默输出", "zh")


def test_ansi_colour_codes_are_removed():
    assert normalize_line("\x1b[33m    -- 黑格尔\x1b[m") == "-- 黑格尔"


# --- end to end, with fake packages instead of apt ---------------------------------------------------------------


def _fake_packages(root: Path) -> dict[str, Path]:
    """Three tiny unpacked packages: German fortunes, a two-language handbook, a cinnamon catalogue."""
    def put(path: Path, data: bytes | str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))

    trees = {name: root / name for name in ("fortunes-de", "debian-handbook", "cinnamon-l10n")}
    for name, tree in trees.items():
        put(tree / f"usr/share/doc/{name}/copyright", f"Files: *\nLicense: GPL-2+ ({name})\n")
    games = trees["fortunes-de"] / "usr/share/games/fortunes/de"
    put(games / "sprueche", "Größe ist nicht alles, sagte der Bär.\n%\nÜbung macht den Meister, sagt man.\n"
        .encode("latin-1"))
    (games / "sprueche.u8").symlink_to("sprueche")
    put(games / "off/boese", "Dieser Spruch ist absichtlich ausgelassen.\n")
    html = trees["debian-handbook"] / "usr/share/doc/debian-handbook/html"
    put(html / "en-US/apt.html", "<div class='para'>APT is the abbreviation for Advanced Packaging Tool.</div>"
        "<div class='para'>This paragraph was never translated into German.</div>")
    put(html / "de-DE/apt.html", "<div class='para'>APT steht für Advanced Packaging Tool, ein Werkzeug.</div>"
        "<div class='para'>This paragraph was never translated into German.</div>")
    mo = trees["cinnamon-l10n"] / "usr/share/locale/de/LC_MESSAGES/nemo.mo"
    mo.parent.mkdir(parents=True)
    write_mo(mo, {b"": b"Content-Type: text/plain; charset=UTF-8\n", b"_Open": "_Öffnen".encode(),
                  b"Empty _Trash": b"Papierkorb _leeren"})
    return trees


def test_build_large_corpora_end_to_end(tmp_path, monkeypatch):
    trees = _fake_packages(tmp_path / "unpacked")

    def fake_fetch(name: str, cache_dir: Path) -> Package:
        if name not in trees:
            raise FetchError(f"Unable to locate package {name}")
        return Package("deb", name, "1.0-1", trees[name])

    monkeypatch.setattr(large_build, "fetch_deb", fake_fetch)
    monkeypatch.setattr(large_build, "ensure_groff", lambda: None)
    out = tmp_path / "out" / "large-corpora"
    manifest = build_large_corpora(out, tmp_path / "cache", languages=("en", "de"), progress=False)

    def lines(rel: str) -> list[str]:
        return gzip.decompress((out / rel).read_bytes()).decode("utf-8").splitlines()

    assert lines("mono/de.txt.gz") == [
        "APT steht für Advanced Packaging Tool, ein Werkzeug.",  # untranslated handbook paragraph dropped
        "Größe ist nicht alles, sagte der Bär.",
        "Übung macht den Meister, sagt man.",
    ]
    assert lines("mono/en.txt.gz")[0] == "APT is the abbreviation for Advanced Packaging Tool."
    assert lines("parallel/en-de.tsv.gz") == ["Empty Trash\tPapierkorb leeren", "Open\tÖffnen"]
    assert manifest["mono"]["de"]["lines"] == 3 and manifest["parallel"]["en-de"]["pairs"] == 2
    fortunes = lines("mono/de.txt.gz")[1:]
    assert manifest["sources"]["fortunes-de"]["mono"]["de"] == {
        "lines": 2, "words": 13, "bytes": sum(len(f.encode()) + 1 for f in fortunes)}
    assert "manpages-de" in manifest["skipped_packages"]
    assert (out / "LICENSES/cinnamon-l10n.copyright").read_text().startswith("Files: *")
    assert "`debian-handbook`" in (out / "ATTRIBUTION.md").read_text()
    assert manifest == __import__("json").loads((out / "manifest.json").read_text())

    first = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    build_large_corpora(out, tmp_path / "cache", languages=("en", "de"), progress=False)  # replaces out
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == first
    assert sorted(p.name for p in out.parent.iterdir()) == ["large-corpora"]  # no temp dirs left behind
