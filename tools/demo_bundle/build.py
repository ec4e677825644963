"""`python -m tools.demo_bundle` (`make demo-data`): build the demo corpus bundle (data/demo/) from registry
packages.

Pipeline: fetch packages -> parse the 12 LibreOffice help translations -> split pages -> write mono,
parallel, retrieval, tasks, dictionaries, gold alignments -> licences, manifest, data card. Everything is
ordered by sorted keys or sha256, and xz is written with fixed settings, so two builds from the same
cache are byte-identical.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import sys
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from metaxlm.errors import MetaXLMError
from metaxlm.io import atomic_dir
from metaxlm.languages import check_language
from tools.demo_bundle import alignments as al
from tools.demo_bundle import card
from tools.demo_bundle import dictionaries as dc
from tools.demo_bundle import libreoffice as lo
from tools.demo_bundle.settings import (
    ALIGNMENT_VERSES,
    BIBLE_ALIGNMENTS,
    DEV_FRACTION,
    FOREIGN,
    HELP_LANGS,
    LANGS,
    MAX_FILE_BYTES,
    MAX_MODULE_TRAIN,
    MAX_MONO_LINES,
    MAX_PARALLEL_PAIRS,
    MAX_SPANS_TRAIN,
    MAX_TOTAL_BYTES,
    RETRIEVAL_MIN_WORDS,
    RETRIEVAL_SIZE,
    TEST_FRACTION,
    XZ_PRESET,
    Bundle,
)
from tools.fetch import Package, fetch_deb, fetch_pypi


class BuildError(MetaXLMError):
    """The bundle could not be built (the message says what failed)."""


def _log(progress: bool, msg: str) -> None:
    if progress:
        print(f"[demo-bundle] {msg}", file=sys.stderr, flush=True)


def _load(args: tuple[str, str]) -> tuple[str, dict[str, dict[str, lo.Segment]]]:
    lang, root = args
    return lang, lo.load_language(lo.help_root(Path(root)))


# --------------------------------------------------------------------------------------------------------
def assign_splits(pages: Iterable[str]) -> dict[str, str]:
    """page -> split. Within each module directory pages are ordered by sha256 of the path; the first
    10% go to test, the next 10% to dev (so every module has held-out pages), the rest to train."""
    by_dir: dict[str, list[str]] = {}
    for page in pages:
        by_dir.setdefault(page.split("/")[1], []).append(page)
    split = {}
    for group in by_dir.values():
        group.sort(key=lo.stable_key)
        n_test = round(len(group) * TEST_FRACTION)
        n_dev = round(len(group) * DEV_FRACTION)
        for i, page in enumerate(group):
            split[page] = "test" if i < n_test else "dev" if i < n_test + n_dev else "train"
    return dict(sorted(split.items()))


def _first_by_hash(items: Iterable, n: int, key) -> list:
    return sorted(items, key=lambda x: lo.stable_key(key(x)))[:n]


def build_text_data(corpus: dict[str, dict[str, dict[str, lo.Segment]]]) -> Bundle:
    """Pair, filter, split and sample the help text into mono/parallel/retrieval/task lists."""
    en = corpus["en"]
    b = Bundle(split=assign_splits(en))

    # Held-out text per language: every segment on a dev/test page. A train segment with the same text
    # (help pages embed shared paragraphs) is dropped, so no held-out line is ever trained on.
    heldout: dict[str, set[str]] = {lang: set() for lang in LANGS}
    for lang in LANGS:
        for page, segs in corpus[lang].items():
            if b.split.get(page, "train") != "train":
                heldout[lang].update(s.text for s in segs.values())

    mono: dict[str, set[str]] = {lang: set() for lang in LANGS}
    par: dict[str, set[tuple[str, str]]] = {lang: set() for lang in FOREIGN}
    test_pairs: dict[str, dict[tuple[str, str], str]] = {lang: {} for lang in FOREIGN}  # pair -> id
    items: dict[str, list[tuple[str, lo.Segment, str]]] = {"train": [], "dev": [], "test": []}
    for page in en:  # pages and segments in sorted/document order
        split, label = b.split[page], lo.module_of(page)
        for sid, s in en[page].items():
            if not lo.is_text(s.text, s.cls):
                continue
            en_item = lo.en_long_enough(s.text)
            if split == "train" and s.text not in heldout["en"]:
                mono["en"].add(s.text)
            if en_item and label:
                items[split].append((f"{page}#{sid}", s, label))
            for lang in FOREIGN:
                t = corpus[lang].get(page, {}).get(sid)
                if t is None or not lo.is_text(t.text, t.cls) or not lo.is_translated(s.text, t.text, lang):
                    continue
                if split == "train":
                    if t.text not in heldout[lang]:
                        mono[lang].add(t.text)
                    if en_item and s.text not in heldout["en"] and t.text not in heldout[lang]:
                        par[lang].add((s.text, t.text))
                elif split == "test" and len(s.text.split()) >= RETRIEVAL_MIN_WORDS:
                    test_pairs[lang].setdefault((s.text, t.text), f"{page}#{sid}")

    for lang in LANGS:
        b.mono[lang] = _first_by_hash(mono[lang], MAX_MONO_LINES, key=lambda x: x)
        b.available.setdefault(lang, {})["mono"] = len(mono[lang])
    for lang in FOREIGN:
        b.parallel[lang] = _first_by_hash(par[lang], MAX_PARALLEL_PAIRS, key=lambda p: p[0] + "\t" + p[1])
        b.available[lang]["parallel"] = len(par[lang])
        b.retrieval[lang] = _retrieval_sample(test_pairs[lang])
        b.available[lang]["retrieval"] = len(test_pairs[lang])

    _build_tasks(b, corpus, items)
    return b


def _retrieval_sample(pairs: dict[tuple[str, str], str]) -> list[tuple[str, str]]:
    """RETRIEVAL_SIZE pairs by sha256 of the segment id, with no English or foreign text twice (a
    repeated text would have two correct answers)."""
    out: list[tuple[str, str]] = []
    seen_en: set[str] = set()
    seen_xx: set[str] = set()
    for (e, x), _ in sorted(pairs.items(), key=lambda kv: lo.stable_key(kv[1] + "\n" + kv[0][0])):
        if e in seen_en or x in seen_xx:
            continue
        seen_en.add(e)
        seen_xx.add(x)
        out.append((e, x))
        if len(out) == RETRIEVAL_SIZE:
            break
    return sorted(out, key=lambda p: lo.stable_key(p[0] + "\t" + p[1]))


def _dedupe_items(items: dict[str, list[tuple[str, lo.Segment, str]]], heldout_en: set[str]
                  ) -> dict[str, list[tuple[str, lo.Segment, str]]]:
    """One item per English text: test wins over dev over train, then the smallest id; train items whose
    text is held-out text anywhere are dropped."""
    seen: set[str] = set()
    out = {}
    for split in ("test", "dev", "train"):
        kept = []
        for item in sorted(items[split], key=lambda it: it[0]):
            text = item[1].text
            if text in seen or (split == "train" and text in heldout_en):
                continue
            seen.add(text)
            kept.append(item)
        out[split] = kept
    return out


def _build_tasks(b: Bundle, corpus, items) -> None:
    heldout_en = {s.text for split in ("dev", "test") for _, s, _ in items[split]}
    heldout_en |= {s.text for p, segs in corpus["en"].items() if b.split[p] != "train" for s in segs.values()}
    items = _dedupe_items(items, heldout_en)

    def module_item(iid: str, text: str, label: str) -> dict:
        return {"id": iid, "text": text, "label": label}

    def spans_item(iid: str, seg: lo.Segment) -> dict:
        return {"id": iid, "text": seg.text, "spans": [[s, e, lab] for s, e, lab in seg.spans]}

    def has_good_spans(seg: lo.Segment) -> bool:
        return bool(seg.spans) and all(e > s for s, e, _ in seg.spans)

    b.available["en"]["module_train"] = len(items["train"])
    train = _first_by_hash(items["train"], MAX_MODULE_TRAIN, key=lambda it: it[0])
    b.module["train"] = [module_item(i, s.text, lab) for i, s, lab in train]
    b.module["dev"] = [module_item(i, s.text, lab) for i, s, lab in items["dev"]]
    span_items = {k: [it for it in v if has_good_spans(it[1])] for k, v in items.items()}
    b.available["en"]["spans_train"] = len(span_items["train"])
    b.spans["train"] = [spans_item(i, s) for i, s, _ in
                        _first_by_hash(span_items["train"], MAX_SPANS_TRAIN, key=lambda it: it[0])]
    b.spans["dev"] = [spans_item(i, s) for i, s, _ in span_items["dev"]]
    for split in ("train", "dev"):  # train files were sampled by hash; list them in id order
        b.module[split].sort(key=lambda d: d["id"])
        b.spans[split].sort(key=lambda d: d["id"])

    b.module["test.en"] = [module_item(i, s.text, lab) for i, s, lab in items["test"]]
    b.spans["test.en"] = [spans_item(i, s) for i, s, _ in span_items["test"]]
    for lang in FOREIGN:
        mod, spn = [], []
        dropped = Counter()
        for iid, s, lab in items["test"]:
            page, sid = iid.split("#")
            t = corpus[lang].get(page, {}).get(sid)
            ok = t is not None and lo.is_text(t.text, t.cls) and lo.is_translated(s.text, t.text, lang)
            if ok:
                mod.append(module_item(iid, t.text, lab))
            if not has_good_spans(s):
                continue
            if not ok:
                dropped["untranslated"] += 1
            elif not all(e > st for st, e, _ in t.spans):
                dropped["empty_span"] += 1
            elif Counter(lab for *_, lab in t.spans) != Counter(lab for *_, lab in s.spans):
                dropped["labels_changed"] += 1
            else:
                spn.append(spans_item(iid, t))
        b.module[f"test.{lang}"] = mod
        b.spans[f"test.{lang}"] = spn
        b.spans_dropped[lang] = {k: dropped[k] for k in ("untranslated", "empty_span", "labels_changed")}


# -- writing ---------------------------------------------------------------------------------------------
def write_xz(path: Path, lines: list[str]) -> None:
    """Lines as UTF-8 text, xz with fixed preset and CRC64 check. The xz format stores no file name or
    mtime, so equal lines give equal bytes."""
    for line in lines:
        if "\n" in line or "\r" in line:
            raise BuildError(f"{path.name}: a line contains a newline: {line[:60]!r}")
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=XZ_PRESET))


def _jsonl(rows: list[dict]) -> list[str]:
    return [json.dumps(r, ensure_ascii=False) for r in rows]


def write_bundle(out: Path, b: Bundle) -> None:
    for lang in LANGS:
        write_xz(out / f"mono/{lang}.txt.xz", b.mono[lang])
    for lang in FOREIGN:
        write_xz(out / f"parallel/en-{lang}.tsv.xz", [f"{e}\t{x}" for e, x in b.parallel[lang]])
        write_xz(out / f"retrieval/en-{lang}.tsv.xz", [f"{e}\t{x}" for e, x in b.retrieval[lang]])
    for lang, pairs in b.dicts.items():
        write_xz(out / f"dict/en-{lang}.txt.xz", [f"{e}\t{x}" for e, x in pairs])
    for task, data in (("module", b.module), ("spans", b.spans)):
        for name, rows in data.items():
            fname = f"{name}.en.jsonl.xz" if name in ("train", "dev") else f"{name}.jsonl.xz"
            write_xz(out / f"tasks/{task}/{fname}", _jsonl(rows))
    adir = out / "alignment/grc-en"
    adir.mkdir(parents=True, exist_ok=True)
    for name, lines in (("test.grc", [" ".join(v.src) for v in b.verses]),
                        ("test.en", [" ".join(v.tgt) for v in b.verses]),
                        ("gold.txt", [al.pharaoh(v.links) for v in b.verses]),
                        ("verses.txt", [v.vid for v in b.verses])):
            (adir / name).write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    (out / "splits.json").write_text(json.dumps(
        {"method": f"pages of each text/<module> directory ordered by sha256(page path); first "
                   f"{TEST_FRACTION:.0%} test, next {DEV_FRACTION:.0%} dev, rest train",
         "counts": dict(sorted(Counter(b.split.values()).items())), "pages": b.split},
        indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def count_lines(path: Path) -> int:
    data = lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()
    return data.count(b"\n")


def file_table(out: Path) -> dict[str, dict]:
    files = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = path.relative_to(out).as_posix()
        if rel == "manifest.json":
            continue
        files[rel] = {"lines": count_lines(path), "bytes": path.stat().st_size,
                      "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    return files


# --------------------------------------------------------------------------------------------------------
def fetch_all(cache_dir: Path, progress: bool) -> dict[str, Package]:
    pkgs: dict[str, Package] = {}
    names = [f"libreoffice-help-{HELP_LANGS[lang]}" for lang in LANGS]
    names += [f"dict-freedict-eng-{code}" for code in dc.FREEDICT_LANGS.values()]
    for name in names:
        _log(progress, f"fetching {name}")
        pkgs[name] = fetch_deb(name, cache_dir)
    _log(progress, f"fetching {BIBLE_ALIGNMENTS[0]}=={BIBLE_ALIGNMENTS[1]}")
    pkgs[BIBLE_ALIGNMENTS[0]] = fetch_pypi(*BIBLE_ALIGNMENTS, cache_dir)
    return pkgs


def load_corpus(pkgs: dict[str, Package], progress: bool) -> dict[str, dict[str, dict[str, lo.Segment]]]:
    from tqdm import tqdm

    jobs = [(lang, str(pkgs[f"libreoffice-help-{HELP_LANGS[lang]}"].root)) for lang in LANGS]
    with ProcessPoolExecutor(max_workers=2) as pool:
        results = dict(tqdm(pool.map(_load, jobs), total=len(jobs), desc="parsing help pages", unit="lang",
                            disable=not progress))
    return {lang: results[lang] for lang in LANGS}


def build_demo(out_dir: Path, cache_dir: Path, *, progress: bool = True) -> dict:
    """Build the demo bundle into `out_dir` (replaced atomically); returns the manifest dict."""
    out_dir, cache_dir = Path(out_dir), Path(cache_dir)
    for lang in LANGS:
        check_language(lang, "demo bundle")
    pkgs = fetch_all(cache_dir, progress)
    corpus = load_corpus(pkgs, progress)

    _log(progress, "pairing, filtering and splitting")
    b = build_text_data(corpus)
    del corpus
    _log(progress, "dictionaries")
    en_vocab = dc.vocabulary(b.mono["en"])
    for lang, code in dc.FREEDICT_LANGS.items():
        b.dicts[lang] = dc.build_dictionary(pkgs[f"dict-freedict-eng-{code}"].root, lang, en_vocab,
                                            dc.vocabulary(b.mono[lang]))
    _log(progress, "gold alignments")
    all_verses = al.load_verses(pkgs[BIBLE_ALIGNMENTS[0]].root)
    b.verses = al.choose(all_verses, ALIGNMENT_VERSES)

    with atomic_dir(out_dir) as tmp:
        tmp.chmod(0o755)  # mkdtemp makes it private; the bundle is meant to be read by everyone
        _log(progress, f"writing xz files into {tmp}")
        write_bundle(tmp, b)
        (tmp / "alignment/grc-en/meta.json").write_text(json.dumps(
            card.alignment_meta(pkgs[BIBLE_ALIGNMENTS[0]], len(b.verses), len(all_verses),
                                sum(len(v.links) for v in b.verses)), indent=2, ensure_ascii=False) + "\n",
            encoding="utf-8")
        card.write_licenses(tmp, pkgs)
        manifest = card.manifest(b, pkgs, file_table(tmp))
        (tmp / "README.md").write_text(card.data_card(b, manifest), encoding="utf-8")
        manifest["files"] = file_table(tmp)  # now including README.md
        _check_sizes(manifest["files"])
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                           encoding="utf-8")
    _log(progress, f"done: {out_dir} ({sum(f['bytes'] for f in manifest['files'].values()) / 1e6:.2f} MB)")
    return manifest


def _check_sizes(files: dict[str, dict]) -> None:
    big = [f"{name} ({f['bytes']} bytes)" for name, f in files.items() if f["bytes"] > MAX_FILE_BYTES]
    total = sum(f["bytes"] for f in files.values())
    if big or total > MAX_TOTAL_BYTES:
        raise BuildError(f"bundle too large: total {total} bytes (limit {MAX_TOTAL_BYTES}); "
                         f"files over {MAX_FILE_BYTES}: {big or 'none'}")
