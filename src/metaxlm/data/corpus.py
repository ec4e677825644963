"""Corpus access: turns a CorpusSpec / ParallelSpec from the config into streams of text.

Sources: text/JSONL files (also .gz/.xz), directories of such files, HF `datasets` saved with
`save_to_disk` (Arrow), and the HF hub (`hub:NAME[:CONFIG][@REVISION]`, data.hub's reference, streamed; needs
network, which users have).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from metaxlm.config import CorpusSpec, ParallelSpec
from metaxlm.data import readers
from metaxlm.data.hub import parse_hub
from metaxlm.errors import DataError, SkipReport
from metaxlm.roots import missing_data_hint


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        if not files:
            raise DataError(path, None, "directory holds no files")
        return files
    if not path.exists():
        raise DataError(path, None, "no such file" + missing_data_hint(path))
    return [path]


def _spec_files(spec: CorpusSpec) -> list[Path]:
    """The files of a corpus; with several paths, an empty file is skipped with a note (it holds no data)."""
    if isinstance(spec.path, str):
        return _files(Path(spec.path))
    files = [f for p in spec.path for f in _files(Path(p))]
    kept = [f for f in files if readers.count_lines(f, nonblank=True)]
    for f in sorted(set(files) - set(kept)):
        print(f"note: {f} is empty; the corpus continues with its other files")
    if not kept:
        raise DataError(", ".join(spec.path), None, "every file of this corpus is empty")
    return kept


def _is_arrow_dir(path: Path) -> bool:
    return path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists())


def _fmt(spec: CorpusSpec) -> str:
    if spec.format != "auto":
        if not isinstance(spec.path, str) and spec.format in ("arrow", "hub"):
            raise DataError(", ".join(spec.path), None, f"format {spec.format} takes one path, not a list")
        return spec.format
    if not isinstance(spec.path, str):
        return "auto"
    if spec.path.startswith("hub:"):
        return "hub"
    if _is_arrow_dir(Path(spec.path)):
        return "arrow"
    return "auto"


def _arrow_split(spec: CorpusSpec):
    import datasets

    ds = datasets.load_from_disk(spec.path)
    if isinstance(ds, datasets.DatasetDict):
        if spec.split not in ds:
            raise DataError(spec.path, None, f"no split {spec.split!r} (has: {', '.join(ds)})")
        ds = ds[spec.split]
    if spec.text_field not in ds.column_names:
        raise DataError(spec.path, None, f"no column {spec.text_field!r} (has: {', '.join(ds.column_names)})")
    return ds


def iter_texts(spec: CorpusSpec, *, skip_bad: bool = False, report: SkipReport | None = None) -> Iterator[str]:
    fmt = _fmt(spec)
    if fmt == "arrow":
        ds = _arrow_split(spec)
        for batch in ds.iter(batch_size=1000):
            yield from (t for t in batch[spec.text_field] if t and t.strip())
    elif fmt == "hub":
        import datasets

        ref = parse_hub(spec.path)
        ds = datasets.load_dataset(ref.name, ref.config, split=spec.split, revision=ref.revision, streaming=True)
        yield from (row[spec.text_field] for row in ds if row[spec.text_field].strip())
    else:
        for f in _spec_files(spec):
            yield from readers.read_corpus(f, fmt=fmt, text_field=spec.text_field, unit=spec.unit,
                                           skip_bad=skip_bad, report=report)


def count_texts(spec: CorpusSpec) -> int:
    """Number of examples N_i used for α-sampling (lines, documents or rows)."""
    fmt = _fmt(spec)
    if fmt == "arrow":
        return _arrow_split(spec).num_rows
    if fmt in ("auto", "text") and spec.unit == "line":
        # Fast path: non-blank line count without decoding (readers validate when the text is used).
        return sum(readers.count_lines(f, nonblank=True) for f in _spec_files(spec))
    return sum(1 for _ in iter_texts(spec, skip_bad=True, report=SkipReport()))


def iter_pairs(spec: ParallelSpec, *, skip_bad: bool = False,
               report: SkipReport | None = None) -> Iterator[tuple[str, str]]:
    if spec.path is not None:
        return readers.read_parallel(spec.path, skip_bad=skip_bad, report=report)
    return readers.read_parallel(spec.src, spec.tgt, skip_bad=skip_bad, report=report)


def count_pairs(spec: ParallelSpec) -> int:
    return readers.count_lines(spec.path if spec.path is not None else spec.src, nonblank=True)
