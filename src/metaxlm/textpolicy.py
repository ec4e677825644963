"""The control-character policy for training text, shared by the data readers and the config loader (which sit
above it: neither imports the other for it)."""

from __future__ import annotations

import re

__all__ = ["text_problem"]

# ASCII control characters are not text: they come from binary files, broken conversions or terminal escapes,
# and would reach the tokenizer as characters to learn. TAB separates columns; LF and CR end lines, so a CR
# left inside a line is bad too. C1 controls (U+0080-U+009F) are left alone: real corpora hold them
# (data/demo/mono/zh.txt.xz does).
_CONTROL_IN_LINE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# Text that spans lines keeps its line breaks. Only JSON escapes can make lone surrogates ("\ud800"), which
# no UTF-8 file holds and which fail later, wherever the text is encoded again.
_CONTROL_IN_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def text_problem(text: str, *, multiline: bool = False) -> str | None:
    """What makes `text` unfit to train on under the control-character policy (None: nothing). One line may
    hold TAB as its only control character; `multiline` text (a JSON text field, a dictionary entry) may also
    hold LF and CR."""
    found = (_CONTROL_IN_TEXT if multiline else _CONTROL_IN_LINE).search(text)
    if found is None:
        return None
    char = found.group()
    kind = "lone surrogate" if "\ud800" <= char <= "\udfff" else "control character"
    return f"{kind} U+{ord(char):04X} at {'character' if multiline else 'column'} {found.start() + 1}"
