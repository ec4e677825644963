"""Gold word alignment test set: Koine Greek (SBLGNT) <-> English (BSB), manual links from PyPI
`bible-alignments` (Scripture Burrito JSON whose records link source token ids to target token ids).

Token ids are BBCCCVVVWWW (book, chapter, verse, word); Greek ids carry an "n" prefix. A verse is kept
only if every link of it stays inside the verse on both sides and BSB did not merge it with a
neighbour (BSB sometimes renders two Greek verses as one English one).
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from tools.demo_bundle.libreoffice import stable_key


@dataclass
class Verse:
    vid: str  # BBCCCVVV
    src: list[str]  # Greek words
    tgt: list[str]  # English words
    links: list[tuple[int, int]]  # 0-based (src index, tgt index), sorted


def _read_tsv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def load_verses(root: Path) -> list[Verse]:
    """All cleanly aligned NT verses, ordered by verse id.

    English tokens BSB marks `exclude` (punctuation the annotators never align) are left out, so
    the English line is words only; Greek SBLGNT tokens are words already.
    """
    data = root / "data"
    src_tok: dict[str, tuple[str, int]] = {}  # token id -> (verse, position)
    src_words: dict[str, list[str]] = defaultdict(list)
    for row in _read_tsv(data / "sources/SBLGNT.tsv"):
        tid = row["id"].removeprefix("n")
        vid = tid[:8]
        src_tok[row["id"]] = (vid, len(src_words[vid]))
        src_words[vid].append(row["text"])

    tgt_tok: dict[str, tuple[str, int]] = {}
    tgt_words: dict[str, list[str]] = defaultdict(list)
    merged: set[str] = set()  # verses BSB joined with another verse
    excluded: set[str] = set()  # punctuation tokens: dropped from the text and from link groups
    for row in _read_tsv(data / "eng/targets/BSB/nt_BSB.tsv"):
        vid = row["id"][:8]
        if row["source_verse"] != vid or row.get("source_verse_range_end") or row.get("id_range_end"):
            merged.update({vid, row["source_verse"]})
        if row.get("exclude") == "y":
            excluded.add(row["id"])
            continue
        tgt_tok[row["id"]] = (vid, len(tgt_words[vid]))
        tgt_words[vid].append(row["text"])

    links: dict[str, set[tuple[int, int]]] = defaultdict(set)
    broken: set[str] = set()  # verses with a link to a token outside the verse (or to no known token)
    records = json.loads((data / "eng/alignments/BSB/SBLGNT-BSB-manual.json").read_text(encoding="utf-8"))
    for rec in records["records"]:
        srcs = [src_tok.get(s) for s in rec["source"]]
        tgts = [tgt_tok.get(t) for t in rec["target"] if t not in excluded]
        vids = {x[0] for x in srcs + tgts if x is not None}
        if None in srcs or None in tgts or len(vids) != 1:
            broken.update(vids)
            continue
        vid = vids.pop()
        # A record aligns a group of Greek words to a group of English words: every pair is a sure link.
        links[vid].update((s[1], t[1]) for s in srcs for t in tgts)

    verses = []
    for vid in sorted(links):
        if vid in broken or vid in merged or not src_words.get(vid) or not tgt_words.get(vid):
            continue
        verses.append(Verse(vid, src_words[vid], tgt_words[vid], sorted(links[vid])))
    return verses


def choose(verses: list[Verse], n: int) -> list[Verse]:
    """n verses chosen by sha256 of the verse id, returned in canonical (book/chapter/verse) order."""
    picked = sorted(verses, key=lambda v: stable_key(v.vid))[:n]
    return sorted(picked, key=lambda v: v.vid)


def pharaoh(links: list[tuple[int, int]]) -> str:
    return " ".join(f"{i}-{j}" for i, j in links)
