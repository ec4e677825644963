"""A task type from outside the package, loaded as a config plugin (`plugins: [tests/regression_task.py]`): sentence
regression (STS-style similarity scores), read from its own JSON-lines format and scored by Pearson's r. What a new
task type declares — its metrics, the examples it reads, how the report shows it — is all here: nothing in metaxlm
lists task types."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from metaxlm.data.benchmarks import register_format
from metaxlm.finetune.inference import collate
from metaxlm.finetune.tasks import register_task
from metaxlm.finetune.tasks.base import Task


@dataclass(frozen=True)
class ScoredExample:
    id: str
    text: str
    score: float


@register_format("scored_jsonl", examples=ScoredExample)
def scored_jsonl(path: Path, **_) -> list[ScoredExample]:
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [ScoredExample(str(row["id"]), row["text"], float(row["score"])) for row in rows]


@register_task("regression")
class RegressionTask(Task):
    auto_model = "AutoModelForSequenceClassification"
    metrics = ("pearson",)
    examples = ScoredExample
    report_hints = {**Task.report_hints, "names": {"pearson": "Pearson r"}}
    scenarios = ("zero_shot", "supervised")

    def model_kwargs(self) -> dict:
        return {"num_labels": 1, "problem_type": "regression"}  # HF's head: one output, mean squared error

    def encode(self, examples, *, train: bool) -> list[dict]:
        enc = self.tokenizer([ex.text for ex in examples], truncation=True, max_length=self.hp.max_seq_len)
        features = []
        for i, ex in enumerate(examples):
            feature = {"input_ids": enc["input_ids"][i], "example": i}
            if train:
                feature["labels"] = ex.score
            features.append(feature)
        return features

    def collate(self, features, pad_id: int, *, train: bool) -> dict:
        batch = collate(features, pad_id)
        if train:  # float targets (the default collate makes class ids)
            batch["labels"] = torch.tensor([f["labels"] for f in features], dtype=torch.float)
        return batch

    def decode(self, examples, features, outputs) -> list[float]:
        predictions = [0.0] * len(examples)
        for feature, (logits,) in zip(features, outputs, strict=True):
            predictions[feature["example"]] = float(logits[0])
        return predictions

    def score(self, examples, predictions, *, metric: str, lang: str | None = None) -> float:
        gold = np.array([ex.score for ex in examples])
        predicted = np.array(predictions)
        if predicted.std() == 0 or gold.std() == 0:
            return 0.0
        return float(np.corrcoef(predicted, gold)[0, 1])
