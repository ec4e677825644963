"""Machine translation (`type: translation`): fine-tune any HF sequence-to-sequence model on sentence pairs, test
with beam search and sacreBLEU (BLEU and chrF, with their signatures).

Training is teacher-forced: the decoder reads [start] + target[:-1] and predicts target (its tokens then EOS);
the loss is cross-entropy with label smoothing (`hyperparameters.label_smoothing`, default 0.1, torch's
definition: (1 - ε)·NLL + ε·mean over the vocabulary of -log p), padded target positions carry no loss. Testing
generates with `generate()` (`num_beams`, `length_penalty`, `max_new_tokens`), batched and sorted by length
(metaxlm.finetune.translate). Data: the `parallel_tsv` and `parallel_files` formats of metaxlm.data.benchmarks, in the
spec's `direction`. Scenario: `supervised` (each language pair trained and tested on its own data).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from metaxlm.compute.devices import compute_device
from metaxlm.data.examples import TranslationExample
from metaxlm.data.padding import IGNORE, pad_right
from metaxlm.finetune.hyperparameters import Hyperparameters
from metaxlm.finetune.inference import resolved_precision
from metaxlm.finetune.tasks import register_task
from metaxlm.finetune.tasks.base import Feature, Task, collapsed_to_one


@register_task("translation")
class TranslationTask(Task):
    auto_model = "AutoModelForSeq2SeqLM"  # metaxlm.finetune.models loads it with metaxlm.finetune.models.load_seq2seq
    metrics = ("bleu", "chrf")
    examples = TranslationExample
    # sacreBLEU's BLEU and chrF are percent; both are shown whichever is the main metric
    report_hints = {**Task.report_hints, "percent": True, "scores": ["bleu", "chrf"],
                    "names": {"bleu": "BLEU", "chrf": "chrF"}, "directional": True}
    scenarios = ("supervised",)

    @classmethod
    def check_spec(cls, spec) -> None:  # an encoder-decoder may be assembled (seq2seq)
        if spec.train_from != "train":
            raise ValueError("translation tasks train on their `train` pairs (train_from: train)")

    def __init__(self, tokenizer, hp: Hyperparameters, labels=None):
        super().__init__(tokenizer, hp, labels)
        # the model's decoder start token, set when the model is loaded; a target's own leading copy of it
        # (BERT tokenizers start every text with [CLS], which VECO's exporter makes the start token) is dropped
        self.decoder_start_token_id: int | None = tokenizer.cls_token_id

    @property
    def pad_id(self) -> int:  # of the current tokenizer (load_model may trim it: seq2seq.vocabulary)
        return self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    def model_kwargs(self) -> dict[str, Any]:
        return {}

    # -- data ------------------------------------------------------------------------------------------------------
    def target_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids the decoder learns to produce: the tokenizer's target encoding (ending with EOS) without a
        leading decoder start token."""
        rows = self.tokenizer(text_target=list(texts), truncation=True, max_length=self.hp.max_seq_len)["input_ids"]
        start = self.decoder_start_token_id
        return [row[1:] if start is not None and row and row[0] == start else row for row in rows]

    def encode(self, examples: Sequence[TranslationExample], *, train: bool) -> list[Feature]:
        sources = self.tokenizer([ex.source for ex in examples], truncation=True,
                                 max_length=self.hp.max_seq_len)["input_ids"]
        targets = self.target_ids([ex.target for ex in examples]) if train else [None] * len(examples)
        features = []
        for i, (source, target) in enumerate(zip(sources, targets, strict=True)):
            feature: Feature = {"input_ids": source, "example": i}
            if train:
                feature["labels"] = target
            features.append(feature)
        return features

    def feature_tokens(self, feature: Feature) -> int:
        """Source plus target tokens: the decoder's side costs as much as the encoder's."""
        return len(feature["input_ids"]) + len(feature.get("labels") or ())

    def collate(self, features: list[Feature], pad_id: int, *, train: bool) -> dict:
        """Sources padded with the pad token, targets (their own length) with -100."""
        input_ids, attention_mask = pad_right([f["input_ids"] for f in features], pad_id)
        batch = {"input_ids": input_ids, "attention_mask": attention_mask}
        if train:
            batch["labels"] = pad_right([f["labels"] for f in features], IGNORE)[0]
        return batch

    # -- training --------------------------------------------------------------------------------------------------
    def decoder_inputs(self, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(decoder_input_ids, decoder_attention_mask): labels shifted right behind the start token."""
        start = self.decoder_start_token_id if self.decoder_start_token_id is not None else self.pad_id
        shifted = torch.cat([torch.full_like(labels[:, :1], start), labels[:, :-1]], dim=1)
        mask = shifted != IGNORE
        return shifted.masked_fill(~mask, self.pad_id), mask.long()

    def loss(self, model, batch: dict) -> torch.Tensor:
        labels = batch["labels"]
        decoder_input_ids, decoder_attention_mask = self.decoder_inputs(labels)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       decoder_input_ids=decoder_input_ids, decoder_attention_mask=decoder_attention_mask).logits
        return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE,
                               label_smoothing=self.hp.label_smoothing)

    # -- testing ---------------------------------------------------------------------------------------------------
    def predict(self, model, examples: Sequence[TranslationExample], hp: Hyperparameters, *, progress: bool = False,
                desc: str = "translate") -> list[str]:
        from metaxlm.finetune.translate import generate_translations

        device = compute_device()
        model.to(device)
        precision = resolved_precision(model, hp, device)
        return generate_translations(model, self.tokenizer, [ex.source for ex in examples], num_beams=hp.num_beams,
                                     length_penalty=hp.length_penalty, no_repeat_ngram_size=hp.no_repeat_ngram_size,
                                     max_new_tokens=hp.max_new_tokens,
                                     max_source_len=hp.max_seq_len, batch_size=hp.eval_batch_size,
                                     autocast=lambda: precision.autocast(device.type), progress=progress, desc=desc)

    def target_language(self, lang: str | None) -> str | None:
        spec = getattr(self, "spec", None)
        if spec is not None and spec.direction == "reverse":
            return spec.source
        return lang

    def report(self, examples, predictions, *, lang: str | None = None) -> dict[str, Any]:
        from metaxlm.finetune.translate import corpus_scores

        spec = getattr(self, "spec", None)
        return corpus_scores(predictions, [ex.target for ex in examples], target_lang=self.target_language(lang),
                             tokenize=spec.bleu_tokenize if spec is not None else None)

    def item_rows(self, examples, predictions, *, metric: str, lang: str | None = None) -> dict:
        """sacreBLEU's sentence statistics of BLEU (with the tokenizer `report` scores with) and chrF: both, as the
        report shows both."""
        from metaxlm.finetune.translate import bleu_tokenizer
        from metaxlm.metrics import sentence_statistics

        spec = getattr(self, "spec", None)
        tokenize = bleu_tokenizer(self.target_language(lang), spec.bleu_tokenize if spec is not None else None)
        references = [ex.target for ex in examples]
        return {"bleu": ("bleu", sentence_statistics("bleu", predictions, references, tokenize=tokenize)),
                "chrf": ("chrf", sentence_statistics("chrf", predictions, references))}

    def outputs(self, examples, predictions) -> list[dict]:
        return [{"id": ex.id, "source": ex.source, "reference": ex.target, "output": output}
                for ex, output in zip(examples, predictions, strict=True)]

    def collapse(self, examples, predictions) -> str | None:
        found = collapsed_to_one(list(predictions), [ex.target for ex in examples])
        return None if found is None else f"gives one output ({found[0][:40]!r}) for {found[1]:.0%} of test sentences"

    def score(self, examples, predictions, *, metric: str, lang: str | None = None) -> float:
        return self.report(examples, predictions, lang=lang)[metric]
