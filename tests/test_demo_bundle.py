"""Integrity of the demo bundle shipped in data/demo/, the data the library reads (built by tools/demo_bundle:
`make demo-data`)."""

from __future__ import annotations

import hashlib
import json
import lzma
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from metaxlm.languages import check_language

BUNDLE = Path(__file__).resolve().parents[1] / "data" / "demo"
LANGS = ["en", "de", "fr", "es", "ru", "el", "zh", "ja", "tr", "vi", "ko", "hi"]
FOREIGN = LANGS[1:]
SPAN_LABELS = {"menuitem", "keycode", "input", "literal", "emph"}
MODULES = {"swriter", "scalc", "simpress", "sdraw", "smath", "schart", "sbase", "sbasic", "shared"}


@cache
def manifest() -> dict:
    path = BUNDLE / "manifest.json"
    assert path.is_file(), f"{path} missing: run `make demo-data`"
    return json.loads(path.read_text(encoding="utf-8"))


@cache
def lines(rel: str) -> tuple[str, ...]:
    data = (BUNDLE / rel).read_bytes()
    if rel.endswith(".xz"):
        data = lzma.decompress(data)
    text = data.decode("utf-8")
    assert text == "" or text.endswith("\n"), f"{rel}: last line has no newline"
    return tuple(text.splitlines())


def tsv(rel: str) -> list[tuple[str, str]]:
    out = []
    for line in lines(rel):
        e, x = line.split("\t")
        out.append((e, x))
    return out


def jsonl(rel: str) -> list[dict]:
    return [json.loads(line) for line in lines(rel)]


def test_manifest_lists_every_file_with_lines_bytes_sha256():
    files = manifest()["files"]
    on_disk = sorted(p.relative_to(BUNDLE).as_posix() for p in BUNDLE.rglob("*")
                     if p.is_file() and p.name != "manifest.json")
    assert sorted(files) == on_disk
    for rel, meta in files.items():
        raw = (BUNDLE / rel).read_bytes()
        assert meta["bytes"] == len(raw), rel
        assert meta["sha256"] == hashlib.sha256(raw).hexdigest(), rel
        assert meta["lines"] == len(lines(rel)), rel


def test_sizes():
    sizes = {rel: (BUNDLE / rel).stat().st_size for rel in manifest()["files"]}
    sizes["manifest.json"] = (BUNDLE / "manifest.json").stat().st_size
    assert max(sizes.values()) <= 8_000_000, max(sizes.items(), key=lambda kv: kv[1])
    assert sum(sizes.values()) <= 15_000_000


def test_manifest_counts_equal_file_line_counts():
    c = manifest()["counts"]
    assert sorted(c) == sorted(LANGS)
    for lang in LANGS:
        check_language(lang)
        assert c[lang]["mono"] == len(lines(f"mono/{lang}.txt.xz")) > 0
        assert c[lang]["module_test"] == len(lines(f"tasks/module/test.{lang}.jsonl.xz"))
        assert c[lang]["spans_test"] == len(lines(f"tasks/spans/test.{lang}.jsonl.xz"))
        if lang != "en":
            assert c[lang]["parallel"] == len(lines(f"parallel/en-{lang}.tsv.xz")) > 0
            assert c[lang]["retrieval"] == len(lines(f"retrieval/en-{lang}.tsv.xz"))
        if "dict" in c[lang]:
            assert c[lang]["dict"] == len(lines(f"dict/en-{lang}.txt.xz")) > 0
    for task in ("module", "spans"):
        for split in ("train", "dev"):
            assert c["en"][f"{task}_{split}"] == len(lines(f"tasks/{task}/{split}.en.jsonl.xz")) > 0


def test_retrieval_has_1000_pairs_unless_the_data_has_fewer():
    avail = manifest()["available_before_caps"]
    for lang in FOREIGN:
        pairs = tsv(f"retrieval/en-{lang}.tsv.xz")
        # fewer than 1,000 only when the test pages hold fewer candidate pairs (the data card says so)
        assert len(pairs) == 1000 or len(pairs) <= avail[lang]["retrieval"] < 1000, lang
        assert len({e for e, _ in pairs}) == len(pairs) == len({x for _, x in pairs}), f"{lang}: repeated text"
    assert sum(len(lines(f"retrieval/en-{lang}.tsv.xz")) == 1000 for lang in FOREIGN) >= 10


def _add_pairs(texts: dict[str, set[str]], folder: str) -> None:
    """Both sides of every en-xx pair file in `folder` into the per-language text sets."""
    for lang in FOREIGN:
        for e, x in tsv(f"{folder}/en-{lang}.tsv.xz"):
            texts["en"].add(e)
            texts[lang].add(x)


def _training_text() -> dict[str, set[str]]:
    """Per language, every text a model may train on: mono, both sides of parallel, task train files."""
    train: dict[str, set[str]] = {lang: set(lines(f"mono/{lang}.txt.xz")) for lang in LANGS}
    _add_pairs(train, "parallel")
    for task in ("module", "spans"):
        train["en"].update(r["text"] for r in jsonl(f"tasks/{task}/train.en.jsonl.xz"))
    return train


def test_no_heldout_text_in_any_training_file():
    train = _training_text()
    held: dict[str, set[str]] = {lang: set() for lang in LANGS}
    _add_pairs(held, "retrieval")
    for task in ("module", "spans"):
        held["en"].update(r["text"] for r in jsonl(f"tasks/{task}/dev.en.jsonl.xz"))
        for lang in LANGS:
            held[lang].update(r["text"] for r in jsonl(f"tasks/{task}/test.{lang}.jsonl.xz"))
    for lang in LANGS:
        leaked = held[lang] & train[lang]
        assert not leaked, f"{lang}: {len(leaked)} held-out lines in training files, e.g. {sorted(leaked)[:3]}"


def test_retrieval_disjoint_from_parallel():
    for lang in FOREIGN:
        par = tsv(f"parallel/en-{lang}.tsv.xz")
        ret = tsv(f"retrieval/en-{lang}.tsv.xz")
        assert not set(par) & set(ret), lang
        assert not {e for e, _ in par} & {e for e, _ in ret}, lang
        assert not {x for _, x in par} & {x for _, x in ret}, lang


def test_task_items_come_from_pages_of_their_split():
    split = json.loads((BUNDLE / "splits.json").read_text(encoding="utf-8"))["pages"]
    assert set(split.values()) == {"train", "dev", "test"}
    for task in ("module", "spans"):
        for name, want in [("train.en", "train"), ("dev.en", "dev")] + [(f"test.{x}", "test") for x in LANGS]:
            for r in jsonl(f"tasks/{task}/{name}.jsonl.xz"):
                page = r["id"].split("#")[0]
                assert split[page] == want, (task, name, r["id"])


def test_module_task_labels_and_translated_ids():
    en = {r["id"]: r for r in jsonl("tasks/module/test.en.jsonl.xz")}
    for name in ["train.en", "dev.en"] + [f"test.{x}" for x in LANGS]:
        rows = jsonl(f"tasks/module/{name}.jsonl.xz")
        assert {r["label"] for r in rows} <= MODULES
        assert len({r["id"] for r in rows}) == len(rows), name
    assert {r["label"] for r in jsonl("tasks/module/train.en.jsonl.xz")} == MODULES
    for lang in FOREIGN:
        for r in jsonl(f"tasks/module/test.{lang}.jsonl.xz"):
            assert r["id"] in en and r["label"] == en[r["id"]]["label"]
            assert r["text"] != en[r["id"]]["text"]


def test_spans_are_valid_offsets_and_match_english_labels():
    en = {r["id"]: r for r in jsonl("tasks/spans/test.en.jsonl.xz")}
    for name in ["train.en", "dev.en"] + [f"test.{x}" for x in LANGS]:
        for r in jsonl(f"tasks/spans/{name}.jsonl.xz"):
            assert r["spans"], r["id"]
            prev_end = 0
            for s, e, lab in r["spans"]:
                assert lab in SPAN_LABELS
                assert prev_end <= s < e <= len(r["text"]), (name, r["id"])
                assert r["text"][s:e] == r["text"][s:e].strip()
                prev_end = e
            if name.startswith("test.") and name != "test.en":
                assert Counter(x[2] for x in r["spans"]) == Counter(x[2] for x in en[r["id"]]["spans"])


def test_dictionaries():
    dicts = sorted(p.name for p in (BUNDLE / "dict").glob("en-*.txt.xz"))
    assert len(dicts) >= 6
    for name in dicts:
        pairs = tsv(f"dict/{name}")
        assert pairs == sorted(set(pairs)), name
        assert all(e and x and " " not in e for e, x in pairs), name


def test_alignment_gold():
    d = "alignment/grc-en"
    meta = json.loads((BUNDLE / d / "meta.json").read_text(encoding="utf-8"))
    assert meta["index_base"] == 0 and meta["link_format"].startswith("pharaoh")
    src, tgt, gold = lines(f"{d}/test.grc"), lines(f"{d}/test.en"), lines(f"{d}/gold.txt")
    assert len(src) == len(tgt) == len(gold) == meta["verses"] == len(lines(f"{d}/verses.txt")) >= 100
    n_links = 0
    for s, t, g in zip(src, tgt, gold, strict=True):
        ns, nt = len(s.split()), len(t.split())
        for link in g.split():
            i, j = map(int, link.split("-"))
            assert 0 <= i < ns and 0 <= j < nt
            n_links += 1
    assert n_links == meta["links"]


def test_licences_and_attribution():
    attribution = (BUNDLE / "ATTRIBUTION.md").read_text(encoding="utf-8")
    for pkg in manifest()["packages"]:
        assert f"`{pkg['name']}`" in attribution and pkg["version"] in attribution
    assert (BUNDLE / "LICENSES/libreoffice-help.copyright.txt").is_file()
    readme = (BUNDLE / "README.md").read_text(encoding="utf-8")
    assert manifest()["rebuild"] in readme  # the card says how to rebuild the bundle


@pytest.mark.parametrize("rel", ["mono/en.txt.xz", "parallel/en-de.tsv.xz"])
def test_lines_are_unique(rel):
    assert len(set(lines(rel))) == len(lines(rel))
