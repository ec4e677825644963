"""Sequence classification, one text or a pair (XNLI, PAWS-X): BERT's head on the first token."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from metaxlm.data.examples import ClassificationExample
from metaxlm.errors import MetaXLMError
from metaxlm.finetune.tasks import register_task
from metaxlm.finetune.tasks.base import Feature, Task, collapsed_to_one


@register_task("classification")
class ClassificationTask(Task):
    auto_model = "AutoModelForSequenceClassification"
    metrics = ("accuracy",)
    examples = ClassificationExample

    def fit_labels(self, examples: Sequence[ClassificationExample]) -> None:
        if not self.labels:
            self.labels = sorted({ex.label for ex in examples})
        if len(self.labels) == 1:  # cross-entropy over one class is 0 whatever the model does: nothing is learned
            raise MetaXLMError(f"classification: every training example has the label {self.labels[0]!r}; a "
                               "classifier needs two labels or more (is the training file sorted by label and cut?)")

    def model_kwargs(self) -> dict:
        # said, not guessed: transformers takes a head of num_labels 1 for regression and then trains an MSE on the
        # class ids (torch >= 2.12 silently; older torch fails in backward with "Found dtype Long but expected Float")
        kwargs = super().model_kwargs()
        return {**kwargs, "problem_type": "single_label_classification"} if kwargs else kwargs

    def encode(self, examples: Sequence[ClassificationExample], *, train: bool) -> list[Feature]:
        pairs = [ex.text_pair for ex in examples]
        has_pair = [p is not None for p in pairs]
        if any(has_pair) and not all(has_pair):
            raise MetaXLMError("classification examples mix single texts and pairs")
        enc = self.tokenizer([ex.text for ex in examples], pairs if all(has_pair) and pairs else None,
                             truncation=True, max_length=self.hp.max_seq_len)
        label_ids = {label: i for i, label in enumerate(self.labels)}
        features = []
        for i, ex in enumerate(examples):
            feature = {key: enc[key][i] for key in ("input_ids", "token_type_ids") if key in enc}
            feature["example"] = i
            if train:
                if ex.label not in label_ids:
                    raise MetaXLMError(f"example {ex.id}: label {ex.label!r} is not among the training labels")
                feature["labels"] = label_ids[ex.label]
            features.append(feature)
        return features

    def decode(self, examples, features, outputs) -> list[str]:
        predictions: list[str | None] = [None] * len(examples)
        for feature, (logits,) in zip(features, outputs, strict=True):
            predictions[feature["example"]] = self.labels[int(np.argmax(logits))]
        return predictions

    def score(self, examples, predictions, *, metric: str, lang: str | None = None) -> float:
        from metaxlm.metrics import accuracy

        return accuracy(predictions, [ex.label for ex in examples])

    def item_rows(self, examples, predictions, *, metric: str, lang: str | None = None) -> dict:
        return {metric: ("mean", [[int(p == ex.label)] for ex, p in zip(examples, predictions, strict=True)])}

    def constant_predictions(self, examples) -> list[str]:
        from collections import Counter

        majority = Counter(ex.label for ex in examples).most_common(1)[0][0]
        return [majority] * len(examples)

    def collapse(self, examples, predictions) -> str | None:
        found = collapsed_to_one(predictions, [ex.label for ex in examples])
        return None if found is None else f"predicts one class ({found[0]!r}) for {found[1]:.0%} of test items"

    def code_switch(self, english: ClassificationExample, translated: ClassificationExample):
        if english.text_pair is None or translated.text_pair is None:
            return None
        return (replace(translated, id=f"{translated.id}|xx-en", text_pair=english.text_pair, label=english.label),
                replace(english, id=f"{english.id}|en-xx", text_pair=translated.text_pair))
