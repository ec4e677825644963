"""Finding things in an unpacked Debian package: the locale directory of a language, a short label for
progress bars."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from tqdm import tqdm

# Locale directory to prefer when a language has several (Simplified Chinese, like the demo bundle).
_PREFERRED_LOCALES = {"zh": ("zh_CN", "zh-CN"), "pt": ("pt", "pt_BR", "pt-BR"), "en": ("en", "en_US", "en-US")}


def pick_locale(names: Iterable[str], lang: str) -> str | None:
    """The locale directory for `lang` among `names` (`de`, `de-DE`, `zh_CN`...), preferring the plain code."""
    names = sorted(names)
    for preferred in _PREFERRED_LOCALES.get(lang, (lang,)):
        if preferred in names:
            return preferred
    if lang in _PREFERRED_LOCALES:
        return None  # e.g. zh: no Simplified tree, and zh_TW is not a stand-in
    matching = [n for n in names if re.split(r"[-_@.]", n)[0] == lang and "@" not in n]
    return matching[0] if matching else None


def path_desc(root: Path) -> str:
    """The package name of an unpacked tree `<name>_<version>`."""
    return root.name.split("_")[0]


def progress_bar(items: Iterable, desc: str, progress: bool, unit: str = "file") -> Iterable:
    return tqdm(items, desc=desc, unit=unit, leave=False, disable=not progress)
