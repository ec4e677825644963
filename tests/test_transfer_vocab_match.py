"""transfer.vocab_match: the VocabMatch result, its counts and its JSON file."""

import pytest

from metaxlm.errors import DataError, MetaXLMError
from metaxlm.transfer.vocab_match import RULES, VocabMatch


def test_counts_list_every_rule():
    m = VocabMatch(sources=[[1], [], [2, 3]], rules=["exact", "fallback", "dict"])
    assert m.counts() == {"special": 0, "exact": 1, "normalized": 0, "dict": 1, "fallback": 1}
    assert list(m.counts()) == list(RULES) and len(m) == 3
    empty = VocabMatch(sources=[], rules=[])
    assert len(empty) == 0 and sum(empty.counts().values()) == 0


def test_invalid_matches_are_refused():
    with pytest.raises(MetaXLMError, match="2 source lists but 1 rules"):
        VocabMatch(sources=[[1], []], rules=["exact"])
    with pytest.raises(MetaXLMError, match=r"unknown rule\(s\) \['nope'\]"):
        VocabMatch(sources=[[1]], rules=["nope"])


def test_save_load(tmp_path):
    m = VocabMatch(sources=[[1], []], rules=["exact", "fallback"], target_pieces=["▁a", "b"], source_pieces=[["a"], []])
    m.save(tmp_path / "m.json")
    assert VocabMatch.load(tmp_path / "m.json") == m
    bare = VocabMatch(sources=[[1]], rules=["exact"])
    bare.save(tmp_path / "bare.json")
    assert VocabMatch.load(tmp_path / "bare.json") == bare
    (tmp_path / "bad.json").write_text('{"sources": [[1]], "rules": ["nope"]}')
    with pytest.raises(DataError, match="bad.json: .*unknown rule"):
        VocabMatch.load(tmp_path / "bad.json")
    (tmp_path / "notjson.json").write_text("{")
    with pytest.raises(DataError, match="notjson.json: not a vocabulary-match file"):
        VocabMatch.load(tmp_path / "notjson.json")
    with pytest.raises(DataError, match="missing.json: no such vocabulary-match file"):
        VocabMatch.load(tmp_path / "missing.json")
