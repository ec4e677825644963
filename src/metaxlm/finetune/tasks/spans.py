"""Character-offset spans, also for scripts without spaces (zh, ja): no word segmentation needed.

Gold spans become token-level BIO tags through the fast tokenizer's offset mapping (a token belongs to a
span when their character ranges overlap); predicted BIO tags become spans again, from the first token's
start to the last token's end, and are scored by exact-match span F1. A span boundary inside a token
cannot be recovered exactly: `bio_roundtrip_f1` measures how often that happens for a tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from metaxlm.data.examples import SpanExample
from metaxlm.data.padding import IGNORE
from metaxlm.finetune.tasks import register_task
from metaxlm.finetune.tasks.base import Feature, Task, collapsed_to_one

Span = tuple[int, int, str]


def spans_to_bio(offsets: Sequence[tuple[int, int] | None], spans: Sequence[Span]) -> list[str | None]:
    """One tag per token (None for special tokens, given as None offsets): B-/I-label inside a span, else O."""
    tags: list[str | None] = []
    previous_span = None
    for offset in offsets:
        if offset is None:
            tags.append(None)
            continue
        start, end = offset
        inside = next((i for i, (a, b, _) in enumerate(spans) if start < b and end > a), None)
        if inside is None:
            tags.append("O")
        else:
            tags.append(("I-" if inside == previous_span else "B-") + spans[inside][2])
        previous_span = inside
    return tags


def bio_to_spans(offsets: Sequence[tuple[int, int] | None], tags: Sequence[str | None]) -> set[Span]:
    """Spans from token tags; an I- tag that does not continue a span of its label starts one (as seqeval)."""
    chunks: list[list] = []  # [start, end, label]
    open_chunk = False
    for offset, tag in zip(offsets, tags, strict=True):
        if offset is None:
            continue
        if tag is None or tag == "O":
            open_chunk = False
            continue
        prefix, label = tag.split("-", 1)
        if prefix == "B" or not open_chunk or chunks[-1][2] != label:
            chunks.append([offset[0], offset[1], label])
            open_chunk = True
        else:
            chunks[-1][1] = offset[1]
    return {(start, end, label) for start, end, label in chunks}


def token_offsets(encoding, index: int) -> list[tuple[int, int] | None]:
    """Character offsets of one encoded text, None for special tokens."""
    special = set(i for i, s in enumerate(encoding.sequence_ids(index)) if s is None)
    return [None if i in special else tuple(o) for i, o in enumerate(encoding["offset_mapping"][index])]


def bio_roundtrip_f1(tokenizer, examples: Sequence[SpanExample], max_length: int = 512) -> float:
    """Span F1 of gold → BIO → spans: the ceiling the tokenizer's sub-word boundaries allow."""
    from metaxlm.metrics import span_f1

    enc = tokenizer([ex.text for ex in examples], return_offsets_mapping=True, truncation=True, max_length=max_length)
    pred = []
    for i, ex in enumerate(examples):
        offsets = token_offsets(enc, i)
        pred.append(bio_to_spans(offsets, spans_to_bio(offsets, ex.spans)))
    return span_f1(pred, [set(ex.spans) for ex in examples])["f1"]


@register_task("spans")
class SpanTask(Task):
    auto_model = "AutoModelForTokenClassification"
    metrics = ("span_f1",)
    examples = SpanExample
    token_outputs = True

    def fit_labels(self, examples: Sequence[SpanExample]) -> None:
        if not self.labels:
            kinds = sorted({label for ex in examples for _, _, label in ex.spans})
            self.labels = ["O"] + [f"{p}-{k}" for k in kinds for p in "BI"]

    def encode(self, examples: Sequence[SpanExample], *, train: bool) -> list[Feature]:
        enc = self.tokenizer([ex.text for ex in examples], return_offsets_mapping=True, truncation=True,
                             max_length=self.hp.max_seq_len)
        label_ids = {label: i for i, label in enumerate(self.labels)}
        features = []
        for i, ex in enumerate(examples):
            offsets = token_offsets(enc, i)
            feature = {key: enc[key][i] for key in ("input_ids", "token_type_ids") if key in enc}
            feature.update(example=i, offsets=offsets)
            if train:
                # a span label unseen in training cannot be learnt: treat its tokens as outside
                tags = spans_to_bio(offsets, [s for s in ex.spans if f"B-{s[2]}" in label_ids])
                feature["labels"] = [IGNORE if t is None else label_ids[t] for t in tags]
            features.append(feature)
        return features

    def decode(self, examples, features, outputs) -> list[set[Span]]:
        predictions = []
        for feature, (logits,) in zip(features, outputs, strict=True):
            tags = [self.labels[int(k)] for k in np.argmax(logits, axis=-1)]
            predictions.append(bio_to_spans(feature["offsets"], tags))
        return predictions

    def constant_predictions(self, examples) -> list[set]:
        return [set() for _ in examples]

    def collapse(self, examples, predictions) -> str | None:
        found = collapsed_to_one([not spans for spans in predictions], [not ex.spans for ex in examples])
        return None if found is None or not found[0] else f"predicts no span in {found[1]:.0%} of test items"

    def score(self, examples, predictions, *, metric: str, lang: str | None = None) -> float:
        from metaxlm.metrics import span_f1

        return span_f1(predictions, [set(ex.spans) for ex in examples])["f1"]

    def item_rows(self, examples, predictions, *, metric: str, lang: str | None = None) -> dict:
        from metaxlm.metrics import span_counts

        return {metric: ("f1", span_counts(predictions, [set(ex.spans) for ex in examples]))}
