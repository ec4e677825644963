"""Extractive QA, SQuAD-style: (question, context window) features with a document stride, start/end
logits, n-best decoding back to context text through the offsets; EM/F1 with the official SQuAD v1.1
normalization, or MLQA's per-language normalization (spec `qa_normalization: mlqa`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from metaxlm.data.examples import QAExample
from metaxlm.finetune.tasks import register_task
from metaxlm.finetune.tasks.base import Feature, Task, collapsed_to_one


def _compact(value: float) -> float | int:
    """An integral value as an int (results.json stays short: most questions score 0 or 100)."""
    return int(value) if value.is_integer() else value


def _answer_span(offsets: list[tuple[int, int] | None], start_char: int, end_char: int) -> tuple[int, int]:
    """Token positions of the answer [start_char, end_char) inside this window, or (0, 0) (the first token,
    the "no answer here" target) when the window does not hold all of it."""
    context = [i for i, o in enumerate(offsets) if o is not None]
    if not context or offsets[context[0]][0] > start_char or offsets[context[-1]][1] < end_char:
        return 0, 0
    start = next(i for i in context if offsets[i][1] > start_char)
    end = next(i for i in reversed(context) if offsets[i][0] < end_char)
    return start, end


def best_span(start_logits: np.ndarray, end_logits: np.ndarray, offsets: list[tuple[int, int] | None],
              n_best: int, max_answer_len: int) -> tuple[float, int, int] | None:
    """(score, start token, end token) of the best valid span among the n-best starts and ends of one window."""
    starts = np.argsort(start_logits)[::-1][:n_best]
    ends = np.argsort(end_logits)[::-1][:n_best]
    best = None
    for s in starts:
        if s >= len(offsets) or offsets[s] is None:
            continue
        for e in ends:
            if e < s or e - s + 1 > max_answer_len or e >= len(offsets) or offsets[e] is None:
                continue
            score = float(start_logits[s] + end_logits[e])
            if best is None or score > best[0]:
                best = (score, int(s), int(e))
    return best


@register_task("qa")
class QATask(Task):
    auto_model = "AutoModelForQuestionAnswering"
    metrics = ("f1", "exact_match")
    examples = QAExample
    split_unit = "articles"
    report_hints = {**Task.report_hints, "percent": True}  # SQuAD's script reports percent
    target_keys = ("start_positions", "end_positions")
    output_keys = ("start_logits", "end_logits")
    token_outputs = True
    normalization = "squad"  # or "mlqa": the scenarios set it from the spec

    @classmethod
    def check_spec(cls, spec) -> None:
        super().check_spec(spec)
        hp = spec.hyperparameters
        room = hp.max_seq_len - hp.max_query_len - 4  # the context window after the question and special tokens
        if hp.doc_stride >= room:
            raise ValueError(f"hyperparameters.doc_stride ({hp.doc_stride}) must be < max_seq_len - max_query_len - 4"
                             f" ({room})")

    def _short_questions(self, examples: Sequence[QAExample]) -> list[str]:
        """Questions cut to max_query_len tokens, so a window always keeps room for the context."""
        questions = [ex.question.lstrip() for ex in examples]  # leading spaces waste tokens
        enc = self.tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)
        limit = self.hp.max_query_len
        return [q if len(ids) <= limit else q[: enc["offset_mapping"][i][limit - 1][1]]
                for i, (q, ids) in enumerate(zip(questions, enc["input_ids"], strict=True))]

    def encode(self, examples: Sequence[QAExample], *, train: bool) -> list[Feature]:
        hp = self.hp
        enc = self.tokenizer(self._short_questions(examples), [ex.context for ex in examples],
                             truncation="only_second", max_length=hp.max_seq_len, stride=hp.doc_stride,
                             return_overflowing_tokens=True, return_offsets_mapping=True)
        features = []
        for k, example_index in enumerate(enc["overflow_to_sample_mapping"]):
            sequence_ids = enc.sequence_ids(k)
            offsets = [tuple(o) if sequence_ids[i] == 1 else None for i, o in enumerate(enc["offset_mapping"][k])]
            feature = {key: enc[key][k] for key in ("input_ids", "token_type_ids") if key in enc}
            feature.update(example=example_index, offsets=offsets)
            if train:
                text, start_char = examples[example_index].answers[0]
                feature["start_positions"], feature["end_positions"] = _answer_span(
                    offsets, start_char, start_char + len(text))
            features.append(feature)
        return features

    def decode(self, examples, features, outputs) -> dict[str, str]:
        best: dict[int, tuple[float, int, int, int]] = {}
        for f, (feature, (start_logits, end_logits)) in enumerate(zip(features, outputs, strict=True)):
            found = best_span(start_logits, end_logits, feature["offsets"], self.hp.n_best, self.hp.max_answer_len)
            i = feature["example"]
            if found and (i not in best or found[0] > best[i][0]):
                best[i] = (*found, f)
        predictions = {}
        for i, ex in enumerate(examples):
            if i in best:
                _, s, e, f = best[i]
                offsets = features[f]["offsets"]
                predictions[ex.id] = ex.context[offsets[s][0]:offsets[e][1]]
            else:
                predictions[ex.id] = ""
        return predictions

    def constant_predictions(self, examples) -> dict[str, str]:
        return {ex.id: "" for ex in examples}

    def collapse(self, examples, predictions) -> str | None:
        found = collapsed_to_one([not predictions[ex.id].strip() for ex in examples],
                                 [not any(text for text, _ in ex.answers) for ex in examples])
        return None if found is None or not found[0] else f"gives an empty answer to {found[1]:.0%} of test questions"

    def _references(self, examples) -> dict[str, list[str]]:
        return {ex.id: [text for text, _ in ex.answers] for ex in examples}

    def score(self, examples, predictions, *, metric: str, lang: str | None = None) -> float:
        from metaxlm.metrics import squad_em_f1

        scores = squad_em_f1(predictions, self._references(examples),
                             lang=lang if self.normalization == "mlqa" else None)
        return scores[metric]

    def item_rows(self, examples, predictions, *, metric: str, lang: str | None = None) -> dict:
        """One row per question (its windows are decoded into one answer), the percent squad_em_f1 averages; 100 and
        0 as ints."""
        from metaxlm.metrics import squad_per_question

        per_question = squad_per_question(predictions, self._references(examples),
                                          lang=lang if self.normalization == "mlqa" else None)
        which = 0 if metric == "exact_match" else 1
        return {metric: ("mean", [[_compact(100.0 * scores[which])] for scores in per_question.values()])}

    def code_switch(self, english: QAExample, translated: QAExample):
        # the answer lives in the context, so each code-switched pair keeps its context's answers
        return (replace(translated, id=f"{translated.id}|xx-en", context=english.context, answers=english.answers),
                replace(english, id=f"{english.id}|en-xx", context=translated.context, answers=translated.answers))
