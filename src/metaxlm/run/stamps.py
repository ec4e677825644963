"""Stored results: what a result was computed from (its fingerprint), and reusing it while that is unchanged.

The one place a fingerprint is made. Of settings, as JSON (`fingerprint`; `short_fingerprint`, its first 16 hex
digits); of input files by their signatures (`file_signature`, `input_files`: size and modification time, enough to
notice an edited input without reading it); of files by what they hold (`content_digest`, `model_fingerprint`: a
model's weights, config and tokenizer); of the code (metaxlm.run.code). Both lengths stay because stored records
compare them as strings: a stage stamp, an artifact of run_info.json and a selection candidate keep 64 digits, an
evaluation part and a fine-tuning run's resume key (metaxlm.finetune.resume_key) 16.

A result stored in a file of its own gets its "get or compute" here (`get_or_compute`: the stored result when its
recorded fingerprint, and the code's, match, else computed and stored atomically with both; the evaluation's parts).

Stage stamps: a finished vocab or prepare stage records what it was made from, so rerunning a run (after an
interruption, or to add a variant or a task) reuses it instead of redoing minutes of work, and redoes it when
anything it was made from changed: its config sections, the seed, or an input file's size or modification time.
A stamp is written (atomically) only after its stage finished and removed before the stage starts again, so an
interrupted stage never leaves a stamp that vouches for half-written output. It keeps the parts its fingerprint was
made of too (`made_of`), so a run that will make the stage again can say what changed (`differences`).

The same mechanism says what a pretraining variant was made from (metaxlm.pretrain.variant.variant_settings): its
settings, and its vocabulary, data and start model by `content_digest` — by what they hold, not by where they lie or
when they were written, so a moved run or a vocabulary made again from touched but unchanged files still matches.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from metaxlm.io import atomic_write_json, atomic_write_text
from metaxlm.records import json_text
from metaxlm.run import code as run_code


def file_signature(path: str | Path) -> list:
    """(path, size, mtime_ns) of a file, of every file under a directory, or (name, None) for what is not a local
    path (`hub:NAME`, `pypi:NAME`): enough to notice an edited, replaced or regenerated input without reading it."""
    p = Path(path)
    if p.is_file():
        st = p.stat()
        return [[str(p), st.st_size, st.st_mtime_ns]]
    if p.is_dir():
        return [sig for child in sorted(p.rglob("*")) if child.is_file() for sig in file_signature(child)]
    return [[str(path), None, None]]


def input_files(specs: dict[str, Any]) -> list:
    """The signatures of every path a dict of corpus specs (CorpusSpec / ParallelSpec) names."""
    out = []
    for key in sorted(specs):
        dumped = specs[key].model_dump()
        for field in ("path", "src", "tgt"):
            value = dumped.get(field)
            for path in (value if isinstance(value, list) else [value] if value else []):
                out.extend(file_signature(path))
    return out


def fingerprint(**parts: Any) -> str:
    """sha256 of the parts as JSON (keys sorted; what JSON cannot hold, as its str)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def short_fingerprint(**parts: Any) -> str:
    """The first 16 hex digits of `fingerprint`: what evaluation parts and fine-tuning runs are keyed by."""
    return fingerprint(**parts)[:16]


def _digest_files(digest, named: Iterable[tuple[str, Path]]) -> None:
    """Feed each (name, file) to `digest`: the name's bytes, then the file's, read in blocks."""
    for name, path in named:
        digest.update(name.encode())
        with path.open("rb") as stream:
            for block in iter(lambda s=stream: s.read(1 << 20), b""):
                digest.update(block)


_DIGESTS: dict[tuple, str] = {}  # (path, patterns, signatures) -> digest: each file read once per process


def content_digest(path: str | Path, patterns: tuple[str, ...] = ("*",), skip: tuple[str, ...] = ()) -> str | None:
    """sha256 (16 hex digits) of the names (relative to `path`) and bytes of the files under `path` matching
    `patterns` but not `skip` (or of the file `path` itself); None when nothing is there. By content, so a copied or
    moved directory, or one made again identically, has the same digest; a file is read again only when its size or
    modification time changed."""
    root = Path(path)
    if root.is_file():
        files = [root]
    else:
        found = {p for pattern in patterns for p in root.rglob(pattern)} if root.is_dir() else set()
        files = sorted(p for p in found if p.is_file() and not any(p.match(s) for s in skip))
    if not files:
        return None
    key = (str(root.resolve()), patterns, skip, tuple(tuple(sig) for f in files for sig in file_signature(f)))
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        _digest_files(digest, ((f"{f.relative_to(root) if f != root else f.name}\0", f) for f in files))
        _DIGESTS[key] = digest.hexdigest()[:16]
    return _DIGESTS[key]


MODEL_FILES = ("config.json", "*.safetensors", "*.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "*.model", "vocab.txt")


def model_fingerprint(model_dir: Path, tokenizer_dir: Path, *, weights: bool = True,
                      subfolders: tuple[str, ...] = ()) -> str:
    """sha256 (16 hex digits) of the model's weights and config and of its tokenizer's files: a stored result
    belongs to the model it was computed on (retraining a variant, or pointing a name at another directory, computes
    it again). `weights` False: the config and tokenizer only (for a computation that reads only the model's
    shapes); `subfolders`: model files of these subdirectories too (a VECO run's final/veco/). Files by bare name
    (a subfolder's with its prefix), so a model directory that moved keeps its fingerprint."""
    model_patterns = MODEL_FILES if weights else ("config.json",)
    folders = [("", Path(model_dir), model_patterns), *((f"{sub}/", Path(model_dir) / sub, model_patterns)
                                                         for sub in subfolders),
               ("", Path(tokenizer_dir), TOKENIZER_FILES)]
    digest = hashlib.sha256()
    for prefix, folder, patterns in folders:
        found = sorted({p for pattern in patterns for p in folder.glob(pattern) if p.is_file()})
        _digest_files(digest, ((f"{prefix}{path.name}", path) for path in found))
    return digest.hexdigest()[:16]


def stored_result(path: Path, digest: str, code: tuple[str, ...]) -> tuple[dict | None, bool]:
    """(the record stored at `path`, None if none; whether `get_or_compute` reuses it: computed from what `digest`
    fingerprints, by the code of the modules `code` (metaxlm.run.code))."""
    if not path.exists():
        return None, False
    stored = json.loads(path.read_text())
    return stored, stored.get("fingerprint") == digest and stored.get("code") == run_code.code_fingerprint(*code)


def get_or_compute(path: Path, digest: str, compute: Callable[[], Any], *, code: tuple[str, ...], what: str,
                   writing: Callable[[Path], contextlib.AbstractContextManager]
                   = lambda path: contextlib.nullcontext()):
    """The result stored at `path` if it was computed from what `digest` fingerprints by this code (the modules
    `code` and what they import), else `compute()`, stored atomically with both fingerprints and its seconds
    (`writing(path)` around the write: a caller's disk-full message). A result of the same inputs computed by
    other code (or stored before results recorded their code) is computed again, saying so (`what`: who says it)."""
    current = run_code.code_fingerprint(*code)
    stored, reusable = stored_result(path, digest, code)
    if reusable:
        return stored["result"]
    if stored is not None and stored.get("fingerprint") == digest:
        print(f"{what}: {path.name} was computed by other code (code {stored.get('code') or 'not recorded'}, "
              f"now {current}): computing it again", flush=True)
    start = time.perf_counter()
    result = compute()
    with writing(path):
        atomic_write_text(path, json_text({"fingerprint": digest, "code": current,  # items' rows one line each
                                           "seconds": round(time.perf_counter() - start, 1), "result": result}))
    return result


NOT_SET = "(not set)"


def differences(recorded: dict, current: dict, *, then: str, names: dict[str, str] | None = None) -> list[str]:
    """`name: <recorded> <then>, <current> now` for every setting that differs, nested settings by their dotted path
    (`model.options.cross_attention_init`); `names` renames top-level keys for the message (`alpha` -> `data.alpha`).
    Compared as JSON (a tuple equals its list)."""
    recorded, current = json.loads(json.dumps(recorded, default=str)), json.loads(json.dumps(current, default=str))
    names = names or {}
    out: list[str] = []

    def walk(old: Any, new: Any, path: list[str]) -> None:
        if isinstance(old, dict) and isinstance(new, dict):
            for key in [*new, *(k for k in old if k not in new)]:  # in the order of the current settings
                walk(old.get(key, NOT_SET), new.get(key, NOT_SET), [*path, key])
        elif old != new:
            name = ".".join([names.get(path[0], path[0]), *path[1:]])
            out.append(f"{name}: {old!r} {then}, {new!r} now")

    walk(recorded, current, [])
    return out


def reusable(stamp: Path, output: Path, digest: str) -> dict | None:
    """The stage's recorded info when its output exists and was made from exactly these inputs, else None."""
    if not (stamp.is_file() and output.exists()):
        return None
    try:
        recorded = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None  # an unreadable stamp vouches for nothing: redo the stage
    return recorded.get("info") if recorded.get("fingerprint") == digest else None


def clear(stamp: Path) -> None:
    try:
        os.unlink(stamp)
    except FileNotFoundError:
        pass


def made_of(stamp: Path) -> dict | None:
    """The parts a stamp's fingerprint was made of (None: no readable stamp, or one written before stamps kept them)."""
    try:
        return json.loads(stamp.read_text()).get("made_of")
    except (OSError, ValueError, AttributeError):
        return None


def record(stamp: Path, digest: str, info: dict, parts: dict | None = None) -> None:
    stamp.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(stamp, {"fingerprint": digest, "info": info, **({"made_of": parts} if parts is not None else {})})

