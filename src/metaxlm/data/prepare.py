"""`metaxlm data prepare`: tokenize corpora into sharded Arrow datasets, one per language / pair.

Streaming throughout: workers read the corpus line by line and `datasets` writes Arrow in
`writer_batch_size` chunks, so a corpus larger than RAM passes through in bounded memory. With
`num_proc` workers, worker w tokenizes texts i with i % num_proc == w (tokenization is the costly part;
reading is cheap), and the shards are concatenated in worker order, so the output is deterministic.

Output layout (`out_dir`): mono/<lang>/ and parallel/<src>-<tgt>/ (HF `save_to_disk` dirs), meta.json.
Texts are stored without special tokens; packing into training sequences happens at training time.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from tqdm import tqdm

from metaxlm.config import CorpusSpec, ParallelSpec, PrepareConfig
from metaxlm.data.corpus import iter_pairs, iter_texts
from metaxlm.errors import DataError, SkipReport
from metaxlm.io import atomic_dir, atomic_write_json


def _batched(items, size):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _save_report(report: SkipReport, path: str | None) -> None:
    if path:
        Path(path).write_text(json.dumps({"skipped": report.skipped, "examples": report.examples}))


def _encoder(tokenizer_dir: str):
    """A batch encoder without special tokens. Workers use the `tokenizers` backend directly from
    tokenizer.json: importing transformers would cost seconds per worker process."""
    path = Path(tokenizer_dir) / "tokenizer.json"
    if path.exists():
        from tokenizers import Tokenizer

        backend = Tokenizer.from_file(str(path))
        return lambda texts: [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]
    from metaxlm.vocab import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    return lambda texts: tok(texts, add_special_tokens=False)["input_ids"]


def _keep_data_errors(gen):
    """Worker exceptions reach the parent wrapped by `datasets` (and, across processes, without their
    cause); park a DataError in a file so the parent can re-raise the user-facing message."""

    def wrapped(*args, **kwargs):
        try:
            yield from gen(*args, **kwargs)
        except DataError as err:
            error_file = Path(kwargs["report_path"][0] + f".error-{kwargs['worker'][0]}")
            error_file.write_text(json.dumps([err.path, err.line, err.message]))
            raise

    return wrapped


@_keep_data_errors
def _gen_mono(spec, worker, num_workers, tokenizer_dir, batch_size, skip_bad, report_path):
    # datasets hands each process a sub-list of every gen_kwargs list: one worker id per process here.
    (w,), spec = worker, CorpusSpec.model_validate_json(spec[0])
    encode, n, skip_bad, batch_size = _encoder(tokenizer_dir[0]), num_workers[0], skip_bad[0], batch_size[0]
    report = SkipReport()
    mine = (t for i, t in enumerate(iter_texts(spec, skip_bad=skip_bad, report=report)) if i % n == w)
    for batch in _batched(mine, batch_size):
        for ids in encode(batch):
            yield {"input_ids": ids, "length": len(ids)}
    _save_report(report, report_path[0] if w == 0 else None)


@_keep_data_errors
def _gen_parallel(spec, worker, num_workers, tokenizer_dir, batch_size, skip_bad, report_path):
    (w,), spec = worker, ParallelSpec.model_validate_json(spec[0])
    encode, n, skip_bad, batch_size = _encoder(tokenizer_dir[0]), num_workers[0], skip_bad[0], batch_size[0]
    report = SkipReport()
    mine = (p for i, p in enumerate(iter_pairs(spec, skip_bad=skip_bad, report=report)) if i % n == w)
    for batch in _batched(mine, batch_size):
        src = encode([s for s, _ in batch])
        tgt = encode([t for _, t in batch])
        for s, t in zip(src, tgt, strict=True):
            yield {"src_ids": s, "tgt_ids": t, "length": len(s) + len(t)}
    _save_report(report, report_path[0] if w == 0 else None)


def _features(kind: str):
    from datasets import Features, List, Value

    ids = List(Value("int32"))
    if kind == "mono":
        return Features({"input_ids": ids, "length": Value("int32")})
    return Features({"src_ids": ids, "tgt_ids": ids, "length": Value("int32")})


def _build_one(kind, spec, tokenizer_dir, dest, cfg: PrepareConfig, skip_bad, work: Path) -> dict:
    import datasets

    n = cfg.num_proc
    report_path = str(work / f"skips-{dest.name}.json")
    gen = _gen_mono if kind == "mono" else _gen_parallel
    kwargs = {
        "spec": [spec.model_dump_json()] * n, "worker": list(range(n)), "num_workers": [n] * n,
        "tokenizer_dir": [str(tokenizer_dir)] * n, "batch_size": [cfg.batch_size] * n,
        "skip_bad": [skip_bad] * n, "report_path": [report_path] * n,
    }
    try:
        ds = datasets.Dataset.from_generator(
            gen, features=_features(kind), gen_kwargs=kwargs, num_proc=n if n > 1 else None,
            cache_dir=str(work / "cache"), writer_batch_size=cfg.writer_batch_size, keep_in_memory=False,
        )
    except Exception:
        for error_file in sorted(work.glob(f"skips-{dest.name}.json.error-*")):
            raise DataError(*json.loads(error_file.read_text())) from None
        raise
    ds.save_to_disk(str(dest), max_shard_size=cfg.max_shard_size)
    skipped = json.loads(Path(report_path).read_text()) if Path(report_path).exists() else {"skipped": 0}
    lengths = ds.with_format("numpy")["length"] if len(ds) else []
    return {"examples": len(ds), "tokens": int(sum(lengths)), "skipped_bad_lines": skipped["skipped"],
            "skip_examples": skipped.get("examples", []),
            "shards": len(list(dest.glob("data-*.arrow")))}


def prepare_corpora(mono: dict[str, CorpusSpec], parallel: dict[str, ParallelSpec], tokenizer_dir: str | Path,
                    out_dir: str | Path, cfg: PrepareConfig, *, skip_bad: bool = False,
                    progress: bool = True) -> dict:
    """Tokenize every corpus; returns (and writes to meta.json) per-language examples/tokens/shards."""
    import datasets

    datasets.disable_progress_bars()  # one bar per corpus below is enough
    meta: dict = {"tokenizer": str(tokenizer_dir), "mono": {}, "parallel": {}}
    jobs = [("mono", k, s) for k, s in sorted(mono.items())] + [("parallel", k, s) for k, s in sorted(parallel.items())]
    with atomic_dir(out_dir) as tmp, tempfile.TemporaryDirectory(dir=Path(out_dir).parent) as work:
        for kind, key, spec in tqdm(jobs, desc="prepare", unit="corpus", disable=not progress):
            dest = Path(tmp) / kind / key
            meta[kind][key] = _build_one(kind, spec, tokenizer_dir, dest, cfg, skip_bad, Path(work))
            shutil.rmtree(Path(work) / "cache", ignore_errors=True)  # bounded disk, too
        atomic_write_json(Path(tmp) / "meta.json", meta)
    return meta
