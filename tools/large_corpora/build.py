"""The build: which package gives which text (the plan), deduplicating writers, manifest, licences, and
`build_large_corpora`, which runs it all into a directory replaced only when complete."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from tqdm import tqdm

from metaxlm.languages import check_language, is_unspaced
from tools.demo_bundle.build import LANGS as DEMO_LANGUAGES
from tools.fetch import FetchError, Package, fetch_deb
from tools.large_corpora.catalogues import gettext_pairs
from tools.large_corpora.fortunes import fortune_lines
from tools.large_corpora.gcide import gcide_lines
from tools.large_corpora.html import handbook_lines, sphinx_lines
from tools.large_corpora.manpages import ensure_groff, man_lines
from tools.large_corpora.text import digest, keep_line, normalize_line, word_count

# The demo bundle's languages, so a config can read both (configs/large.yaml does).
DEFAULT_LANGUAGES = tuple(DEMO_LANGUAGES)

@dataclass
class Counts:
    lines: int = 0
    words: int = 0
    chars: int = 0
    bytes: int = 0

    def add(self, text: str, lang: str) -> None:
        self.lines += 1
        self.words += word_count(text, lang)
        self.chars += len(text)
        self.bytes += len(text.encode("utf-8")) + 1


def _open_gzip_text(path: Path) -> tuple[io.TextIOWrapper, io.BufferedWriter]:
    """A text stream into a gzip file with no name or time stamp in its header (reproducible bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = open(path, "wb")  # closed by DedupWriter.close()
    gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6)
    return io.TextIOWrapper(gz, encoding="utf-8", newline="\n"), raw


@dataclass
class DedupWriter:
    """Writes filtered lines once each (by 64-bit hash) into a .gz file, counting them per source."""

    path: Path
    lang: str
    keep: Callable[[str, str], bool] = keep_line
    normalize: Callable[[str], str] = normalize_line
    total: Counts = field(default_factory=Counts)
    by_source: dict[str, Counts] = field(default_factory=dict)
    _seen: set[int] = field(default_factory=set)
    _out: io.TextIOWrapper | None = None
    _raw: io.BufferedWriter | None = None

    def add(self, text: str, source: str) -> bool:
        text = self.normalize(text)
        if not self.keep(text, self.lang):
            return False
        key = digest(text)
        if key in self._seen:
            return False
        self._seen.add(key)
        if self._out is None:
            self._out, self._raw = _open_gzip_text(self.path)
        self._out.write(text + "\n")
        self.total.add(text, self.lang)
        self.by_source.setdefault(source, Counts()).add(text, self.lang)
        return True

    def close(self) -> None:
        if self._out is None:  # nothing was written: still leave a valid (empty) file
            self._out, self._raw = _open_gzip_text(self.path)
        self._out.close()
        self._raw.close()


def _keep_pair_line(text: str, lang: str) -> bool:
    return bool(text)  # pairs are already filtered by clean_pair


def _pair_as_is(text: str) -> str:
    return text  # both sides are normalised by clean_pair; normalize_line would turn the tab into a space



_LICENCES = {
    "manpages": "various free licences, per page (see copyright)",
    "manpages-ja": "the licences of the original pages, per page (see copyright)",
    "manpages-tr": "GNU GPL and the original pages' licences (see copyright)",
    "manpages-zh": "GFDL-1.2+",
    "fortunes": "BSD-style (fortune-mod); cookies of various origins (see copyright)",
    "fortunes-min": "BSD-style (fortune-mod); cookies of various origins (see copyright)",
    "fortunes-de": "GPL-2+", "fortunes-es": "GPL-2+", "fortunes-ru": "GPL-2 / GPL-2+", "fortunes-zh": "GPL-3+",
    "debian-handbook": "GPL-2+ or CC-BY-SA-3.0",
    "dict-gcide": "GPL-2+ (GCIDE)",
    "linux-doc-6.1": "GPL-2",
    "python3.11-doc": "PSF-2.0",
    "cinnamon-l10n": "GPL-2+",
    "gcc-12-locales": "GPL-3+ (copyright file of gcc-12-base)",
}


MonoExtractor = Callable[[Path, tuple[str, ...], bool], Iterator[tuple[str, str]]]


def _per_lang(extract: Callable[[Path, str, bool], Iterator[tuple[str, str]]], lang: str) -> MonoExtractor:
    return lambda root, languages, progress: extract(root, lang, progress)


def mono_plan(languages: tuple[str, ...]) -> list[tuple[str, MonoExtractor]]:
    """(Debian package, extractor) pairs for the monolingual corpora, sorted by package name."""
    plan: dict[str, MonoExtractor] = {"debian-handbook": handbook_lines}
    for lang in languages:
        if lang == "en":
            plan["manpages"] = _per_lang(man_lines, "en")
            plan["fortunes"] = _per_lang(fortune_lines, "en")
            plan["fortunes-min"] = _per_lang(fortune_lines, "en")
            plan["dict-gcide"] = gcide_lines
            plan["python3.11-doc"] = partial(sphinx_lines, html_dir="usr/share/doc/python3.11/html")
        else:
            plan[f"manpages-{lang}"] = _per_lang(man_lines, lang)
            plan[f"fortunes-{lang}"] = _per_lang(fortune_lines, lang)
    # The kernel docs are English, plus translations into zh/ja/ko/it that are used for those languages.
    plan["linux-doc-6.1"] = partial(sphinx_lines, html_dir="usr/share/doc/linux-doc-6.1/html",
                                    translations="translations")
    return sorted(plan.items())


PARALLEL_PLAN: tuple[tuple[str, str], ...] = (  # (package, accelerator markers of its toolkit)
    ("cinnamon-l10n", "_"),
    ("gcc-12-locales", ""),
)


class _Fetcher:
    """Fetches each package once; a missing package is noted (printed and kept) instead of failing."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir
        self.packages: dict[str, Package] = {}
        self.skipped: dict[str, str] = {}

    def get(self, name: str) -> Package | None:
        if name not in self.packages and name not in self.skipped:
            try:
                self.packages[name] = fetch_deb(name, self.cache_dir)
            except FetchError as error:
                self.skipped[name] = str(error)
                tqdm.write(f"note: skipping Debian package {name}: {error}", file=sys.stderr)
        return self.packages.get(name)


def _build_mono(tmp: Path, fetcher: _Fetcher, languages: tuple[str, ...], progress: bool
                ) -> dict[str, DedupWriter]:
    writers = {lang: DedupWriter(tmp / "mono" / f"{lang}.txt.gz", lang) for lang in languages}
    try:
        plan = tqdm(mono_plan(languages), desc="mono corpora", unit="pkg", disable=not progress)
        for name, extract in plan:
            plan.set_postfix_str(name)
            package = fetcher.get(name)
            if package is not None:
                for lang, text in extract(package.root, languages, progress):
                    writers[lang].add(text, name)
    finally:
        for writer in writers.values():
            writer.close()
    return writers


def _build_parallel(tmp: Path, fetcher: _Fetcher, languages: tuple[str, ...], progress: bool
                    ) -> dict[str, DedupWriter]:
    writers = {lang: DedupWriter(tmp / "parallel" / f"en-{lang}.tsv.gz", lang, keep=_keep_pair_line,
                                 normalize=_pair_as_is)
               for lang in languages if lang != "en"}
    try:
        plan = tqdm(PARALLEL_PLAN, desc="parallel corpora", unit="pkg", disable=not progress)
        for name, markers in plan:
            plan.set_postfix_str(name)
            package = fetcher.get(name)
            if package is not None:
                for lang, (english, foreign) in gettext_pairs(package.root, languages, progress, markers):
                    writers[lang].add(f"{english}\t{foreign}", name)
    finally:
        for writer in writers.values():
            writer.close()
    return writers


def _copyright_file(package: Package, fetcher: _Fetcher) -> Path | None:
    """The package's Debian copyright file; a doc dir symlinked to another package uses that one's."""
    doc = package.root / "usr/share/doc" / package.name
    if (doc / "copyright").is_file():
        return doc / "copyright"
    if doc.is_symlink():
        other = fetcher.get(Path(os.readlink(doc)).name)
        if other is not None and (other.root / "usr/share/doc" / other.name / "copyright").is_file():
            return other.root / "usr/share/doc" / other.name / "copyright"
    return None


def _counts_dict(counts: Counts, lang: str) -> dict:
    out = {"lines": counts.lines, "words": counts.words, "bytes": counts.bytes}
    if is_unspaced(lang):
        out["chars"] = counts.chars
    return out


def _manifest(languages: tuple[str, ...], mono: dict[str, DedupWriter], parallel: dict[str, DedupWriter],
              fetcher: _Fetcher, tmp: Path) -> dict:
    used = sorted({s for w in [*mono.values(), *parallel.values()] for s in w.by_source})
    sources = {}
    for name in used:
        package = fetcher.packages[name]
        sources[name] = {
            "version": package.version,
            "licence": _LICENCES.get(name, "see copyright file"),
            "licence_file": f"LICENSES/{name}.copyright",
            "mono": {lang: _counts_dict(w.by_source[name], lang) for lang, w in mono.items() if name in w.by_source},
            "parallel": {f"en-{lang}": w.by_source[name].lines
                         for lang, w in parallel.items() if name in w.by_source},
        }
    warnings = [f"{lang}: no monolingual text found" for lang, w in mono.items() if w.total.lines == 0]
    warnings += [f"en-{lang}: no parallel pairs found" for lang, w in parallel.items() if w.total.lines == 0]
    return {
        "format": 1,
        "languages": list(languages),
        "word_count": "whitespace tokens; zh and ja: non-space characters / 2",
        "mono": {lang: {"file": f"mono/{lang}.txt.gz", **_counts_dict(w.total, lang),
                        "gz_bytes": (tmp / "mono" / f"{lang}.txt.gz").stat().st_size}
                 for lang, w in mono.items()},
        "parallel": {f"en-{lang}": {"file": f"parallel/en-{lang}.tsv.gz", "pairs": w.total.lines}
                     for lang, w in parallel.items()},
        "sources": sources,
        "skipped_packages": dict(sorted(fetcher.skipped.items())),
        "excluded": {
            "libreoffice-help-*": "the demo bundle's test splits are LibreOffice help pages",
            "libreoffice-l10n-*": "its tooltips and long UI strings occur verbatim in the help pages",
        },
        "warnings": warnings,
    }


def _write_licences(tmp: Path, manifest: dict, fetcher: _Fetcher) -> None:
    (tmp / "LICENSES").mkdir()
    rows = []
    for name, info in manifest["sources"].items():
        copyright_file = _copyright_file(fetcher.packages[name], fetcher)
        if copyright_file is not None:
            shutil.copyfile(copyright_file, tmp / info["licence_file"])
        else:
            info["licence_file"] = None
        used = sorted(info["mono"]) + sorted(info["parallel"])
        rows.append(f"| `{name}` | {info['version']} | {info['licence']} | {', '.join(used)} | "
                    f"{info['licence_file'] or 'not found'} |")
    text = [
        "# Large corpora: sources and licences",
        "",
        "Built by `python -m tools.large_corpora` (`make large-corpora`) from Debian (bookworm) packages. Each line",
        "of `mono/` and each pair of `parallel/` is text taken from these packages (re-flowed, deduplicated).",
        "The authoritative licence terms are the packages' Debian copyright files, copied into `LICENSES/`.",
        "",
        "| package | version | licence | used for | copyright file |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]
    (tmp / "ATTRIBUTION.md").write_text("\n".join(text), encoding="utf-8")


def _replace_dir(new: Path, target: Path) -> None:
    """Move `new` to `target`, replacing an older build only once the new one is complete."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        target.rename(old)
    new.rename(target)
    if old is not None:
        shutil.rmtree(old)


def build_large_corpora(out_dir: Path, cache_dir: Path, *, languages: Iterable[str] = DEFAULT_LANGUAGES,
                        progress: bool = True) -> dict:
    """Fetch the Debian packages into `cache_dir`, build the corpora into `out_dir`, return the manifest.

    `out_dir` is replaced only when the build succeeded (it is built in a temp dir beside it).
    Packages that do not exist are skipped with a printed note and listed in the manifest.
    """
    languages = tuple(dict.fromkeys(check_language(lang, "large corpora") for lang in languages))
    out_dir, cache_dir = Path(out_dir).resolve(), Path(cache_dir).resolve()
    ensure_groff()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    tmp.chmod(0o755)  # mkdtemp's 0700 would make the finished corpora private to this user
    try:
        fetcher = _Fetcher(cache_dir)
        mono = _build_mono(tmp, fetcher, languages, progress)
        parallel = _build_parallel(tmp, fetcher, languages, progress)
        manifest = _manifest(languages, mono, parallel, fetcher, tmp)
        _write_licences(tmp, manifest, fetcher)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                           encoding="utf-8")
        _replace_dir(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest
