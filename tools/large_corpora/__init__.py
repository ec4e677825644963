"""The large corpora: real text from Debian packages, larger than the demo bundle, built into a local cache
(never committed) for configs/large.yaml and the benchmarks in bench/.

Run `make large-corpora` (or `python -m tools.large_corpora --out .cache/large-corpora`). Layout:
`text.py` (normalisation, filters, decoding), one module per kind of source (`fortunes.py`, `manpages.py`,
`html.py`, `gcide.py`, `catalogues.py`), `build.py` (the package plan, writers, manifest, licences).

`build_large_corpora(out_dir, cache_dir)` downloads Debian packages into `cache_dir` (reused when present),
extracts their text and writes, atomically (a temp dir beside `out_dir`, renamed at the end):

* `mono/{lang}.txt.gz` -- one paragraph per line, NFC-normalised, exact-deduplicated per language, from
  man pages (`manpages`, `manpages-XX`, `manpages-ja`, `manpages-zh`), fortunes (`fortunes`, `fortunes-min`,
  `fortunes-XX`), the Debian Administrator's Handbook (`debian-handbook`, HTML) and, for English (the
  meta-pretraining language, so the largest), `dict-gcide`, `linux-doc-6.1` HTML and `python3.11-doc` HTML.
  `linux-doc-6.1`'s own translations (zh_CN, ja_JP, ko_KR, it_IT) go to those languages.
* `parallel/en-{xx}.tsv.gz` -- "english<TAB>foreign" UI/diagnostic strings from gettext catalogues
  (`cinnamon-l10n`, `gcc-12-locales`).
* `manifest.json` -- per source package (with version) and language: lines, words, bytes; per pair: pairs.
* `ATTRIBUTION.md` and `LICENSES/<package>.copyright` (each package's Debian copyright file).

Choices worth knowing:

* Leakage: the demo bundle's test splits are LibreOffice help pages, so no `libreoffice-help-*` text is used.
  `libreoffice-l10n-*` is left out too: measured on de, 3,099 of its 3,746 extended tooltips (and 3,235 of
  7,089 UI strings of six words or more) occur verbatim in the English help pages.
* Chinese is Simplified only (`zh_CN`/`zh-CN` trees), matching the demo's zh-cn; the zh_TW copies of the same
  man pages/handbook would be near-duplicates in another script.
* Untranslated text: handbook paragraphs identical to an English handbook paragraph are dropped; for languages
  with their own script (ru, el, zh, ja, ko, hi, ...) a line needs >= 30% of its letters in that script; in
  the other languages a line of 6+ words with >= 15% English function words ("the", "of", "is"...) is dropped.
* Lines need >= 16 characters (6 for zh/ja/ko) and >= 50% letters among non-space characters; option tags
  ("-S, --skel=FILE") are dropped.
  Fortunes under `off/` (offensive collections) and symlinked duplicates are skipped.
* Words are whitespace tokens; zh and ja have no spaces, so their `words` is non-space characters / 2
  (the manifest also carries `chars`).
* Gettext pairs: the header, plural entries and `translator-credits` are dropped, the msgctxt is stripped,
  GTK `_` mnemonics (cinnamon) are removed, printf/brace placeholders are kept verbatim (they are the same
  tokens on both sides), and pairs whose sides are equal ignoring case are dropped.
* Everything is iterated in sorted order and gzip headers carry no time stamp, so the same packages give
  byte-identical files. Lines are written as they are produced; memory is the per-language hash sets.

Set-up requirements (Debian): `apt-get update` done once, `apt-get`/`dpkg-deb` (to fetch packages), and
`groff` (package `groff-base`: groff, preconv, tbl, grotty) to render man pages -- installed here with
`apt-get install groff-base` if missing, which needs root. About 130 MB of .deb files are downloaded.
No language in the default set lacks a source except `hi`: Debian has no Hindi man pages, fortunes or
handbook, so `mono/hi.txt.gz` is empty (the manifest lists it under `warnings`).
"""

from tools.large_corpora.build import DEFAULT_LANGUAGES, build_large_corpora

__all__ = ["DEFAULT_LANGUAGES", "build_large_corpora"]
