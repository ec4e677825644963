"""Gettext catalogues (.mo) of translated programs: (english, foreign) UI/diagnostic string pairs."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from metaxlm.errors import DataError
from tools.large_corpora.debian import pick_locale
from tools.large_corpora.text import MIN_SCRIPT_SHARE, normalize_line, script_share


@dataclass(frozen=True)
class MoEntry:
    context: str | None
    msgid: str
    msgid_plural: str | None
    msgstrs: tuple[str, ...]


def read_mo(path: Path) -> list[MoEntry]:
    """Parse a GNU .mo file (either byte order); strings are decoded with the header's charset."""
    data = path.read_bytes()
    if len(data) < 20:
        raise DataError(path, None, "not a gettext .mo file (too short)")
    magic = struct.unpack_from("<I", data)[0]
    order = {0x950412DE: "<", 0xDE120495: ">"}.get(magic)
    if order is None:
        raise DataError(path, None, f"not a gettext .mo file (magic {magic:#x})")
    _revision, count, ids_at, strs_at = struct.unpack_from(order + "4I", data, 4)
    raw = []
    for i in range(count):
        id_len, id_at = struct.unpack_from(order + "2I", data, ids_at + 8 * i)
        str_len, str_at = struct.unpack_from(order + "2I", data, strs_at + 8 * i)
        raw.append((data[id_at:id_at + id_len], data[str_at:str_at + str_len]))
    charset = "utf-8"
    for msgid, msgstr in raw:
        if msgid == b"":
            found = re.search(rb"charset=([\w.-]+)", msgstr)
            if found and found.group(1).lower() != b"charset":
                charset = found.group(1).decode("ascii")
    entries = []
    for msgid, msgstr in raw:
        context, _, msgid = msgid.rpartition(b"\x04")
        singular, _, plural = msgid.partition(b"\x00")
        entries.append(MoEntry(
            context.decode(charset, errors="replace") if context else None,
            singular.decode(charset, errors="replace"),
            plural.decode(charset, errors="replace") if b"\x00" in msgid else None,
            tuple(s.decode(charset, errors="replace") for s in msgstr.split(b"\x00"))))
    return entries


_ENTITY_RE = re.compile(r"&[A-Za-z]+;|&#\d+;")
_PLACEHOLDER_RE = re.compile(r"%(?:\d+\$)?[-+ #0']*\d*(?:\.\d+)?[hlLqjzt]*[A-Za-z%]|%[<>]|\{[^{}\s]*\}")


def strip_accelerators(text: str, markers: str) -> str:
    """Remove keyboard-accelerator markers: `(_F)` suffixes and one lone marker before a letter or digit.

    Only a marker that occurs exactly once is removed, so `file_name`-like strings with several
    underscores, `&&`, and HTML entities are left alone.
    """
    for marker in markers:
        text = re.sub(r"\s*\(" + re.escape(marker) + r"[A-Za-z0-9]\)", "", text)
        # `&amp;`-style entities are not accelerators: neither counted nor removed.
        lone = re.escape(marker) + (r"(?![A-Za-z]+;|#\d+;)" if marker == "&" else "") + r"(?=\w)"
        probe = _ENTITY_RE.sub("", text) if marker == "&" else text
        if probe.count(marker) == 1 and re.search(lone, text):
            text = re.sub(lone, "", text, count=1)
    return text


def clean_pair(english: str, foreign: str, lang: str, markers: str = "") -> tuple[str, str] | None:
    """A usable (english, foreign) pair, or None when empty, untranslated, or not text at all."""
    english = normalize_line(strip_accelerators(english, markers))
    foreign = normalize_line(strip_accelerators(foreign, markers))
    if not english or not foreign or english.casefold() == foreign.casefold():
        return None
    if english in ("translator-credits", "translator_credits", "translators"):
        return None
    if not any(ch.isalpha() for ch in _PLACEHOLDER_RE.sub("", english)):
        return None
    share = script_share(foreign, lang)
    if share is not None and share < MIN_SCRIPT_SHARE:
        return None
    return english, foreign


def mo_pairs(path: Path, lang: str, markers: str = "") -> Iterator[tuple[str, str]]:
    """(english, foreign) pairs of one catalogue; header, plural and untranslated entries dropped."""
    for entry in sorted(read_mo(path), key=lambda e: (e.msgid, e.context or "")):
        if not entry.msgid or entry.msgid_plural is not None or len(entry.msgstrs) != 1:
            continue
        pair = clean_pair(entry.msgid, entry.msgstrs[0], lang, markers)
        if pair:
            yield pair


def gettext_pairs(root: Path, languages: tuple[str, ...], progress: bool,
                  markers: str = "") -> Iterator[tuple[str, tuple[str, str]]]:
    locale_dir = root / "usr/share/locale"
    locales = sorted(d.name for d in locale_dir.iterdir() if d.is_dir()) if locale_dir.is_dir() else []
    for lang in languages:
        locale = pick_locale(locales, lang) if lang != "en" else None
        if locale is None:
            continue
        for mo in sorted((locale_dir / locale / "LC_MESSAGES").glob("*.mo")):
            for pair in mo_pairs(mo, lang, markers):
                yield lang, pair

