"""Man pages (`manpages`, `manpages-XX`): roff rendered by groff, one line per paragraph."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from tqdm import tqdm

from tools.fetch import FetchError
from tools.large_corpora.debian import path_desc, pick_locale
from tools.large_corpora.text import ANSI_ESCAPE_RE, decode_text

_OVERSTRIKE_RE = re.compile(r".\x08")
# -k/-K: preconv reads UTF-8; -t: tables; huge line length and no hyphenation so a paragraph is one line;
# grotty -c -b -o -u: no SGR escapes, no overstriking (clean_terminal_text still removes any that appear).
_GROFF_CMD = ("groff", "-k", "-K", "utf-8", "-t", "-Tutf8", "-mandoc", "-rLL=2000n", "-rHY=0", "-P-cbou")


def clean_terminal_text(text: str) -> str:
    """Remove ANSI escapes and backspace overstrikes (`X\\bX` bold, `_\\bX` underline) from terminal output."""
    text = ANSI_ESCAPE_RE.sub("", text)
    text = _OVERSTRIKE_RE.sub("", text)
    return text.replace("\x08", "")


def is_so_stub(source: str) -> bool:
    """A page whose first non-comment request is `.so other.1` only points at another page."""
    for line in source.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(('.\\"', "'\\\"", '\\"')):
            continue
        return stripped.startswith(".so ")
    return False


def roff_paragraphs(rendered: str) -> list[str]:
    """Paragraphs of a groff-rendered page, without its header and footer lines.

    A blank line or a change of indentation starts a new paragraph, so section headings (column 0)
    and option tags (indented less than their description) do not run into the text below them.
    """
    lines = clean_terminal_text(rendered).splitlines()
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if len(filled) >= 2:  # first and last non-blank lines are "LS(1) ... LS(1)" header and footer
        lines = lines[filled[0] + 1:filled[-1]]
    paragraphs: list[str] = []
    block: list[str] = []
    indent = -1
    for line in lines:
        this_indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or (block and this_indent != indent):
            if block:
                paragraphs.append(" ".join(block))
            block = []
        if line.strip():
            block.append(line.strip())
            indent = this_indent
    if block:
        paragraphs.append(" ".join(block))
    return paragraphs


def render_man_page(path: Path, lang: str) -> list[str]:
    """Paragraphs of one (possibly gzipped) man page; [] for `.so` stubs and pages groff cannot render."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    source = decode_text(raw, lang)
    if is_so_stub(source):
        return []
    try:
        proc = subprocess.run(_GROFF_CMD, input=source.encode("utf-8"), capture_output=True, timeout=120,
                              check=False, env={**os.environ, "LC_ALL": "C.UTF-8"})
    except subprocess.TimeoutExpired:
        return []
    if proc.returncode != 0 and not proc.stdout:
        return []
    return roff_paragraphs(proc.stdout.decode("utf-8", errors="replace"))


def _man_files(root: Path, lang: str) -> list[Path]:
    """Man page files of `lang` in an unpacked package (English pages sit directly in man/manN)."""
    man = root / "usr/share/man"
    if not man.is_dir():
        return []
    if lang == "en":
        sections = [d for d in man.iterdir() if re.fullmatch(r"man\w+", d.name)]
    else:
        locale = pick_locale([d.name for d in man.iterdir() if d.is_dir()], lang)
        sections = list((man / locale).iterdir()) if locale else []
    return sorted(p for d in sections if d.is_dir() for p in d.iterdir() if p.is_file() and not p.is_symlink())


def man_lines(root: Path, lang: str, progress: bool) -> Iterator[tuple[str, str]]:
    files = _man_files(root, lang)
    # groff runs in subprocesses, so threads render pages in parallel; map keeps the sorted order, and
    # chunks bound how many rendered pages wait in memory.
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        bar = tqdm(total=len(files), desc=path_desc(root), unit="page", leave=False, disable=not progress)
        for start in range(0, len(files), 64):
            chunk = files[start:start + 64]
            for paragraphs in pool.map(partial(render_man_page, lang=lang), chunk):
                for paragraph in paragraphs:
                    yield lang, paragraph
            bar.update(len(chunk))
        bar.close()


def ensure_groff() -> None:
    """Man pages need groff; install Debian's `groff-base` when it is missing (root only)."""
    if shutil.which("groff") and shutil.which("preconv"):
        return
    subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "groff-base"],
                   capture_output=True, check=False)
    if not shutil.which("groff"):
        raise FetchError("man pages need groff: run `apt-get install groff-base` (as root) and retry")

