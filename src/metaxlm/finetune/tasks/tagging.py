"""Word-level tagging (UD POS, WikiANN BIO entities): BERT's token head, each word labelled and predicted
on its FIRST sub-word; the other sub-words (and special tokens) carry -100, which the loss ignores."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from metaxlm.data.examples import TaggingExample
from metaxlm.data.padding import IGNORE
from metaxlm.errors import MetaXLMError
from metaxlm.finetune.tasks import register_task
from metaxlm.finetune.tasks.base import Feature, Task, collapsed_to_one


def first_subword_labels(word_ids: Sequence[int | None], word_labels: Sequence[int]) -> list[int]:
    """Token labels: a word's label on its first sub-word, IGNORE elsewhere."""
    out, previous = [], None
    for word in word_ids:
        out.append(IGNORE if word is None or word == previous else word_labels[word])
        previous = word
    return out


@register_task("tagging")
class TaggingTask(Task):
    auto_model = "AutoModelForTokenClassification"
    metrics = ("accuracy", "seqeval_f1")
    examples = TaggingExample
    token_outputs = True

    def __init__(self, tokenizer, hp, labels=None):
        super().__init__(tokenizer, hp, labels)
        self.fallback_tag = self.labels[0] if self.labels else "O"

    def fit_labels(self, examples: Sequence[TaggingExample]) -> None:
        counts = Counter(tag for ex in examples for tag in ex.tags)
        if not self.labels:
            self.labels = sorted(counts)
        # a word that lost all its sub-words to truncation gets the most frequent training tag
        self.fallback_tag = "O" if "O" in self.labels else (counts.most_common(1)[0][0] if counts else self.labels[0])

    def encode(self, examples: Sequence[TaggingExample], *, train: bool) -> list[Feature]:
        enc = self.tokenizer([list(ex.words) for ex in examples], is_split_into_words=True, truncation=True,
                             max_length=self.hp.max_seq_len)
        label_ids = {label: i for i, label in enumerate(self.labels)}
        features = []
        for i, ex in enumerate(examples):
            word_ids = enc.word_ids(i)
            feature = {key: enc[key][i] for key in ("input_ids", "token_type_ids") if key in enc}
            feature.update(example=i, word_ids=word_ids)
            if train:
                unknown = set(ex.tags) - label_ids.keys()
                if unknown:
                    raise MetaXLMError(f"example {ex.id}: tags {sorted(unknown)} are not among the training tags")
                feature["labels"] = first_subword_labels(word_ids, [label_ids[t] for t in ex.tags])
            features.append(feature)
        return features

    def decode(self, examples, features, outputs) -> list[list[str]]:
        predictions = []
        for ex, feature, (logits,) in zip(examples, features, outputs, strict=True):
            tags = [self.fallback_tag] * len(ex.words)
            best = np.argmax(logits, axis=-1)
            seen = set()
            for position, word in enumerate(feature["word_ids"]):
                if word is not None and word not in seen:
                    seen.add(word)
                    tags[word] = self.labels[int(best[position])]
            predictions.append(tags)
        return predictions

    def constant_predictions(self, examples) -> list[list[str]]:
        from collections import Counter

        majority = Counter(t for ex in examples for t in ex.tags).most_common(1)[0][0]
        return [[majority] * len(ex.words) for ex in examples]

    def collapse(self, examples, predictions) -> str | None:
        found = collapsed_to_one([t for tags in predictions for t in tags], [t for ex in examples for t in ex.tags])
        return None if found is None else f"predicts one tag ({found[0]!r}) for {found[1]:.0%} of test words"

    def score(self, examples, predictions, *, metric: str, lang: str | None = None) -> float:
        from metaxlm.metrics import accuracy, seqeval_f1

        gold = [list(ex.tags) for ex in examples]
        if metric == "seqeval_f1":
            return seqeval_f1(predictions, gold)["f1"]
        return accuracy([t for tags in predictions for t in tags], [t for tags in gold for t in tags])

    def item_rows(self, examples, predictions, *, metric: str, lang: str | None = None) -> dict:
        """Per sentence: seqeval's entity counts [tp, fp, fn] ("f1"), or [correct tags, tags] ("ratio": accuracy is
        over all words, so a sentence weighs by its length)."""
        from metaxlm.metrics import seqeval_counts

        gold = [list(ex.tags) for ex in examples]
        if metric == "seqeval_f1":
            return {metric: ("f1", seqeval_counts(predictions, gold))}
        return {metric: ("ratio", [[sum(p == g for p, g in zip(tags, want, strict=True)), len(want)]
                                   for tags, want in zip(predictions, gold, strict=True)])}
