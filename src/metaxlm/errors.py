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
