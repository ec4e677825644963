"""`metaxlm data prepare`: tokenize corpora into sharded Arrow datasets, one per language / pair.

Streaming throughout: a worker reads its corpus line by line and writes Arrow record batches of
`writer_batch_size` rows, so a corpus larger than RAM passes through in bounded memory. The saved datasets are
written in record batches of RECORD_BATCH_ROWS rows (`save_shards`).

Parallelism: one pool of `num_proc` processes, started once. Every corpus is split into `num_proc`
parts (part w = texts i with i % num_proc == w: tokenization is the costly part, reading is cheap),
and all parts of all corpora go through the pool. Parts are concatenated in part order, so the output
does not depend on scheduling.

Output layout (`out_dir`): mono/<lang>/ and parallel/<src>-<tgt>/ (HF `save_to_disk` dirs), meta.json.
Texts are stored without special tokens; packing into training sequences happens at training time.

The tokenizer is read from `tokenizer_dir`'s tokenizer.json with the `tokenizers` library; a directory without
one needs a `load_tokenizer` callable from the caller (the pipeline passes `metaxlm.vocab.load_tokenizer`), so
that data/ does not import vocab/ (which imports data/ to train vocabularies).
"""

from __future__ import annotations

import multiprocessing
import tempfile
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
from tqdm import tqdm

from metaxlm.config import CorpusSpec, ParallelSpec, PrepareConfig
from metaxlm.data.corpus import iter_pairs, iter_texts
from metaxlm.errors import DataError, SkipReport
from metaxlm.io import atomic_dir, atomic_write_json, disk_full_guard

IDS = pa.list_(pa.int32())
SCHEMAS = {
    "mono": pa.schema([("input_ids", IDS), ("length", pa.int32())]),
    "parallel": pa.schema([("src_ids", IDS), ("tgt_ids", IDS), ("length", pa.int32())]),
}


# Rows per Arrow record batch in the saved datasets. Whoever opens one keeps a few KiB of metadata per record
# batch (`load_from_disk`, plus the stream's column views): at datasets' default of 1,000 rows that is ~4 bytes a
# text for the whole run; at 10,000, ~0.4. Writing one batch copies at most this many rows (datasets caps it
# further by bytes, ~100 MB a batch).
RECORD_BATCH_ROWS = 10_000

TokenizerLoader = Callable[[str], Any]  # tokenizer dir -> an HF tokenizer; module-level (workers unpickle it)


def _check_tokenizer(tokenizer_dir: str | Path, load_tokenizer: TokenizerLoader | None) -> None:
    if load_tokenizer is None and not (Path(tokenizer_dir) / "tokenizer.json").exists():
        raise DataError(tokenizer_dir, None, "no tokenizer.json here: pass load_tokenizer (e.g. "
                        "metaxlm.vocab.load_tokenizer) to read another kind of tokenizer directory")


def _encoder(tokenizer_dir: str, load_tokenizer: TokenizerLoader | None):
    """A batch encoder without special tokens. Workers use the `tokenizers` backend directly from
    tokenizer.json: importing transformers would cost seconds per worker process."""
    path = Path(tokenizer_dir) / "tokenizer.json"
    if path.exists():
        from tokenizers import Tokenizer

        backend = Tokenizer.from_file(str(path))
        return lambda texts: [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]
    _check_tokenizer(tokenizer_dir, load_tokenizer)
    tok = load_tokenizer(tokenizer_dir)
    return lambda texts: tok(texts, add_special_tokens=False)["input_ids"]


def column_sum(ds, column: str, batch_size: int = 100_000) -> int:
    """Sum of an integer column, read in Arrow record batches of `batch_size` rows: memory bounded by one batch
    whatever the dataset's size, and no per-row formatting (`sum(ds[column])` formats every row through
    `datasets`, ~0.3 ms a row: longer than tokenizing the corpus)."""
    import pyarrow.compute as pc

    total = 0
    for batch in ds.with_format("arrow").iter(batch_size=batch_size):
        total += pc.sum(batch[column]).as_py() or 0  # None for an empty batch
    return int(total)


def save_shards(ds, dest: str | Path, max_shard_size=None, rows_per_batch: int = RECORD_BATCH_ROWS) -> None:
    """`ds.save_to_disk(dest, max_shard_size=...)` with record batches of `rows_per_batch` rows: the same rows in
    the same order, fewer record batches. `save_to_disk` takes no batch size: it reads datasets'
    `config.DEFAULT_MAX_BATCH_SIZE` (1,000), which is set for the call and restored."""
    from datasets import config

    saved = config.DEFAULT_MAX_BATCH_SIZE
    config.DEFAULT_MAX_BATCH_SIZE = rows_per_batch
    try:
        ds.save_to_disk(str(dest), max_shard_size=max_shard_size)
    finally:
        config.DEFAULT_MAX_BATCH_SIZE = saved


def _batched(items, size):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _record_batches(kind: str, spec, part: int, parts: int, encode, prepare_cfg: PrepareConfig, skip_bad: bool,
                    report: SkipReport):
    if kind == "mono":
        texts = iter_texts(spec, skip_bad=skip_bad, report=report)
        for batch in _batched((t for i, t in enumerate(texts) if i % parts == part), prepare_cfg.writer_batch_size):
            ids = encode(batch)
            yield {"input_ids": ids, "length": [len(x) for x in ids]}
    else:
        pairs = iter_pairs(spec, skip_bad=skip_bad, report=report)
        for batch in _batched((p for i, p in enumerate(pairs) if i % parts == part), prepare_cfg.writer_batch_size):
            src, tgt = encode([s for s, _ in batch]), encode([t for _, t in batch])
            yield {"src_ids": src, "tgt_ids": tgt, "length": [len(s) + len(t) for s, t in zip(src, tgt, strict=True)]}


def _tokenize_part(kind: str, spec_json: str, part: int, parts: int, tokenizer_dir: str,
                   load_tokenizer: TokenizerLoader | None, prepare_cfg: PrepareConfig, skip_bad: bool,
                   dest: str) -> dict:
    """Runs in a pool worker: one part of one corpus -> one Arrow stream file. Returns counts."""
    spec = (CorpusSpec if kind == "mono" else ParallelSpec).model_validate_json(spec_json)
    encode, report = _encoder(tokenizer_dir, load_tokenizer), SkipReport()
    rows = tokens = 0
    # a full disk is recognized here, before the partial file is removed (the parent only sees the pickled error)
    with disk_full_guard(dest, cleanup=lambda: Path(dest).unlink(missing_ok=True)), \
            pa.OSFile(dest, "wb") as sink, pa.ipc.new_stream(sink, SCHEMAS[kind]) as writer:
        for columns in _record_batches(kind, spec, part, parts, encode, prepare_cfg, skip_bad, report):
            writer.write_batch(pa.RecordBatch.from_pydict(columns, schema=SCHEMAS[kind]))
            rows += len(columns["length"])
            tokens += sum(columns["length"])
    return {"rows": rows, "tokens": tokens, "skipped": report.skipped, "examples": report.examples}


def prepare_corpora(mono: dict[str, CorpusSpec], parallel: dict[str, ParallelSpec], tokenizer_dir: str | Path,
                    out_dir: str | Path, prepare_cfg: PrepareConfig, *, skip_bad: bool = False, progress: bool = True,
                    load_tokenizer: TokenizerLoader | None = None) -> dict:
    """Tokenize every corpus; returns (and writes to meta.json) per-language examples/tokens/shards.
    `load_tokenizer` reads `tokenizer_dir` when it has no tokenizer.json (see the module docstring)."""
    import datasets

    _check_tokenizer(tokenizer_dir, load_tokenizer)
    datasets.disable_progress_bars()  # the bar over corpus parts below is enough
    corpora = [("mono", k, s) for k, s in sorted(mono.items())] + \
              [("parallel", k, s) for k, s in sorted(parallel.items())]
    parts = prepare_cfg.num_proc
    meta: dict = {"tokenizer": str(tokenizer_dir), "mono": {}, "parallel": {}}
    # on a full disk: which corpus was being written, and that out_dir is untouched (atomic_dir)
    kept = f"The earlier {out_dir} is intact." if Path(out_dir).exists() else f"Nothing was written to {out_dir}."

    def writing(part: str):
        return disk_full_guard(out_dir, what="Arrow data", part=part, kept=kept)

    with atomic_dir(out_dir) as tmp, tempfile.TemporaryDirectory(dir=Path(out_dir).parent) as work:
        # spawn: workers must not inherit the parent's threads (tokenizers, torch) through fork
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=prepare_cfg.num_proc, mp_context=ctx) as pool:
            futures = {
                (kind, key, p): pool.submit(_tokenize_part, kind, spec.model_dump_json(), p, parts, str(tokenizer_dir),
                                            load_tokenizer, prepare_cfg, skip_bad,
                                            str(Path(work) / f"{kind}-{key}-{p}.arrow"))
                for kind, key, spec in corpora for p in range(parts)
            }
            results = {}
            bar = tqdm(total=len(futures), desc="prepare", unit="part", disable=not progress)
            try:
                for job, fut in futures.items():  # in submission order: the first error raised is the first corpus's
                    with writing(f"{job[0]}/{job[1]}"):
                        results[job] = fut.result()
                    bar.update()
            except BaseException:
                for fut in futures.values():
                    fut.cancel()
                raise
            finally:
                bar.close()
        for kind, key, _ in corpora:
            files = [str(Path(work) / f"{kind}-{key}-{p}.arrow") for p in range(parts)]
            ds = datasets.concatenate_datasets([datasets.Dataset.from_file(f) for f in files])
            heldout = prepare_cfg.heldout_texts if kind == "mono" and len(ds) > 2 * prepare_cfg.heldout_texts else 0
            if heldout:  # the last texts (corpora are usually shuffled already) are never trained on
                with writing(f"heldout/{key}"):
                    save_shards(ds.select(range(len(ds) - heldout, len(ds))), Path(tmp) / "heldout" / key)
                ds = ds.select(range(len(ds) - heldout))
            dest = Path(tmp) / kind / key
            with writing(f"{kind}/{key}"):
                save_shards(ds, dest, prepare_cfg.max_shard_size)
            first = results[(kind, key, 0)]  # every part reads every line, so part 0 saw every bad one
            meta[kind][key] = {
                "examples": len(ds), "heldout_examples": heldout,
                "tokens": column_sum(ds, "length"),
                "skipped_bad_lines": first["skipped"], "skip_examples": first["examples"],
                "shards": len(list(dest.glob("data-*.arrow"))),
            }
            del ds
        with writing("meta.json"):
            atomic_write_json(Path(tmp) / "meta.json", meta)
    return meta
