"""Errors that users see. Each names the file (and line) it is about, never a deep traceback."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


class MetaXLMError(Exception):
    """Base class: the CLI prints these as one clear message and exits with status 2."""


class ConfigError(MetaXLMError):
    """A configuration key is unknown, missing or of the wrong type (the message names the key)."""


class DataError(MetaXLMError):
    """Bad input data. `path` and `line` (1-based) say where; `line` is None for whole-file problems."""

    def __init__(self, path: str | Path, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")

    def __reduce__(self):
        # Worker processes (datasets' num_proc) pickle exceptions back to the parent.
        return (type(self), (self.path, self.line, self.message))


class DiskFull(MetaXLMError):
    """A write failed because its filesystem is full (ENOSPC, or a quota: EDQUOT). The message says what was being
    written, how much space is free, what was kept intact and what to do; the partial files are already removed.

    `target`: what the user knows by name (a checkpoint, prepared/, results.json); `part`: the file inside it that
    failed, when known; `free_at_failure` / `free_after`: bytes free on `mount` when the write failed (the evidence
    when the error itself did not say) and after the partial files were removed; `kept`: what is intact (e.g. the
    last good checkpoint); `rerun`: how to continue once space is freed."""

    def __init__(self, target: str | Path, *, what: str = "", part: str | None = None, mount: str = "",
                 free_at_failure: int = 0, free_after: int = 0, kept: str = "", rerun: str = ""):
        self.target, self.what, self.part, self.mount = str(target), what, part, mount
        self.free_at_failure, self.free_after = free_at_failure, free_after
        self.kept = kept or "Nothing half-written was kept."
        self.rerun = rerun or "then run the same command again"
        writing = f"{what} {self.target}" if what else self.target
        if part:
            writing += f" ({part})"
        # the space free now, with the partial files removed: what the failed write was short of (at the moment of
        # failure it is ~0, or already back to this when the library removed its own partial file)
        super().__init__(f"disk full while writing {writing}: no space left on device ({_mb(free_after)} free on "
                         f"{mount} with the partial files removed). {self.kept} Free space on {mount}, {self.rerun}.")

    def fields(self) -> dict:
        return {"what": self.what, "part": self.part, "mount": self.mount, "free_at_failure": self.free_at_failure,
                "free_after": self.free_after, "kept": self.kept, "rerun": self.rerun}

    def __reduce__(self):
        # prepare's worker processes pickle exceptions back to the parent
        return (_rebuild_disk_full, (self.target, self.fields()))


def _rebuild_disk_full(target: str, fields: dict) -> DiskFull:
    return DiskFull(target, **fields)


def _mb(n: int) -> str:
    return f"{n / 1e6:,.2f} MB" if n < 10**7 else f"{n / 1e6:,.0f} MB"  # 0.05 MB, not "0.0 MB", on a small disk


@dataclass
class SkipReport:
    """Counts the per-line errors that `--skip-bad` turned into skips, so nothing is lost silently."""

    skipped: int = 0
    examples: list[str] = field(default_factory=list)
    max_examples: int = 5

    def add(self, error: DataError) -> None:
        self.skipped += 1
        if len(self.examples) < self.max_examples:
            self.examples.append(str(error))

    def merge(self, other: SkipReport) -> None:
        self.skipped += other.skipped
        self.examples.extend(other.examples[: max(0, self.max_examples - len(self.examples))])

    def summary(self) -> str:
        if not self.skipped:
            return "skipped 0 bad lines"
        more = "" if self.skipped <= len(self.examples) else f" (+{self.skipped - len(self.examples)} more)"
        return f"skipped {self.skipped} bad lines, e.g.:\n  " + "\n  ".join(self.examples) + more
