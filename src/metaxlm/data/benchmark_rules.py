"""What every benchmark loader checks, wherever the items come from (a file: data.benchmarks; the Hugging Face Hub:
data.hub): the column names in the wild, the label sets, the shape of a BIO tag, an answer span against its context.
One set of rules, so a task scores the same items from either source."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from metaxlm.errors import DataError

# the message of every unlabelled-item error: public test files often ship without labels
UNLABELLED = "unlabelled items cannot be scored"

# Column names of the headers in the wild (XNLI 1.0 xnli.test.tsv, PAWS-X x-final/*.tsv, SIB-200) and
# the Hub's columns (facebook/xnli, paws-x, Davlan/sib200, google/xtreme).
HEADER_ALIASES = {
    "text": ("premise", "sentence1", "text"),
    "text_pair": ("hypothesis", "sentence2"),
    "label": ("label", "gold_label", "category"),
    "id": ("id", "pairid", "index_id"),
    "language": ("language", "lang"),
}
XNLI_LABELS = {"entailment", "neutral", "contradiction"}
PAWSX_LABELS = {"0", "1"}
BIO_TAG = re.compile(r"O|[BI]-\S+")


def checked_answer(answer: object, context: str, split: str, relocated: list[str]) -> tuple[str, int] | str:
    """(text, start) with the start checked against the context, or what is wrong with the answer.
    Answers whose start had to be corrected are appended to `relocated`."""
    if not isinstance(answer, dict) or not isinstance(answer.get("text"), str) or not answer["text"].strip():
        return "an answer without text"
    text, start = answer["text"], answer.get("answer_start")
    if isinstance(start, int) and context[start:start + len(text)] == text:
        return text, start
    found = [m.start() for m in re.finditer(re.escape(text), context)]
    if found:  # a shifted offset (translated data): take the nearest occurrence of the answer text
        nearest = min(found, key=lambda s: abs(s - start) if isinstance(start, int) else s)
        relocated.append(f"{text!r} from {start} to {nearest}")
        return text, nearest
    if split == "test":  # only the text is scored
        return text, -1
    return f"answer {text!r} does not occur in its context"


def finished_questions(examples: list, relocated: list[str], where: str | Path) -> list:
    """A QA loader's questions once read: none is an error, and moved answer starts are said once (a warning naming
    the first), as every QA loader does."""
    if not examples:
        raise DataError(where, None, "no questions")
    if relocated:
        warnings.warn(f"{where}: moved {len(relocated)} answer start(s) to where the answer text is, e.g. "
                      f"{relocated[0]}", stacklevel=4)  # the caller of the loader
    return examples
