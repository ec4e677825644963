"""What every task type provides to the trainer and the scenarios.

A task turns examples into features (dicts holding `input_ids`, maybe `token_type_ids`, the training
targets under `target_keys`, and whatever decoding needs), and turns the model's outputs on those
features back into one prediction per example, which `score` compares with the gold data.

The defaults fit an encoder with a head (one forward, the model's own loss, outputs decoded per feature); a
task of another shape (translation: targets of their own length, a loss of its own, generation instead of one
forward) overrides `collate`, `loss` and `predict`, and may report more than its main metric (`report`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from metaxlm.finetune.hyperparameters import Hyperparameters
from metaxlm.finetune.inference import Feature, collate, predict_outputs
from metaxlm.records import DEFAULT_REPORT_HINTS

# a fine-tuned model giving one answer to at least this share of the test items (when the gold answers are less
# uniform) has learned a prior, not the task: results.json and the report mark it "collapsed"
COLLAPSE_SHARE = 0.95


def collapsed_to_one(predicted: Sequence, gold: Sequence) -> tuple[Any, float] | None:
    """(value, share) when one value is at least COLLAPSE_SHARE of `predicted` while it is less of `gold` (a test
    set that is itself that uniform proves nothing), else None."""
    from collections import Counter

    if not predicted:
        return None
    value, count = Counter(predicted).most_common(1)[0]
    share = count / len(predicted)
    gold_share = sum(g == value for g in gold) / len(gold) if gold else 0.0
    return (value, share) if share >= COLLAPSE_SHARE and gold_share < COLLAPSE_SHARE else None


class Task:
    name: ClassVar[str] = ""           # set by TASKS.register
    auto_model: ClassVar[str] = ""     # the transformers Auto class holding this head
    target_keys: ClassVar[tuple[str, ...]] = ("labels",)
    output_keys: ClassVar[tuple[str, ...]] = ("logits",)
    token_outputs: ClassVar[bool] = False  # outputs are per token (the trainer cuts them to each feature's length)
    # the fine-tuning scenarios that make sense for this task type (metaxlm.finetune.scenarios), the first the default
    scenarios: ClassVar[tuple[str, ...]] = ("zero_shot", "supervised", "translate_train", "transfer_matrix")
    # What a task type declares, so that task configs, the scenarios and the report need no list of types:
    metrics: ClassVar[tuple[str, ...]] = ()        # the metrics `score` computes; a task config's `metric` is one
    examples: ClassVar[type | None] = None         # the example class it trains on: a task's format must yield it
    split_unit: ClassVar[str] = "documents"        # what `train_from: test_half` halves (QA: the articles)
    # How the report shows its results (copied into each results.json entry as `report_hints`): `percent`: the scores
    # already are percent (as official QA and sacreBLEU scripts report them); `scores`: the scores of `report()`
    # that curves and headline columns show beside the main metric, with `names` to print them; `directional`: one
    # result per translation direction (source→language).
    report_hints: ClassVar[dict[str, Any]] = DEFAULT_REPORT_HINTS

    @classmethod
    def check_spec(cls, spec) -> None:
        """Checks of a task config that only this type needs (raise ValueError naming the field). Default: an
        encoder-decoder is assembled for translation tasks only."""
        if spec.seq2seq is not None:
            raise ValueError("seq2seq (assembling an encoder-decoder) is for translation tasks only")

    def __init__(self, tokenizer, hp: Hyperparameters, labels: Sequence[str] | None = None):
        self.tokenizer = tokenizer
        self.hp = hp
        self.labels: list[str] = list(labels) if labels is not None else []

    # -- labels ------------------------------------------------------------------------------------------------
    def fit_labels(self, examples: Sequence) -> None:
        """Fix the label set from training examples (sorted, so heads are laid out the same in every run)."""

    @property
    def num_labels(self) -> int:
        return len(self.labels)

    def model_kwargs(self) -> dict[str, Any]:
        """Arguments for `from_pretrained` that size and name the head."""
        if not self.labels:
            return {}
        return {"num_labels": len(self.labels), "id2label": dict(enumerate(self.labels)),
                "label2id": {label: i for i, label in enumerate(self.labels)}}

    # -- data --------------------------------------------------------------------------------------------------
    def feature_tokens(self, feature: Feature) -> int:
        """The tokens a training feature costs in a batch (its length; translation adds its target's), which
        length grouping and `batch_tokens` count."""
        return len(feature["input_ids"])

    def encode(self, examples: Sequence, *, train: bool) -> list[Feature]:
        """Features in example order; each has `example` (its example's index). `train` adds the targets."""
        raise NotImplementedError

    def decode(self, examples: Sequence, features: list[Feature], outputs: list[tuple[np.ndarray, ...]]) -> list:
        """One prediction per example from the outputs (float32 arrays, `output_keys` order) of each feature."""
        raise NotImplementedError

    def score(self, examples: Sequence, predictions: list, *, metric: str, lang: str | None = None) -> float:
        raise NotImplementedError

    def report(self, examples: Sequence, predictions: list, *, lang: str | None = None) -> dict[str, Any]:
        """Every score this task reports beside the main metric (name -> number), and how they were computed
        (e.g. "signatures"); recorded in the results. Default: nothing more."""
        return {}

    def item_rows(self, examples: Sequence, predictions: list, *, metric: str,
                  lang: str | None = None) -> dict[str, tuple[str, list[list[float]]]] | None:
        """Each test item's outcome, so that the report can resample the test items (a paired bootstrap) and
        recompute the scores: {metric name: (kind, one row per example in test-set order)}, `kind` one of
        metaxlm.metrics.ITEM_KINDS, whose `metric_from_sums` over all rows is exactly what `score` (or `report`)
        gives. The main `metric` at least. Default: none (a task type without them has no interval over items)."""
        return None

    def constant_predictions(self, examples: Sequence) -> list | dict | None:
        """The best answer that ignores the input, for every example (the test set's majority class or tag, no
        span, an empty answer): its score is the task's chance level ("majority-class score"), which a model must
        beat before comparing models on it means anything. Default: none (e.g. translation)."""
        return None

    def outputs(self, examples: Sequence, predictions: list) -> list[dict] | None:
        """What the model produced for each test example, as rows a person reads (`{"id", ..., "output"}`), in the
        test set's order: a finished run writes them beside its record and keeps the first few in it. Default:
        none (a class or tag sequence is read through the scores)."""
        return None

    def collapse(self, examples: Sequence, predictions: list) -> str | None:
        """What a collapsed model does ("predicts one class ('x') for 98% of test items"), or None: the predictions
        are (nearly) one answer for every input (COLLAPSE_SHARE). Default: never judged."""
        return None

    # -- training and inference (the trainer calls these) ------------------------------------------------------
    def collate(self, features: list[Feature], pad_id: int, *, train: bool) -> dict:
        """A batch of tensors from features (default: padded to the longest, per-token targets padded with -100)."""
        return collate(features, pad_id, self.target_keys if train else ())

    def loss(self, model, batch: dict):
        """The training loss of one batch (default: the model's own, from the targets in the batch)."""
        return model(**batch).loss

    def predict(self, model, examples: Sequence, hp: Hyperparameters, *, progress: bool = False,
                desc: str = "predict") -> list:
        """Predictions for `examples` (default: one batched forward per feature, then `decode`)."""
        features = self.encode(examples, train=False)
        return self.decode(examples, features, predict_outputs(model, self, features, hp, progress=progress,
                                                               desc=desc))

    def code_switch(self, english, translated) -> tuple | None:
        """For pair tasks, the two code-switched examples (x_xx, y_en) and (x_en, y_xx) of Pan et al. (2021)
        from an English example and its translation; None for single-text tasks."""
        return None
