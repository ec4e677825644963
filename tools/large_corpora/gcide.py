"""The GNU Collaborative International Dictionary of English (`dict-gcide`, dictd): definition paragraphs."""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from tools.large_corpora.debian import progress_bar
from tools.large_corpora.text import join_blocks

_GCIDE_TAG_RE = re.compile(r"\[(?:[^\]]*(?:Webster|PJC|WordNet|Dict\.|Suppl\.|Chambers|Century)[^\]]*)\]")
_GCIDE_PRON_RE = re.compile(r"\\[^\\\n]{1,80}\\,?")


def gcide_paragraphs(lines: Iterable[str]) -> Iterator[str]:
    """Definition paragraphs of the GCIDE dictd text: source tags, pronunciations and `{}` dropped."""
    for paragraph in join_blocks(lines):
        if paragraph.startswith("00-database"):
            continue
        paragraph = _GCIDE_PRON_RE.sub("", _GCIDE_TAG_RE.sub("", paragraph))
        yield paragraph.replace("{", "").replace("}", "")


def gcide_lines(root: Path, languages: tuple[str, ...], progress: bool) -> Iterator[tuple[str, str]]:
    dz = root / "usr/share/dictd/gcide.dict.dz"
    if "en" not in languages or not dz.is_file():
        return
    # A dictzip file is a valid gzip stream, so it is read line by line without an index.
    with gzip.open(dz, "rt", encoding="utf-8", errors="replace") as lines:
        for paragraph in gcide_paragraphs(progress_bar(lines, "dict-gcide", progress, unit="line")):
            yield "en", paragraph

