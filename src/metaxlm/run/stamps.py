"""Stage stamps: a finished vocab or prepare stage records what it was made from, so rerunning a run (after an
interruption, or to add a variant or a task) reuses it instead of redoing minutes of work, and redoes it when
anything it was made from changed: its config sections, the seed, or an input file's size or modification time.

A stamp is written (atomically) only after its stage finished and removed before the stage starts again, so an
interrupted stage never leaves a stamp that vouches for half-written output.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from metaxlm.io import atomic_write_json


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
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


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


def record(stamp: Path, digest: str, info: dict) -> None:
    stamp.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(stamp, {"fingerprint": digest, "info": info})

