"""Evaluation metrics, each matching the reference implementation its benchmark is reported with.

Fractions in 0..1, except QA exact match / F1 which are percentages (0..100) like the official scripts.
Corpus-level metrics (span F1, alignment scores) sum counts over all examples before dividing, as
conlleval, seqeval and the AER scripts of SimAlign / XLM-Align do; they do not average per example.
A module of its own, importing no other part of metaxlm: the feature probes, fine-tuning and the evaluation
recipe all score with it.
"""

from __future__ import annotations

import math
import re
import string
import sys
import unicodedata
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from functools import cache

import numpy as np
import torch

__all__ = [
    "accuracy", "accuracy_at_1", "alignment_counts", "alignment_scores", "gold_ranks", "lowest_aer_layer", "mean_std",
    "normalize_answer", "qa_tokens", "seqeval_counts", "seqeval_f1", "span_counts", "span_f1", "squad_em_f1",
    "squad_per_question", "transfer_gap", "ITEM_KINDS", "item_statistics", "metric_from_sums", "sentence_statistics",
]


def _check_same_length(pred: Sequence, gold: Sequence, what: str) -> None:
    if len(pred) != len(gold):
        raise ValueError(f"{what}: {len(pred)} predictions for {len(gold)} gold items")
    if not gold:
        raise ValueError(f"{what}: nothing to score (no gold items)")


def _ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, 0.0 for 0/0 (no predictions means precision 0, not NaN)."""
    return numerator / denominator if denominator else 0.0


def _f1(precision: float, recall: float) -> float:
    return _ratio(2 * precision * recall, precision + recall)


# --- classification and retrieval -------------------------------------------------------------------------

def accuracy(pred: Sequence, gold: Sequence) -> float:
    """Fraction of positions where the prediction equals the gold label."""
    _check_same_length(pred, gold, "accuracy")
    return sum(p == g for p, g in zip(pred, gold, strict=True)) / len(gold)


def accuracy_at_1(similarity: torch.Tensor | np.ndarray) -> float:
    """Retrieval accuracy@1 (Tatoeba protocol): row i's gold is column i, and a row is correct when column i
    has its highest similarity. Extra columns beyond the rows are distractors. Ties go to the lowest column,
    as with torch/numpy argmax."""
    sim = torch.as_tensor(similarity)
    if sim.dim() != 2 or sim.shape[0] == 0 or sim.shape[1] < sim.shape[0]:
        raise ValueError(f"accuracy_at_1 needs an n x m similarity matrix with m >= n > 0, got {tuple(sim.shape)}")
    best = sim.float().argmax(dim=1)
    return (best == torch.arange(sim.shape[0])).sum().item() / sim.shape[0]  # exact: hits / rows, not a float32 mean


def gold_ranks(similarity: torch.Tensor | np.ndarray) -> list[int]:
    """Each row's rank of its gold column i (1: retrieved first), the per-item outcome of `accuracy_at_1`: 1 + the
    columns more similar + the columns as similar at a lower index, the order its argmax breaks ties in, so that
    accuracy_at_1 is exactly the share of rank 1."""
    sim = torch.as_tensor(similarity)
    if sim.dim() != 2 or sim.shape[0] == 0 or sim.shape[1] < sim.shape[0]:
        raise ValueError(f"gold_ranks needs an n x m similarity matrix with m >= n > 0, got {tuple(sim.shape)}")
    sim = sim.float()
    rows = torch.arange(sim.shape[0])
    gold = sim[rows, rows][:, None]
    before = torch.arange(sim.shape[1])[None, :] < rows[:, None]
    return (1 + (sim > gold).sum(dim=1) + ((sim == gold) & before).sum(dim=1)).tolist()


# --- spans and tags -------------------------------------------------------------------------------------

def span_counts(pred: Sequence[Iterable[tuple]], gold: Sequence[Iterable[tuple]]) -> list[list[int]]:
    """[true positives, false positives, false negatives] of each example's exact-match spans: the per-item
    outcomes whose sums `span_f1` is made of."""
    _check_same_length(pred, gold, "span_f1")
    rows = []
    for p, g in zip(pred, gold, strict=True):
        p, g = set(p), set(g)
        rows.append([len(p & g), len(p - g), len(g - p)])
    return rows


def span_f1(pred: Sequence[Iterable[tuple]], gold: Sequence[Iterable[tuple]]) -> dict[str, float]:
    """Micro precision/recall/F1 of exact-match spans, e.g. (start, end, label) character spans: a predicted
    span counts only when offsets and label all match a gold span of the same example."""
    rows = span_counts(pred, gold)
    correct = sum(tp for tp, _, _ in rows)
    n_pred, n_gold = correct + sum(fp for _, fp, _ in rows), correct + sum(fn for _, _, fn in rows)
    precision, recall = _ratio(correct, n_pred), _ratio(correct, n_gold)
    return {"precision": precision, "recall": recall, "f1": _f1(precision, recall)}


def seqeval_f1(pred_tags: Sequence[Sequence[str]], gold_tags: Sequence[Sequence[str]]) -> dict[str, float]:
    """Entity-level micro precision/recall/F1 of BIO tag sequences with seqeval (default, conlleval-compatible
    mode: an I- tag after O starts an entity), as XTREME reports WikiANN/PAN-X."""
    from seqeval.metrics import f1_score, precision_score, recall_score  # imports scikit-learn: slow, so here

    _check_same_length(pred_tags, gold_tags, "seqeval_f1")
    for k, (p, g) in enumerate(zip(pred_tags, gold_tags, strict=True)):
        if len(p) != len(g):
            raise ValueError(f"seqeval_f1: sentence {k} has {len(p)} predicted tags for {len(g)} gold tags")
    gold, pred = [list(g) for g in gold_tags], [list(p) for p in pred_tags]
    return {"precision": float(precision_score(gold, pred, zero_division=0)),
            "recall": float(recall_score(gold, pred, zero_division=0)),
            "f1": float(f1_score(gold, pred, zero_division=0))}


def seqeval_counts(pred_tags: Sequence[Sequence[str]], gold_tags: Sequence[Sequence[str]]) -> list[list[int]]:
    """[true positives, false positives, false negatives] of each sentence's entities, found by seqeval's own
    `get_entities` (its default mode, which `seqeval_f1` scores with): seqeval joins the sentences with an O between
    them, so no entity crosses a sentence and its micro counts are these rows' sums."""
    from seqeval.metrics.sequence_labeling import get_entities

    _check_same_length(pred_tags, gold_tags, "seqeval_f1")
    rows = []
    for k, (p, g) in enumerate(zip(pred_tags, gold_tags, strict=True)):
        if len(p) != len(g):
            raise ValueError(f"seqeval_f1: sentence {k} has {len(p)} predicted tags for {len(g)} gold tags")
        predicted, true = set(get_entities(list(p))), set(get_entities(list(g)))
        rows.append([len(predicted & true), len(predicted - true), len(true - predicted)])
    return rows


# --- extractive QA -----------------------------------------------------------------------------------------
# Without a language: SQuAD v1.1's official evaluate-v1.1.py (lower-case, drop string.punctuation, drop the
# articles a/an/the, collapse whitespace; F1 over whitespace tokens). With a language: MLQA's official
# mlqa_evaluation_v1.py (facebookresearch/MLQA), which drops every Unicode punctuation character, removes
# per-language articles and splits Chinese into characters ("mixed segmentation").

@cache
def _unicode_punctuation() -> frozenset[str]:
    # mlqa_evaluation_v1.py: every code point whose Unicode category starts with "P", plus string.punctuation
    # (which adds the ASCII symbols $+<=>^`|~ of categories S*).
    chars = (chr(i) for i in range(sys.maxunicode))
    return frozenset(c for c in chars if unicodedata.category(c).startswith("P")) | set(string.punctuation)


_ASCII_PUNCTUATION = frozenset(string.punctuation)
_SQUAD_ARTICLES = re.compile(r"\b(a|an|the)\b")
# MLQA's remove_articles; languages not listed there (hi, zh, and any other) have no articles removed.
_MLQA_ARTICLES = {
    "en": re.compile(r"\b(a|an|the)\b"),
    "es": re.compile(r"\b(un|una|unos|unas|el|la|los|las)\b"),
    "vi": re.compile(r"\b(của|là|cái|chiếc|những)\b"),
    "de": re.compile(r"\b(ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b"),
    # The official pattern is '\sال^|ال': its first branch can never match, so in effect every "ال" goes,
    # also inside words. Kept as is so that scores stay comparable with published MLQA numbers.
    "ar": re.compile(r"\sال^|ال"),
}
_MLQA_CJK = re.compile(r"[\u4e00-\u9fa5]")  # MLQA's range for "a Chinese character"
_MIXED_SEGMENTATION_LANGS = {"zh"}


def _mixed_segmentation(text: str, punctuation: frozenset[str]) -> list[str]:
    """MLQA's mixed_segmentation: each Chinese character (and punctuation mark) is a token, the text
    between them is split on whitespace."""
    tokens: list[str] = []
    pending = ""
    for char in text:
        if _MLQA_CJK.search(char) or char in punctuation:
            tokens.extend(pending.split())
            pending = ""
            tokens.append(char)
        else:
            pending += char
    tokens.extend(pending.split())
    return tokens


def qa_tokens(text: str, lang: str | None = None) -> list[str]:
    """The normalized tokens EM and F1 compare: SQuAD v1.1 rules without `lang`, MLQA rules with it."""
    if lang is None:
        text = "".join(c for c in text.lower() if c not in _ASCII_PUNCTUATION)
        return _SQUAD_ARTICLES.sub(" ", text).split()
    punctuation = _unicode_punctuation()
    text = "".join(c for c in text.lower() if c not in punctuation)
    if lang in _MLQA_ARTICLES:
        text = _MLQA_ARTICLES[lang].sub(" ", text)
    tokens = _mixed_segmentation(text, punctuation) if lang in _MIXED_SEGMENTATION_LANGS else text.split()
    return [t for t in tokens if t.strip()]


def normalize_answer(text: str, lang: str | None = None) -> str:
    """The official normalize_answer: normalized tokens joined by single spaces."""
    return " ".join(qa_tokens(text, lang))


def _qa_f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_per_question(predictions: Mapping[Hashable, str], references: Mapping[Hashable, Sequence[str]],
                       lang: str | None = None) -> dict[Hashable, tuple[float, float]]:
    """(exact match, token F1) of each question of `references` (in its order) as fractions, each the max over the
    question's gold answers; a question without a prediction scores (0, 0): what `squad_em_f1` averages."""
    if not references:
        raise ValueError("squad_em_f1: nothing to score (no references)")
    out = {}
    for qid, answers in references.items():
        if isinstance(answers, str) or not answers:
            raise ValueError(f"squad_em_f1: question {qid!r} needs a non-empty list of gold answers")
        if qid not in predictions:
            out[qid] = (0.0, 0.0)
            continue
        pred = qa_tokens(predictions[qid], lang)
        golds = [qa_tokens(a, lang) for a in answers]
        out[qid] = (max(float(pred == g) for g in golds), max(_qa_f1(pred, g) for g in golds))
    return out


def squad_em_f1(predictions: Mapping[Hashable, str], references: Mapping[Hashable, Sequence[str]],
                lang: str | None = None) -> dict[str, float]:
    """Exact match and token F1 in percent, each the max over a question's gold answers, averaged over
    `references`. As in the official scripts, a question without a prediction scores 0, and predictions
    for ids not in `references` are ignored."""
    scores = squad_per_question(predictions, references, lang).values()
    exact, f1 = sum(em for em, _ in scores), sum(f for _, f in scores)
    return {"exact_match": 100.0 * exact / len(references), "f1": 100.0 * f1 / len(references)}


# --- word alignment -------------------------------------------------------------------------------------

def alignment_scores(pred: Sequence[Iterable[tuple[int, int]]], sure: Sequence[Iterable[tuple[int, int]]],
                     possible: Sequence[Iterable[tuple[int, int]]]) -> dict[str, float]:
    """Corpus-level AER (Och & Ney 2003) with precision = |A∩P|/|A|, recall = |A∩S|/|S| and their F1,
    counts summed over sentence pairs. P is taken as P ∪ S, so a possible set that omits the sure links
    (P-only lists) still gives the standard AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|)."""
    a_and_s, a_and_p, n_a, n_s = (sum(column) for column in zip(*alignment_counts(pred, sure, possible), strict=True))
    if n_a + n_s == 0:
        raise ValueError("alignment_scores: no predicted and no sure links, AER is undefined")
    precision, recall = _ratio(a_and_p, n_a), _ratio(a_and_s, n_s)
    return {"aer": 1.0 - (a_and_s + a_and_p) / (n_a + n_s), "precision": precision, "recall": recall,
            "f1": _f1(precision, recall)}


def alignment_counts(pred: Sequence[Iterable[tuple[int, int]]], sure: Sequence[Iterable[tuple[int, int]]],
                     possible: Sequence[Iterable[tuple[int, int]]]) -> list[list[int]]:
    """[|A∩S|, |A∩P|, |A|, |S|] of each sentence pair (P taken as P ∪ S): the per-item outcomes whose sums
    `alignment_scores` is made of."""
    _check_same_length(pred, sure, "alignment_scores")
    _check_same_length(possible, sure, "alignment_scores (possible vs sure)")
    rows = []
    for a, s, p in zip(pred, sure, possible, strict=True):
        a, s = set(a), set(s)
        p = set(p) | s
        rows.append([len(a & s), len(a & p), len(a), len(s)])
    return rows


def lowest_aer_layer(layers: Sequence[int], aer: Sequence[float | None]) -> int | None:
    """The layer with the lowest AER (None/NaN values skipped; None when there is none). Ties go to the shallower
    layer: the encoder stops at the highest layer needed, so it is the cheaper one to align with."""
    scored = [(float(a), layer) for layer, a in zip(layers, aer, strict=True) if a is not None and not math.isnan(a)]
    return min(scored)[1] if scored else None


def highest_accuracy_layer(layers: Sequence[int], accuracy: Sequence[float | None]) -> int | None:
    """The layer with the highest accuracy (None/NaN values skipped; None when there is none). Ties go to the
    shallower layer, as lowest_aer_layer's."""
    scored = [(-float(a), layer) for layer, a in zip(layers, accuracy, strict=True)
              if a is not None and not math.isnan(a)]
    return min(scored)[1] if scored else None


# --- aggregation over seeds and languages -------------------------------------------------------------

def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean and sample standard deviation (ddof=1) over seeds; std is 0.0 for a single run."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean_std: no values")
    mean = math.fsum(values) / len(values)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return {"mean": mean, "std": std, "n": len(values)}


def transfer_gap(per_language: Mapping[str, float], source: str) -> float:
    """Cross-lingual transfer gap: the source language's score minus the mean score of the other languages."""
    if source not in per_language:
        raise ValueError(f"transfer_gap: no score for the source language {source!r} (have {sorted(per_language)})")
    targets = [float(v) for lang, v in per_language.items() if lang != source]
    if not targets:
        raise ValueError(f"transfer_gap: no target language besides the source {source!r}")
    return float(per_language[source]) - math.fsum(targets) / len(targets)


# --- per-item outcomes (results.json "items": what the report's paired bootstrap resamples) ---------------
# Every metric above is a function of per-item sufficient statistics summed over the items, so a resample of the
# items (report/uncertainty.py) recomputes it exactly, corpus-level metrics included. A kind names the rows a task
# records per test item and how its metric is made from their column sums:
#   mean:  [x]                     mean of x (accuracy: 1/0 correct; QA: the question's F1 or EM, percent)
#   ratio: [correct, total]        Σcorrect / Σtotal (token accuracy of a sentence's tags)
#   f1:    [tp, fp, fn]            micro F1 2tp / (2tp + fp + fn) (spans; seqeval entities), 0 for 0/0
#   rank:  [rank, ...]             share of the ranks equal to 1 (retrieval accuracy@1, both directions of a pair)
#   aer:   [|A∩S|, |A∩P|, |A|, |S|] 1 − (|A∩S| + |A∩P|) / (|A| + |S|) (a sentence pair's alignment counts)
#   bleu / chrf: sacreBLEU's sentence statistics (BLEU: hyp/ref lengths and n-gram matches/totals; chrF: its
#          character and word n-gram counts); the corpus score from their sums, as sacreBLEU's --paired-bs does
ITEM_KINDS = ("mean", "ratio", "f1", "rank", "aer", "bleu", "chrf")


def _sacrebleu_metric(kind: str):
    from sacrebleu.metrics import BLEU, CHRF  # the same defaults the translation task reports with

    return BLEU() if kind == "bleu" else CHRF()


def item_statistics(kind: str, rows: Sequence[Sequence[float]]) -> np.ndarray:
    """The rows of one kind as an (items, statistics) array whose column sums give the metric
    (`metric_from_sums`); "rank" rows become [hits at 1, ranks]."""
    if kind not in ITEM_KINDS:
        raise ValueError(f"unknown item kind {kind!r} (kinds: {', '.join(ITEM_KINDS)})")
    if kind == "rank":
        ranks = np.asarray(rows, dtype=np.float64).reshape(len(rows), -1)
        return np.stack([(ranks == 1).sum(axis=1), np.full(len(ranks), ranks.shape[1])], axis=1).astype(np.float64)
    width = {"mean": 1, "ratio": 2, "f1": 3, "aer": 4}.get(kind)
    stats = np.asarray(rows, dtype=np.float64)
    if stats.ndim != 2 or (width is not None and stats.shape[1] != width):
        raise ValueError(f"{kind} items need rows of {width or 'the same number of'} numbers, got shape "
                         f"{stats.shape}")
    return stats


def metric_from_sums(kind: str, sums: np.ndarray, items: int | np.ndarray) -> np.ndarray:
    """The metric of `kind` from column sums of item statistics, `sums` of shape (..., statistics), over `items`
    items (per resample when an array); 0 where a ratio is 0/0, as the metrics above."""
    sums = np.asarray(sums, dtype=np.float64)

    def ratio(a, b):
        return np.divide(a, b, out=np.zeros(np.broadcast(a, b).shape), where=np.asarray(b) != 0)

    if kind == "mean":
        return ratio(sums[..., 0], np.asarray(items, dtype=np.float64))
    if kind in ("ratio", "rank"):
        return ratio(sums[..., 0], sums[..., 1])
    if kind == "f1":
        return ratio(2 * sums[..., 0], 2 * sums[..., 0] + sums[..., 1] + sums[..., 2])
    if kind == "aer":
        return 1.0 - ratio(sums[..., 0] + sums[..., 1], sums[..., 2] + sums[..., 3])
    if kind in ("bleu", "chrf"):
        scorer = _sacrebleu_metric(kind)
        flat = sums.reshape(-1, sums.shape[-1])
        scores = [scorer._compute_score_from_stats([int(round(v)) for v in row]).score for row in flat]
        return np.asarray(scores, dtype=np.float64).reshape(sums.shape[:-1])
    raise ValueError(f"unknown item kind {kind!r} (kinds: {', '.join(ITEM_KINDS)})")


def sentence_statistics(kind: str, hypotheses: Sequence[str], references: Sequence[str], *,
                        tokenize: str | None = None) -> list[list[int]]:
    """sacreBLEU's per-sentence statistics ("bleu" or "chrf") of one reference per hypothesis: the rows whose
    sums `metric_from_sums` turns into the corpus score sacreBLEU reports. `tokenize`: BLEU's tokenizer (e.g.
    "zh"; None: sacreBLEU's default), which the statistics depend on but the score from their sums does not."""
    if kind == "bleu" and tokenize is not None:
        from sacrebleu.metrics import BLEU

        scorer = BLEU(tokenize=tokenize)
    else:
        scorer = _sacrebleu_metric(kind)
    return [list(map(int, row)) for row in scorer._extract_corpus_statistics(list(hypotheses),
                                                                            [list(references)])]
