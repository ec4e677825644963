"""Fortune cookies (`fortunes`, `fortunes-XX`): one line per paragraph of each entry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tools.large_corpora.debian import path_desc, progress_bar
from tools.large_corpora.text import decode_text, join_blocks


def split_fortunes(text: str) -> list[str]:
    """Fortune entries are separated by lines holding only `%`; each entry's paragraphs become lines."""
    paragraphs: list[str] = []
    entry: list[str] = []
    for line in text.splitlines():
        if line.strip() == "%":
            paragraphs.extend(join_blocks(entry))
            entry = []
        else:
            entry.append(line)
    paragraphs.extend(join_blocks(entry))
    return paragraphs


def _fortune_files(root: Path) -> list[Path]:
    """Regular fortune files (no `.dat` index, no `.u8` symlinks, nothing under an `off/` directory)."""
    base = root / "usr/share/games/fortunes"
    if not base.is_dir():
        return []
    return sorted(p for p in base.rglob("*")
                  if p.is_file() and not p.is_symlink() and p.suffix != ".dat"
                  and "off" not in p.relative_to(base).parts[:-1])


def fortune_lines(root: Path, lang: str, progress: bool) -> Iterator[tuple[str, str]]:
    for path in progress_bar(_fortune_files(root), path_desc(root), progress):
        for paragraph in split_fortunes(decode_text(path.read_bytes(), lang)):
            yield lang, paragraph

