"""transfer.coverage: per-rule and per-language coverage of a vocabulary match, JSON + Markdown."""

import json
from collections import Counter

import pytest
from transformers import BertTokenizer

from metaxlm.errors import MetaXLMError
from metaxlm.transfer.coverage import coverage_markdown, coverage_report, write_coverage_report
from metaxlm.transfer.vocab_match import VocabMatch

MATCH = VocabMatch(sources=[[0], [5], [6], [7, 8], [], []],
                   rules=["special", "exact", "normalized", "dict", "fallback", "fallback"],
                   target_pieces=["<s>", "▁a", "b", "▁c", "▁d", "e"],
                   source_pieces=[["[CLS]"], ["a"], ["##b"], ["x", "y"], [], []])


def test_coverage_report_hand_computed(tmp_path):
    counts = {"xx": {1: 6, 2: 2, 4: 2, 5: 0}, "yy": Counter({"▁c": 3, "e": 1, "<s>": 4})}
    r = coverage_report(MATCH, None, counts)
    assert r["vocab_size"] == 6
    assert {k: v["types"] for k, v in r["rules"].items()} == {
        "special": 1, "exact": 1, "normalized": 1, "dict": 1, "fallback": 2}
    assert r["rules"]["fallback"]["share"] == pytest.approx(2 / 6)
    xx = r["languages"]["xx"]
    assert (xx["types"], xx["tokens"]) == (3, 10)  # id 5 has count 0: not a type of xx
    assert xx["rules"]["exact"] == {"types": 1, "type_share": pytest.approx(1 / 3), "tokens": 6,
                                    "token_share": pytest.approx(0.6)}
    assert xx["rules"]["fallback"]["type_share"] == pytest.approx(1 / 3)
    assert xx["rules"]["fallback"]["token_share"] == pytest.approx(0.2)
    assert xx["rules"]["dict"]["tokens"] == 0
    yy = r["languages"]["yy"]
    assert (yy["types"], yy["tokens"]) == (3, 8)
    assert yy["rules"]["special"]["token_share"] == pytest.approx(0.5)
    assert yy["rules"]["dict"]["token_share"] == pytest.approx(3 / 8)
    assert r["examples"] == {"exact": ["▁a -> a"], "normalized": ["b -> ##b"], "dict": ["▁c -> x, y"],
                             "fallback": ["▁d", "e"]}  # specials are not examples

    md = write_coverage_report(r, tmp_path / "cov.json")
    assert json.loads((tmp_path / "cov.json").read_text()) == json.loads(json.dumps(r))
    text = md.read_text()
    assert md.name == "cov.md" and text == coverage_markdown(r)
    assert "| fallback | 2 | 33.3% |" in text
    assert "| xx | 3 | 10 | 0.0% / 0.0% | 33.3% / 60.0% |" in text
    assert "- **dict**: `▁c -> x, y`" in text

    with pytest.raises(MetaXLMError, match="not a target id"):
        coverage_report(MATCH, None, {"zz": {9: 1}})
    with pytest.raises(MetaXLMError, match="'▁zz' is not a target id or piece"):
        coverage_report(MATCH, None, {"zz": {"▁zz": 1}})


def test_degenerate_reports():
    silent = coverage_report(MATCH, None, {"xx": {1: 0}})["languages"]["xx"]  # a language with no tokens
    assert (silent["types"], silent["tokens"]) == (0, 0)
    assert all(r["type_share"] == 0.0 and r["token_share"] == 0.0 for r in silent["rules"].values())

    bare = VocabMatch(sources=[[], [1]], rules=["fallback", "exact"])  # no pieces kept: no examples
    r = coverage_report(bare)
    assert "examples" not in r and "languages" not in r
    assert "## Per language" not in coverage_markdown(r) and "## Examples" not in coverage_markdown(r)

    tok = BertTokenizer(vocab={"[UNK]": 0, "a": 1})  # the pieces then come from the tokenizer
    assert coverage_report(bare, tok)["examples"] == {"fallback": ["[UNK]"], "exact": ["a -> 1"]}

    empty = coverage_report(VocabMatch(sources=[], rules=[]))
    assert empty["vocab_size"] == 0 and all(r["share"] == 0.0 for r in empty["rules"].values())
