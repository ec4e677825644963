"""Metrics against hand-computed cases (the expected numbers are worked out in the comments)."""

import numpy as np
import pytest
import torch

from metaxlm.metrics import (
    accuracy,
    accuracy_at_1,
    alignment_scores,
    lowest_aer_layer,
    mean_std,
    normalize_answer,
    qa_tokens,
    seqeval_f1,
    span_f1,
    squad_em_f1,
    transfer_gap,
)


def test_accuracy():
    assert accuracy(["a", "b", "c", "a"], ["a", "b", "b", "b"]) == 0.5
    with pytest.raises(ValueError, match="3 predictions for 2"):
        accuracy([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="nothing to score"):
        accuracy([], [])


def test_accuracy_at_1_both_directions():
    sim = np.array([[0.9, 0.1, 0.0],
                    [0.8, 0.7, 0.1],   # row 1 prefers column 0: wrong
                    [0.0, 0.2, 0.5]])
    assert accuracy_at_1(sim) == pytest.approx(2 / 3)
    assert accuracy_at_1(torch.tensor(sim).T) == 1.0  # each column's best row is its own
    # extra columns are distractors: row 0 now prefers the distractor
    assert accuracy_at_1(np.array([[0.5, 0.1, 0.9], [0.0, 1.0, 0.2]])) == 0.5
    with pytest.raises(ValueError, match="m >= n"):
        accuracy_at_1(np.zeros((3, 2)))


def test_span_f1_exact_match_only():
    gold = [{(0, 4, "emph"), (5, 9, "literal")}, {(0, 3, "input")}]
    pred = [{(0, 4, "emph"), (5, 9, "emph")},  # right offsets, wrong label: no credit
            [(0, 3, "input"), (4, 6, "input")]]
    # correct 2, predicted 4, gold 3: P = 1/2, R = 2/3, F1 = 2·(1/2)(2/3)/(7/6) = 4/7
    scores = span_f1(pred, gold)
    assert scores == pytest.approx({"precision": 0.5, "recall": 2 / 3, "f1": 4 / 7})
    assert span_f1([set(), set()], gold) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    # off-by-one end offset is a miss
    assert span_f1([{(0, 5, "emph")}], [{(0, 4, "emph")}])["f1"] == 0.0


def test_seqeval_f1_entity_level():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "I-PER", "O", "O"], ["B-ORG", "B-LOC"]]
    # gold entities PER, LOC, ORG; predicted PER, ORG, LOC(wrong place): 2 of 3 either way
    assert seqeval_f1(pred, gold) == pytest.approx({"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3})
    # a partly matched entity is wrong, not 1/2 right
    assert seqeval_f1([["B-PER", "O"]], [["B-PER", "I-PER"]])["f1"] == 0.0
    # conlleval convention: I- after O starts an entity
    assert seqeval_f1([["O", "I-PER"]], [["O", "B-PER"]])["f1"] == 1.0
    with pytest.raises(ValueError, match="sentence 0 has 1 predicted tags for 2"):
        seqeval_f1([["O"]], [["O", "O"]])


def test_squad_normalization_is_the_official_v11_one():
    # lower, drop ASCII punctuation (the hyphen too, joining the words), drop a/an/the, collapse spaces
    assert normalize_answer("The  Quick, brown-fox!") == "quick brownfox"
    assert normalize_answer("an apple and the Theory") == "apple and theory"  # "theory" is not an article
    assert normalize_answer("«Berlin»") == "«berlin»"  # v1.1 knows only string.punctuation


def test_squad_em_f1_max_over_gold_answers_and_missing_predictions():
    references = {"q1": ["the cat", "a black cat"], "q2": ["Paris"], "q3": ["1990"]}
    predictions = {"q1": "black cat sat", "q2": "paris.", "extra": "ignored"}
    # q1: vs "cat" P=1/3 R=1 F1=1/2; vs "black cat" P=2/3 R=1 F1=4/5 -> max 0.8, EM 0
    # q2: EM 1, F1 1.  q3: no prediction -> 0 (it still counts in the total, like evaluate-v1.1.py)
    scores = squad_em_f1(predictions, references)
    assert scores["exact_match"] == pytest.approx(100 / 3)
    assert scores["f1"] == pytest.approx(100 * 1.8 / 3)
    with pytest.raises(ValueError, match="non-empty list"):
        squad_em_f1({"q": "x"}, {"q": []})


def test_mlqa_normalization_per_language():
    # Unicode punctuation goes for every language
    assert normalize_answer("«Berlin»", "de") == "berlin"
    assert normalize_answer("“U.S.” — policy", "en") == "us policy"
    # language-specific articles
    assert normalize_answer("Der Hund", "de") == "hund"
    assert normalize_answer("el gato", "es") == "gato"
    assert normalize_answer("những con mèo", "vi") == "con mèo"
    assert normalize_answer("الكتاب", "ar") == "كتاب"  # the official pattern removes every "ال"
    assert normalize_answer("the cat", "hi") == "the cat"  # no articles for hi, nor for languages MLQA lacks
    assert normalize_answer("the cat", "ru") == "the cat"
    # zh: mixed segmentation, each Chinese character a token, Latin runs split on whitespace
    assert qa_tokens("北京大学，在 Beijing city", "zh") == ["北", "京", "大", "学", "在", "beijing", "city"]


def test_mlqa_scores_differ_from_squad_where_they_should():
    refs = {"q": ["北京"]}
    # zh: pred 北京大学 shares 2 of 4 character tokens: P=1/2, R=1, F1=2/3; as SQuAD v1.1 one token, F1 0
    assert squad_em_f1({"q": "北京大学"}, refs, lang="zh") == pytest.approx({"exact_match": 0.0, "f1": 200 / 3})
    assert squad_em_f1({"q": "北京大学"}, refs) == {"exact_match": 0.0, "f1": 0.0}
    assert squad_em_f1({"q": "der Hund"}, {"q": ["Hund"]}, lang="de")["exact_match"] == 100.0
    assert squad_em_f1({"q": "der Hund"}, {"q": ["Hund"]})["exact_match"] == 0.0


def test_alignment_scores_sure_and_possible():
    # pair 1: S = {00, 11}, possible-only link 22; A = {00, 22, 33}: A∩S = 1, A∩P = 2 (P = S ∪ {22})
    # pair 2: S = {01}, A = {01}: A∩S = 1, A∩P = 1
    # corpus sums: |A∩S| = 2, |A∩P| = 3, |A| = 4, |S| = 3
    # AER = 1 − (2 + 3)/(4 + 3) = 2/7; precision = 3/4; recall = 2/3; F1 = 2·(3/4)(2/3)/(17/12) = 12/17
    pred = [{(0, 0), (2, 2), (3, 3)}, {(0, 1)}]
    sure = [{(0, 0), (1, 1)}, {(0, 1)}]
    possible_only = [{(2, 2)}, set()]
    expected = {"aer": 2 / 7, "precision": 3 / 4, "recall": 2 / 3, "f1": 12 / 17}
    assert alignment_scores(pred, sure, possible_only) == pytest.approx(expected)
    # P given as a superset of S gives the same numbers (P ⊇ S is enforced by the union)
    possible_full = [s | p for s, p in zip(sure, possible_only, strict=True)]
    assert alignment_scores(pred, sure, possible_full) == pytest.approx(expected)
    # corpus-level, not the mean of per-pair AERs (0.4 and 0.0 would average to 0.2)
    assert alignment_scores(pred[:1], sure[:1], possible_only[:1])["aer"] == pytest.approx(0.4)
    # a link that is only possible costs no recall and gains precision: perfect sure links give AER 0
    assert alignment_scores([{(0, 0), (1, 1)}], [{(0, 0)}], [{(1, 1)}])["aer"] == 0.0
    assert alignment_scores([set()], [{(0, 0)}], [set()]) == {"aer": 1.0, "precision": 0.0, "recall": 0.0,
                                                             "f1": 0.0}


def test_lowest_aer_layer_ties_go_to_the_shallower_layer():
    assert lowest_aer_layer([0, 1, 2, 3], [0.5, 0.2, 0.3, 0.2]) == 1
    assert lowest_aer_layer([3, 1], [0.2, 0.2]) == 1  # by layer number, whatever the order
    assert lowest_aer_layer([0, 1, 2], [None, float("nan"), 0.9]) == 2  # missing values are skipped
    assert lowest_aer_layer([0, 1], [None, float("nan")]) is None


def test_mean_std_and_transfer_gap():
    stats = mean_std([1, 2, 3, 4])
    assert stats["mean"] == 2.5 and stats["n"] == 4
    assert stats["std"] == pytest.approx((5 / 3) ** 0.5)  # sample std: squared deviations 5 over n−1 = 3
    assert mean_std([0.7]) == {"mean": 0.7, "std": 0.0, "n": 1}
    with pytest.raises(ValueError):
        mean_std([])
    assert transfer_gap({"en": 0.9, "de": 0.7, "fr": 0.8}, "en") == pytest.approx(0.15)
    with pytest.raises(ValueError, match="source language 'es'"):
        transfer_gap({"en": 0.9}, "es")
    with pytest.raises(ValueError, match="no target language"):
        transfer_gap({"en": 0.9}, "en")
