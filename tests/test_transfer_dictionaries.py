"""transfer.dictionaries: finding en-<lang> files and reading them into foreign -> English translations."""

import gzip
import lzma

import pytest

from metaxlm.errors import DataError
from metaxlm.transfer.dictionaries import TranslationTable, dictionaries_in, load_dictionaries


def test_dictionaries_in(tmp_path):
    with lzma.open(tmp_path / "en-ja.txt.xz", "wt", encoding="utf-8") as f:
        f.write("Tokyo\t東京\n")
    with gzip.open(tmp_path / "en-de.txt.gz", "wt", encoding="utf-8") as f:
        f.write("cat\tKatze\n")
    (tmp_path / "en-fr.txt").write_text("cat\tchat\n", encoding="utf-8")
    (tmp_path / "de-en.txt").write_text("Katze\tcat\n", encoding="utf-8")  # not English-centric: ignored
    assert dictionaries_in(tmp_path) == {"de": tmp_path / "en-de.txt.gz", "fr": tmp_path / "en-fr.txt",
                                         "ja": tmp_path / "en-ja.txt.xz"}
    assert list(dictionaries_in(tmp_path, ["ja", "de"])) == ["ja", "de"]
    assert dictionaries_in(tmp_path, []) == {}
    with pytest.raises(DataError, match=r"no en-<lang> dictionary for \['es'\]"):
        dictionaries_in(tmp_path, ["de", "es"])
    with pytest.raises(DataError, match="nowhere: no such dictionary directory"):
        dictionaries_in(tmp_path / "nowhere")


def test_load_inverts_files_and_merges_languages(tmp_path):
    path = tmp_path / "en-de.txt.xz"
    with lzma.open(path, "wt", encoding="utf-8") as f:
        # english<TAB>foreign; a multi-word foreign side is a phrase (dropped), a multi-word English one is kept
        f.write("dog\tHund\nhound\tHund\ndog\tHund\nbig dog\tHund\nsmall dog\tkleiner Hund\ncat\tKatze\n")
    out = load_dictionaries({"de": path, "xx": {"Hund": ["canine", "dog"], "Ｋatze": "kitty"}})
    assert out == {"Hund": ["dog", "hound", "big dog", "canine"],  # order kept, duplicates dropped
                   "Katze": ["cat", "kitty"]}  # keys NFKC-normalized: the full-width Ｋ is a K
    assert load_dictionaries({}) == {}


def test_load_normalizes_keys_with_the_given_function():
    out = load_dictionaries({"de": {"Café": ["cafe"], " Haus ": ["house"], "": ["nothing"], "x": [" "]}},
                            normalize=str.lower)
    assert out == {"café": ["cafe"], "haus": ["house"]}  # empty sides dropped, keys stripped


def test_bad_dictionary_line_names_file_and_line(tmp_path):
    path = tmp_path / "en-de.txt"
    path.write_text("dog\tHund\ncat\tKatze\textra\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"en-de.txt:2: expected 'source<TAB>target'"):
        load_dictionaries({"de": path})


def test_translation_table_case_insensitive_look_up():
    entries = {"Laden": ["shop"], "laden": ["load", "shop"], "fenster": ["window"], "Arm": ["arm"], "ARM": ["ARM"]}
    table = TranslationTable(entries, ignore_case=True)
    assert table.get("Laden") == ["shop"] and table.get("laden") == ["load", "shop"]  # same spelling wins
    assert table.get("Fenster") == ["window"] and table.get("FENSTER") == ["window"]
    assert table.get("LADEN") == ["shop", "load"]  # several entries of that lower case: merged, in order
    assert table.get("arm") == ["arm", "ARM"]
    assert table.get("Tür") == [] and table.get("") == []

    exact = TranslationTable(entries, ignore_case=False)  # an uncased source: keys already lower-cased
    assert exact.get("Fenster") == [] and exact.get("fenster") == ["window"]
    assert not TranslationTable({}, ignore_case=True) and table
