"""Per-item outcomes (results.json `items`): for every task type and probe, the metric made from the summed rows
(metaxlm.metrics.metric_from_sums) is the score the evaluation records — per seed for fine-tuning, per layer for the
probes —, a reused finished run keeps its rows, and the records accept the shape and name what is wrong with a bad one.
That equality is what lets the report's paired bootstrap resample the items and recompute the recorded scores."""

import copy
import json
import random
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import WORDS
from transformers import AutoTokenizer, BertConfig, BertModel

from metaxlm.data.examples import (
    AlignmentSet,
    ClassificationExample,
    QAExample,
    SpanExample,
    TaggingExample,
    TranslationExample,
)
from metaxlm.errors import DataError
from metaxlm.finetune.spec import Hyperparameters, TaskSpec
from metaxlm.finetune.tasks import get_task
from metaxlm.metrics import accuracy_at_1, gold_ranks, item_statistics, metric_from_sums
from metaxlm.records import check_results

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def from_rows(kind: str, rows) -> float:
    return float(metric_from_sums(kind, item_statistics(kind, rows).sum(axis=0), len(rows)))


def assert_reproduces(found: dict, metric: str, score: float, n_items: int) -> None:
    kind, rows = found[metric]
    assert len(rows) == n_items
    assert from_rows(kind, rows) == pytest.approx(score, rel=1e-9, abs=1e-12), (metric, kind)
    assert json.loads(json.dumps(rows)) == rows  # plain JSON numbers


def hp(**kw) -> Hyperparameters:
    return Hyperparameters(**{"lr": 3e-3, "batch_size": 8, "max_steps": 3, "max_seq_len": 64, "warmup_ratio": 0.0,
                              **kw})


def words(lang: str, rng: random.Random, n: int) -> list[str]:
    return rng.choices(WORDS[lang], k=n)


# -- each task type: rows whose sums give `score` ------------------------------------------------------------------

@pytest.mark.parametrize("trial", range(3))
def test_classification_rows_give_the_accuracy(tokenizer, trial):
    rng = random.Random(trial)
    examples = [ClassificationExample(f"c{i}", " ".join(words("en", rng, 4)), rng.choice("abc")) for i in range(40)]
    predictions = [rng.choice("abc") for _ in examples]
    task = get_task("classification")(tokenizer, hp(), labels=["a", "b", "c"])
    found = task.item_rows(examples, predictions, metric="accuracy")
    assert_reproduces(found, "accuracy", task.score(examples, predictions, metric="accuracy"), len(examples))
    assert {row[0] for row in found["accuracy"][1]} <= {0, 1} and all(type(r[0]) is int for r in found["accuracy"][1])


def random_bio(rng: random.Random, n: int) -> list[str]:
    """BIO tags with everything seqeval has to decide: I- after O, I- of another type, B- inside an entity."""
    return [rng.choice(["O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC"]) for _ in range(n)]


@pytest.mark.parametrize("trial", range(4))
def test_tagging_rows_give_token_accuracy_and_seqeval_f1(tokenizer, trial):
    rng = random.Random(trial)
    examples, predictions = [], []
    for i in range(30):
        n = rng.randint(1, 9)
        examples.append(TaggingExample(f"t{i}", tuple(words("en", rng, n)), tuple(random_bio(rng, n))))
        predictions.append(random_bio(rng, n) if rng.random() < 0.7 else list(examples[-1].tags))
    task = get_task("tagging")(tokenizer, hp(), labels=["B-LOC", "B-PER", "I-LOC", "I-PER", "O"])
    for metric, kind in (("accuracy", "ratio"), ("seqeval_f1", "f1")):
        found = task.item_rows(examples, predictions, metric=metric)
        assert found[metric][0] == kind
        assert_reproduces(found, metric, task.score(examples, predictions, metric=metric), len(examples))
    # a sentence weighs by its words in the accuracy: its row is [correct, words]
    assert [row[1] for row in task.item_rows(examples, predictions, metric="accuracy")["accuracy"][1]] == \
        [len(ex.words) for ex in examples]


@pytest.mark.parametrize("trial", range(3))
def test_span_rows_give_the_span_f1(tokenizer, trial):
    rng = random.Random(trial)

    def spans() -> set:
        return {(a, a + rng.randint(1, 4), rng.choice("XY")) for a in rng.sample(range(20), rng.randint(0, 3))}

    examples = [SpanExample(f"s{i}", "x" * 30, tuple(spans())) for i in range(30)]
    predictions = [set(ex.spans) if rng.random() < 0.3 else spans() for ex in examples]
    task = get_task("spans")(tokenizer, hp())
    found = task.item_rows(examples, predictions, metric="span_f1")
    assert_reproduces(found, "span_f1", task.score(examples, predictions, metric="span_f1"), len(examples))
    # the score and the rows share metrics.span_counts: both against a count of their own
    correct = sum(len(p & set(ex.spans)) for p, ex in zip(predictions, examples, strict=True))
    direct = 2 * correct / (sum(map(len, predictions)) + sum(len(ex.spans) for ex in examples))
    assert from_rows("f1", found["span_f1"][1]) == pytest.approx(direct, rel=1e-12)


def qa_example(rng: random.Random, qid: str, answer_at: int, n_words: int = 60) -> QAExample:
    context_words = words("en", rng, n_words)
    context = " ".join(context_words)
    start = len(" ".join(context_words[:answer_at])) + (answer_at > 0)
    answer = " ".join(context_words[answer_at:answer_at + 2])
    return QAExample(qid, "where does the cat sleep?", context, ((answer, start), (context_words[answer_at], start)))


@pytest.mark.parametrize("normalization,lang", [("squad", None), ("mlqa", "de"), ("mlqa", "zh")])
def test_qa_rows_are_each_questions_score_over_its_windows(tokenizer, normalization, lang):
    """Contexts longer than a window: a question's answer is decoded from several features, and its row is the
    score squad_em_f1 averages for that question (percent)."""
    rng = random.Random(3)
    examples = [qa_example(rng, f"q{i}", rng.randrange(0, 55)) for i in range(12)]
    task = get_task("qa")(tokenizer, hp(max_seq_len=48, doc_stride=16, max_query_len=16, max_answer_len=4))
    task.normalization = normalization
    features = task.encode(examples, train=False)
    assert len(features) > 2 * len(examples)
    gen = torch.Generator().manual_seed(0)
    outputs = [tuple(torch.randn(len(f["input_ids"]), generator=gen).numpy() for _ in range(2)) for f in features]
    predictions = task.decode(examples, features, outputs)
    predictions[examples[0].id] = examples[0].answers[0][0]  # one exact answer, one question without an answer
    del predictions[examples[1].id]
    for metric in ("f1", "exact_match"):
        found = task.item_rows(examples, predictions, metric=metric, lang=lang)
        assert_reproduces(found, metric, task.score(examples, predictions, metric=metric, lang=lang), len(examples))
        rows = [row[0] for row in found[metric][1]]
        assert rows[0] == 100 and type(rows[0]) is int and rows[1] == 0  # percent; a missing answer scores 0


@pytest.mark.parametrize("lang,direction", [("de", "forward"), ("zh", "forward"), ("zh", "reverse")])
def test_translation_rows_give_sacrebleus_bleu_and_chrf(tokenizer, lang, direction):
    """Both scores, with the BLEU tokenizer of the language translated into (zh: sacreBLEU's "zh")."""
    rng = random.Random(4)
    target = "en" if direction == "reverse" else lang
    sep = "" if target == "zh" else " "
    refs = [sep.join(words(target, rng, rng.randint(3, 10))) for _ in range(25)]
    hyps = [ref if rng.random() < 0.2 else sep.join(words(target, rng, rng.randint(3, 10))) for ref in refs]
    examples = [TranslationExample(f"m{i}", "source", ref) for i, ref in enumerate(refs)]
    task = get_task("translation")(tokenizer, hp())
    task.spec = SimpleNamespace(direction=direction, source="en", bleu_tokenize=None)
    found = task.item_rows(examples, hyps, metric="bleu", lang=lang)
    report = task.report(examples, hyps, lang=lang)
    assert set(found) == {"bleu", "chrf"} and report["bleu"] > 0
    for metric in ("bleu", "chrf"):
        assert found[metric][0] == metric
        assert_reproduces(found, metric, report[metric], len(examples))


# -- through the scenarios: per seed, kept by a reused run ---------------------------------------------------------

def write_jsonl(path: Path, examples) -> None:
    path.write_text("".join(json.dumps({"id": ex.id, "text": ex.text, "label": ex.label}) + "\n" for ex in examples),
                    encoding="utf-8")


@pytest.fixture()
def toy_task(tmp_path) -> TaskSpec:
    rng = random.Random(5)
    train = [ClassificationExample(f"tr{i // 4}#{i}", " ".join(words("en", rng, 6)) + (" house" if i % 2 else " cat"),
                                   "a" if i % 2 else "b") for i in range(16)]
    write_jsonl(tmp_path / "train.en.jsonl", train)
    for lang in ("en", "de"):
        write_jsonl(tmp_path / f"test.{lang}.jsonl", [ClassificationExample(
            f"te{i}", " ".join(words(lang, rng, 6)) + (" house" if i % 2 else " cat"), "a" if i % 2 else "b")
            for i in range(14)])
    return TaskSpec(name="toy", type="classification", format="demo_module", metric="accuracy", languages=["en", "de"],
                    train=str(tmp_path / "train.{lang}.jsonl"), test=str(tmp_path / "test.{lang}.jsonl"),
                    max_test_items=11, seeds=[0, 1], hyperparameters=hp(max_steps=6, lr=1e-2))


def assert_entry_items_give_the_runs(entry: dict) -> None:
    items = entry["items"]
    assert set(items) == {entry["metric"]}
    found = items[entry["metric"]]
    assert found["kind"] == "mean" and set(found["per_language"]) == set(entry["per_language"])
    for lang, per in found["per_language"].items():
        assert per["seeds"] == entry["seeds"] and len(per["rows"]) == len(per["seeds"])
        assert {len(rows) for rows in per["rows"]} == {11}  # every test item (max_test_items), each seed
        assert [from_rows(found["kind"], rows) for rows in per["rows"]] == \
            pytest.approx(entry["per_language"][lang]["runs"], rel=1e-12)


def test_a_task_entry_has_each_seeds_rows_and_a_reused_run_keeps_them(toy_task, tiny_bert_dir, tokenizer_dir,
                                                                       tmp_path, monkeypatch):
    import metaxlm.finetune.runner as runner
    from metaxlm.finetune.run_store import recorded_task_entry

    kw = {"scenario": "zero_shot", "tokenizer_dir": tokenizer_dir, "progress": False, "resume_key": "k"}
    archive = tmp_path / "archive"
    entry = runner.run_task(toy_task, tiny_bert_dir, tmp_path / "out", finished_runs=archive, **kw)
    assert_entry_items_give_the_runs(entry)
    runs = entry["per_language"]["en"]["runs"]
    assert runs[0] != runs[1]  # the seeds score differently: rows of the wrong seed would show
    check_results({"model_name": "m", "tasks": {"toy": entry}}, Path("results.json"))

    def no_training(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(runner, "finetune", no_training)
    reused = runner.run_task(toy_task, tiny_bert_dir, tmp_path / "out", **kw)  # from the run's own records
    elsewhere = runner.run_task(toy_task, tiny_bert_dir, tmp_path / "fresh", finished_runs=archive, **kw)
    recorded = recorded_task_entry(toy_task, archive, scenario="zero_shot", seeds=[0, 1])
    for again in (reused, elsewhere, recorded):
        assert again["items"] == entry["items"]


def test_a_run_recorded_before_items_leaves_its_seed_out():
    from metaxlm.finetune.summaries import item_outcomes

    rows = {"en": {"accuracy": {"kind": "mean", "rows": [[1], [0]]}}}
    found = item_outcomes([{"seed": 0, "items": rows}, {"seed": 1}, {"seed": 2, "items": rows}])
    assert found == {"accuracy": {"kind": "mean", "per_language": {"en": {"seeds": [0, 2],
                                                                          "rows": [[[1], [0]], [[1], [0]]]}}}}
    assert item_outcomes([{"seed": 0}]) == {}


def test_a_task_type_without_rows_of_its_metric_is_named(tokenizer):
    from metaxlm.errors import MetaXLMError
    from metaxlm.finetune.summaries import run_items

    task = get_task("classification")(tokenizer, hp(), labels=["a"])
    task.item_rows = lambda examples, predictions, **kw: {"other": ("mean", [[1]])}
    with pytest.raises(MetaXLMError, match="item_rows gives no rows of the metric 'accuracy'"):
        run_items(task, {"en": [ClassificationExample("x", "t", "a")]}, {"en": ["a"]}, "accuracy")


# -- the probes: per layer ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bert_tokenizer(tokenizer_dir):
    return AutoTokenizer.from_pretrained(str(tokenizer_dir))


@pytest.fixture(scope="module")
def encoder(bert_tokenizer):
    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=len(bert_tokenizer), hidden_size=32, num_hidden_layers=3,
                                num_attention_heads=2, intermediate_size=64,
                                pad_token_id=bert_tokenizer.pad_token_id)).eval()


def test_gold_ranks_break_ties_as_accuracy_at_1_does():
    sim = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.5, 0.5, 0.5]])
    assert gold_ranks(sim) == [1, 2, 3]  # an equal column before the gold one ranks above it (argmax: the lowest)
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        sim = torch.randint(0, 3, (7, 9), generator=gen).float()  # many ties
        ranks = gold_ranks(sim)
        # the gold column's place when the columns are sorted by similarity, then by index
        assert ranks == [1 + sorted(range(9), key=lambda j, i=i: (-sim[i, j], j)).index(i) for i in range(7)]
        assert sum(r == 1 for r in ranks) / 7 == accuracy_at_1(sim)


def test_retrieval_rows_give_each_layers_mean(encoder, bert_tokenizer, tmp_path):
    from metaxlm.config import EvalConfig, RetrievalEvalSpec
    from metaxlm.evaluation.recipe import evaluate_retrieval

    rng = random.Random(6)
    for lang in ("de", "ru"):  # pivot<TAB>foreign, with duplicate lines: tied similarities
        lines = [(" ".join(words("en", rng, 3)), " ".join(words(lang, rng, 3))) for _ in range(9)]
        lines += lines[:3]
        (tmp_path / f"{lang}.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in lines), encoding="utf-8")
    spec = RetrievalEvalSpec(path=str(tmp_path / "{lang}.tsv"))
    result = evaluate_retrieval(encoder, bert_tokenizer, spec, ["en", "de", "ru"], "en",
                                EvalConfig(precision="fp32", layers=[0, 2, 3]), False)
    items = result["items"]
    assert items["kind"] == "rank" and set(items["per_language"]) == {"de", "ru"}
    for lang, per in items["per_language"].items():
        assert "ranks" not in result["per_language"][lang]
        assert per["layers"] == result["layers"] == [0, 2, 3] and len(per["rows"]) == 3
        for k, rows in enumerate(per["rows"]):  # the test part: 12 pairs, the first ceil(0.3 · 12) = 4 are dev
            assert len(rows) == 8 and all(len(row) == 2 and min(row) >= 1 for row in rows)
            assert from_rows("rank", rows) == pytest.approx(result["per_language"][lang]["mean"][k], rel=1e-12)
            assert sum(r[0] == 1 for r in rows) / 8 == result["per_language"][lang]["src2tgt"][k]
    check_results({"model_name": "m", "retrieval": {"toy": json.loads(json.dumps(result))}}, Path("results.json"))


def gold_set() -> AlignmentSet:
    rng = random.Random(7)
    src = [words("de", rng, rng.randint(2, 6)) for _ in range(10)]
    tgt = [words("en", rng, rng.randint(2, 6)) for _ in range(10)]
    sure = [{(i, i) for i in range(min(len(s), len(t)))} for s, t in zip(src, tgt, strict=True)]
    return AlignmentSet(src, tgt, sure, [s | {(0, 1)} for s in sure])


@pytest.mark.parametrize("dev_fraction", [0.3, 0.0])
def test_alignment_rows_are_the_test_pairs_and_give_each_layers_aer(encoder, bert_tokenizer, dev_fraction):
    from metaxlm.data.examples import dev_test_split
    from metaxlm.features.alignment import WordAligner, alignment_dev_test

    aset = gold_set()
    result = alignment_dev_test(encoder, bert_tokenizer, aset, dev_fraction=dev_fraction, method="argmax",
                                precision="fp32")
    items = result["items"]
    assert items["kind"] == "aer" and items["layers"] == result["layers"] == [0, 1, 2, 3]
    # the scores and the rows share metrics.alignment_counts: both against AER counted here, on the test pairs
    links = WordAligner(encoder, bert_tokenizer, method="argmax", precision="fp32").align_layers(aset.src, aset.tgt)
    test = dev_test_split(len(aset), dev_fraction)[1]
    for k, rows in enumerate(items["rows"]):
        assert len(rows) == result["split"]["test_pairs"] == len(test) == (7 if dev_fraction else 10)
        assert from_rows("aer", rows) == pytest.approx(result["test"]["aer"][k], rel=1e-12, abs=1e-12)
        a = [links[result["layers"][k]][i] for i in test]
        hits = sum(len(x & aset.sure[i]) + len(x & aset.possible[i]) for x, i in zip(a, test, strict=True))
        direct = 1 - hits / (sum(map(len, a)) + sum(len(aset.sure[i]) for i in test))
        assert from_rows("aer", rows) == pytest.approx(direct, rel=1e-12, abs=1e-12)
    check_results({"model_name": "m", "alignment": {"toy": {"method": "argmax", "pairs": 10, **result}}},
                  Path("results.json"))


# -- the records -------------------------------------------------------------------------------------------------

RESULTS = {"model_name": "m",
           "tasks": {"t": {"metric": "accuracy", "per_language": {"de": {"mean": 0.75}}, "items": {"accuracy": {
               "kind": "mean", "per_language": {"de": {"seeds": [0, 1], "rows": [[[1], [0]], [[1], [1]]]}}}}}},
           "retrieval": {"r": {"layers": [1, 2], "average": [0.5, 0.75], "items": {"kind": "rank", "per_language": {
               "de": {"layers": [1, 2], "rows": [[[1, 2], [3, 1]], [[1, 1], [2, 1]]]}}}}},
           "alignment": {"a": {"layers": [1, 2], "split": {"test_pairs": 2}, "test": {"aer": [0.2, 0.4]},
                               "chosen_layer": 1, "chosen_on": "fixed default", "items": {
                                   "kind": "aer", "layers": [1, 2], "rows": [[[1, 1, 2, 2], [3, 3, 3, 4]],
                                                                             [[0, 1, 2, 2], [2, 2, 3, 4]]]}}}}


def test_records_accept_items_and_files_without_them():
    check_results(RESULTS, Path("results.json"))
    old = copy.deepcopy(RESULTS)
    for section in ("tasks", "retrieval", "alignment"):
        for entry in old[section].values():
            del entry["items"]
    check_results(old, Path("results.json"))


def task_items(d):
    return d["tasks"]["t"]["items"]["accuracy"]["per_language"]["de"]


@pytest.mark.parametrize("tamper,problem", [
    (lambda d: task_items(d)["rows"][1].append([1]), "tasks.t.items.accuracy.per_language.de.rows: the seeds have 2 "
                                                     "and 3 test items"),
    (lambda d: task_items(d)["seeds"].pop(), "rows: 2 lists of rows for 1 seeds"),
    (lambda d: task_items(d)["rows"][0][1].append(1), "de.rows[0]: rows of 1 and 2 numbers"),
    (lambda d: task_items(d)["rows"].__setitem__(0, [[1, 0], [0, 1]]), "mean items need rows of 1 numbers"),
    (lambda d: task_items(d)["rows"][0][0].__setitem__(0, "1"), "rows.0.0.0: Input should be a valid number"),
    (lambda d: d["tasks"]["t"]["items"]["accuracy"].update(kind="median"), "unknown item kind 'median'"),
    (lambda d: d["tasks"]["t"]["items"].update(f1=d["tasks"]["t"]["items"].pop("accuracy")),
     "items: no rows of the task's metric 'accuracy'"),
    (lambda d: d["tasks"]["t"]["items"]["accuracy"]["per_language"].update(fr=task_items(d)),
     "rows for fr, which per_language has no score of"),
    (lambda d: d["retrieval"]["r"]["items"]["per_language"]["de"].update(layers=[1, 3]),
     "retrieval.r.items.per_language.de.layers: [1, 3], not the set's layers [1, 2]"),
    (lambda d: d["retrieval"]["r"]["items"]["per_language"]["de"]["rows"].pop(), "rows: has 1 values for 2 layers"),
    (lambda d: d["retrieval"]["r"]["items"].update(kind="aer"), "retrieval.r.items.kind: Input should be 'rank'"),
    (lambda d: d["alignment"]["a"]["items"]["rows"][1].pop(), "alignment.a.items.rows: the layers have 1 and 2 pairs"),
    (lambda d: [row.pop() for row in d["alignment"]["a"]["items"]["rows"][0]], "aer items need rows of 4 numbers"),
    (lambda d: d["alignment"]["a"]["split"].update(test_pairs=3), "2 pairs per layer, but the test part has 3"),
])
def test_records_name_what_is_wrong_with_items(tamper, problem):
    bad = copy.deepcopy(RESULTS)
    tamper(bad)
    with pytest.raises(DataError, match="results.json: .*" + re.escape(problem)):
        check_results(bad, Path("results.json"))
