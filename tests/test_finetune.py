"""Fine-tuning: task features (first sub-words, char spans <-> BIO, QA doc stride and n-best decoding), the
training loop (overfits, deterministic), code-switched batches, scenarios and their results entries."""

import json
import math
import random

import numpy as np
import pytest
import torch
import transformers
from conftest import WORDS

from metaxlm.data.examples import ClassificationExample, QAExample, SpanExample, TaggingExample
from metaxlm.data.padding import IGNORE
from metaxlm.errors import ConfigError, MetaXLMError
from metaxlm.finetune.inference import predict_outputs
from metaxlm.finetune.models import load_model
from metaxlm.finetune.runner import run_task
from metaxlm.finetune.spec import TASK_CONFIG_DIR, Hyperparameters, TaskSpec, load_task_spec
from metaxlm.finetune.summaries import summarize
from metaxlm.finetune.task_data import code_switched_items, split_by_document
from metaxlm.finetune.tasks import get_task
from metaxlm.finetune.tasks.qa import best_span
from metaxlm.finetune.tasks.spans import bio_roundtrip_f1, bio_to_spans, spans_to_bio, token_offsets
from metaxlm.finetune.trainer import encode_items, finetune, length_grouped_batches, predict
from metaxlm.models.new_parameters import new_parameter_names

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir):
    return tiny_bert_dir  # tests/conftest.py


def hp(**kw) -> Hyperparameters:
    return Hyperparameters(**{"lr": 3e-3, "batch_size": 8, "max_steps": 60, "max_seq_len": 64, "warmup_ratio": 0.0,
                              **kw})


def sentence(lang: str, rng: random.Random, n: int = 6) -> str:
    return ("" if lang == "zh" else " ").join(rng.choices(WORDS[lang], k=n))


# -- features ----------------------------------------------------------------------------------------------

def test_tagging_labels_on_first_subwords(tokenizer):
    words = ("the", "windowsill", "schläft", "окна", "房子很小")
    task = get_task("tagging")(tokenizer, hp())
    example = TaggingExample("s1", words, ("DET", "NOUN", "VERB", "NOUN", "X"))
    task.fit_labels([example])
    (feature,) = task.encode([example], train=True)
    word_ids, labels = feature["word_ids"], feature["labels"]
    assert len(word_ids) > len(words) + 2  # some words are split into several sub-words
    previous = None
    for word, label in zip(word_ids, labels, strict=True):
        if word is None or word == previous:
            assert label == IGNORE
        else:
            assert task.labels[label] == example.tags[word]
        previous = word
    assert sum(label != IGNORE for label in labels) == len(words)
    # decoding reads each word's first sub-word: logits favouring the gold tags give the gold tags back
    logits = np.zeros((len(labels), len(task.labels)), dtype=np.float32)
    for position, label in enumerate(labels):
        if label != IGNORE:
            logits[position, label] = 5.0
    assert task.decode([example], [feature], [(logits,)]) == [list(example.tags)]


def test_char_spans_bio_roundtrip_without_spaces(tokenizer):
    text = "房子很小猫睡在开着的窗户旁边的红椅子上"
    enc = tokenizer([text], return_offsets_mapping=True)
    offsets = token_offsets(enc, 0)
    pieces = [o for o in offsets if o is not None]
    assert len(pieces) >= 4
    # spans on sub-word boundaries (pieces 3-4 and 6; pieces 0-1, a lone "▁" and the first character, share offsets)
    gold = {(pieces[3][0], pieces[4][1], "menuitem"), (pieces[6][0], pieces[6][1], "emph")}
    tags = spans_to_bio(offsets, sorted(gold))
    assert tags[0] is None and tags[-1] is None  # special tokens
    assert [t for t in tags if t and t != "O"] == ["B-menuitem", "I-menuitem", "B-emph"]
    assert bio_to_spans(offsets, tags) == gold
    example = SpanExample("p#1", text, tuple(sorted(gold)))
    assert bio_roundtrip_f1(tokenizer, [example]) == 1.0
    # a boundary inside a token cannot be kept: the span grows to the token's edges
    wide = next(p for p in pieces if p[1] - p[0] >= 2)
    inner = (wide[0], wide[0] + 1, "emph")
    assert bio_to_spans(offsets, spans_to_bio(offsets, [inner])) == {(wide[0], wide[1], "emph")}
    assert bio_roundtrip_f1(tokenizer, [SpanExample("p#2", text, (inner,))]) == 0.0


def test_bio_decoding_rules():
    offsets = [None, (0, 2), (2, 4), (4, 6), (6, 8), (8, 10), None]
    tags = [None, "I-a", "I-a", "O", "B-b", "I-a", None]  # I- without B- starts a span; a label change too
    assert bio_to_spans(offsets, tags) == {(0, 4, "a"), (6, 8, "b"), (8, 10, "a")}
    assert bio_to_spans(offsets, [None, "B-a", "B-a", "O", "O", "O", None]) == {(0, 2, "a"), (2, 4, "a")}


def qa_example(rng: random.Random, qid: str, answer_word_index: int, n_words: int = 80) -> QAExample:
    words = rng.choices(WORDS["en"], k=n_words)
    words[answer_word_index] = "window"
    words[answer_word_index + 1] = "chair"
    context = " ".join(words)
    start = len(" ".join(words[:answer_word_index])) + (answer_word_index > 0)
    assert context[start:start + len("window chair")] == "window chair"
    return QAExample(qid, "where does the cat sleep?", context, (("window chair", start),), title="t")


def test_qa_doc_stride_features_map_answers(tokenizer):
    rng = random.Random(0)
    examples = [qa_example(rng, f"q{i}", i) for i in (0, 30, 60, 77)]
    task = get_task("qa")(tokenizer, hp(max_seq_len=48, doc_stride=16, max_query_len=16))
    features = task.encode(examples, train=True)
    assert len(features) > 2 * len(examples)  # long contexts overflow into several windows
    found = set()
    for feature in features:
        assert len(feature["input_ids"]) <= 48
        ex = examples[feature["example"]]
        s, e = feature["start_positions"], feature["end_positions"]
        if (s, e) == (0, 0):
            continue  # the answer is not (completely) in this window
        offsets = feature["offsets"]
        assert ex.context[offsets[s][0]:offsets[e][1]] == "window chair"
        found.add(feature["example"])
    assert found == set(range(len(examples)))  # every answer is inside some window


def test_qa_nbest_decoding_recovers_gold_span(tokenizer):
    rng = random.Random(1)
    examples = [qa_example(rng, "q0", 50), qa_example(rng, "q1", 5)]
    task = get_task("qa")(tokenizer, hp(max_seq_len=48, doc_stride=16, max_query_len=16, max_answer_len=5))
    train_features = task.encode(examples, train=True)
    outputs = []
    for feature in train_features:
        n = len(feature["input_ids"])
        start, end = np.zeros(n, np.float32), np.zeros(n, np.float32)
        if feature["start_positions"]:
            start[feature["start_positions"]] = 10.0
            end[feature["end_positions"]] = 10.0
        else:  # in windows without the answer: a higher-scoring span longer than max_answer_len
            first = next(i for i, o in enumerate(feature["offsets"]) if o is not None)
            start[first], end[first + 10] = 12.0, 12.0
        # more invalid candidates: a start with only hopeless ends, an end on a question token
        start[n - 2], end[n - 2:], end[1] = 30.0, -50.0, 30.0
        outputs.append((start, end))
    predictions = task.decode(examples, train_features, outputs)
    assert predictions == {"q0": "window chair", "q1": "window chair"}
    assert best_span(np.array([0, 9, 0, 0]), np.array([0, 0, 0, 9.0]), [None, (0, 1), (2, 3), (4, 5)],
                     n_best=4, max_answer_len=2) is not None
    assert best_span(np.array([0, 9, 0, 0]), np.array([0, 0, 0, 9.0]), [None, (0, 1), (2, 3), (4, 5)],
                     n_best=1, max_answer_len=2) is None  # the only candidates are too long apart


# -- training -----------------------------------------------------------------------------------------------

def toy_classification(n: int, seed: int = 0) -> list[ClassificationExample]:
    """Label = the language of the sentence: learnable in a few dozen steps."""
    rng = random.Random(seed)
    langs = ["en", "de", "ru"]
    return [ClassificationExample(f"x{i}", sentence(lang, rng), lang) for i in range(n)
            for lang in [langs[i % 3]]]


def test_training_overfits_a_tiny_dataset(tokenizer, model_dir):
    data = toy_classification(24)
    task = get_task("classification")(tokenizer, hp())
    task.fit_labels(data)
    # a fixed start of the new head, not whatever an earlier test left in the global RNG (the property is that the
    # loop can overfit: from seed 0's start it stops at 2/3 at this lr, from seeds 1-3 it reaches 100% or 92%)
    transformers.set_seed(1)
    model = load_model(task, model_dir)
    before = predict(model, task, data, task.hp)
    losses: list[float] = []
    finetune(model, task, data, task.hp, seed=0, progress=False, history=losses)
    after = predict(model, task, data, task.hp)
    gold = [ex.label for ex in data]
    assert len(losses) == 60
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
    assert task.score(data, after, metric="accuracy") == 1.0
    assert task.score(data, after, metric="accuracy") > task.score(data, before, metric="accuracy")
    assert sum(p == g for p, g in zip(after, gold, strict=True)) == len(data)


def test_a_classification_head_is_trained_with_cross_entropy_never_as_a_regression(tokenizer, model_dir):
    """transformers takes a head of one label for regression (an MSE on the class ids: on torch 2.13 it trains, on
    torch 2.11 it fails in backward): the task names its problem, and a training set of one label is refused."""
    data = toy_classification(6)
    task = get_task("classification")(tokenizer, hp())
    task.fit_labels(data)
    assert load_model(task, model_dir).config.problem_type == "single_label_classification"
    one_label = [ex for ex in data if ex.label == "de"]
    with pytest.raises(MetaXLMError, match="every training example has the label 'de'; a classifier needs two"):
        get_task("classification")(tokenizer, hp()).fit_labels(one_label)


def test_training_is_deterministic_given_the_seed(tokenizer, model_dir):
    data = toy_classification(12)

    def run(seed: int):
        task = get_task("classification")(tokenizer, hp(max_steps=6))
        task.fit_labels(data)
        transformers.set_seed(seed)
        model = load_model(task, model_dir)
        losses: list[float] = []
        finetune(model, task, data, task.hp, seed=seed, progress=False, history=losses)
        logits = predict_outputs(model, task, task.encode(data, train=False), task.hp)
        return losses, np.stack([out[0] for out in logits])

    losses_a, logits_a = run(3)
    losses_b, logits_b = run(3)
    losses_c, _ = run(4)
    assert losses_a == losses_b
    assert np.array_equal(logits_a, logits_b)
    assert losses_a != losses_c


def test_predictions_do_not_depend_on_the_inference_batches(tokenizer, model_dir):
    """eval_batch_tokens only cuts the length-sorted features into other batches: the same outputs, each back at its
    feature (tagging: per-token outputs cut to each feature's own length)."""
    data = [TaggingExample(f"t{i}", tuple(WORDS["en"][i % 7: i % 7 + 1 + i % 9]),
                           tuple("OX"[k % 2] for k in range(1 + i % 9)))
            for i in range(23)]
    task = get_task("tagging")(tokenizer, hp())
    task.fit_labels(data)
    transformers.set_seed(0)
    model = load_model(task, model_dir).eval()
    features = task.encode(data, train=False)
    outputs = {}
    for size, tokens in ((64, None), (5, None), (64, 24), (64, 1)):
        outputs[size, tokens] = predict_outputs(model, task, features,
                                                task.hp.model_copy(update={"eval_batch_size": size,
                                                                           "eval_batch_tokens": tokens}))
    reference = outputs[64, None]
    for got in outputs.values():
        for feature, (a,), (b,) in zip(features, got, reference, strict=True):
            assert a.shape[0] == len(feature["input_ids"])
            np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)


def test_the_new_head_learns_at_its_own_scale(tokenizer, model_dir, monkeypatch):
    """hyperparameters.head_lr_scale: the weights the checkpoint lacks (classifier, pooler) get lr × scale, the
    encoder the lr itself; the optimizer's groups say so."""
    from metaxlm.finetune import trainer

    data = toy_classification(12)
    task = get_task("classification")(tokenizer, hp(max_steps=2, head_lr_scale=10.0, warmup_ratio=0.0))
    task.fit_labels(data)
    model = load_model(task, model_dir)
    assert {"classifier.weight", "classifier.bias"} <= new_parameter_names(model)
    assert not any(name.startswith("bert.encoder.") for name in new_parameter_names(model))
    made = []
    original = trainer.adamw
    monkeypatch.setattr(trainer, "adamw", lambda *a, **k: made.append(original(*a, **k)) or made[-1])
    finetune(model, task, data, task.hp, seed=0, progress=False)
    names = {id(p): n for n, p in model.named_parameters()}
    by_lr = {}
    for group in made[0].param_groups:
        # the compact embedding trained during fine-tuning (embedding_rows: used) is no parameter of the model after
        by_lr.setdefault(group["initial_lr"], set()).update(names.get(id(p), "compact word embeddings")
                                                            for p in group["params"])
    assert set(by_lr) == {task.hp.lr, task.hp.lr * 10}
    assert by_lr[task.hp.lr * 10] == new_parameter_names(model) & set(names.values())


def test_model_loading_is_quiet_and_checks_the_encoder(tokenizer, model_dir, tmp_path, capfd):
    task = get_task("spans")(tokenizer, hp(), labels=["O", "B-x", "I-x"])
    model = load_model(task, model_dir)
    assert model.config.num_labels == 3
    captured = capfd.readouterr()
    assert "LOAD REPORT" not in captured.out + captured.err
    # a model that already has a head of another size gets a new head on the same encoder
    model.save_pretrained(tmp_path / "tagger")
    task5 = get_task("spans")(tokenizer, hp(), labels=["O", "B-x", "I-x", "B-y", "I-y"])
    retagged = load_model(task5, tmp_path / "tagger")
    assert retagged.config.num_labels == 5
    assert torch.equal(retagged.bert.encoder.layer[0].output.dense.weight,
                       model.bert.encoder.layer[0].output.dense.weight)
    # an encoder of another architecture is not silently re-initialized
    other = transformers.RobertaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=64)
    transformers.RobertaForMaskedLM(other).save_pretrained(tmp_path / "roberta")
    (tmp_path / "roberta" / "config.json").write_text(json.dumps(
        {**json.loads((tmp_path / "roberta" / "config.json").read_text()), "model_type": "bert",
         "architectures": ["BertForMaskedLM"]}))
    with pytest.raises(MetaXLMError, match="encoder weights missing"):
        load_model(task, tmp_path / "roberta")


# -- code-switching ------------------------------------------------------------------------------------------

def test_code_switched_pairs_share_a_batch(tokenizer):
    rng = random.Random(0)
    english = [ClassificationExample(f"p{i}", sentence("en", rng), "yes" if i % 2 else "no",
                                     text_pair=sentence("en", rng)) for i in range(10)]
    german = [ClassificationExample(f"p{i}", sentence("de", rng), ex.label, text_pair=sentence("de", rng))
              for i, ex in enumerate(english) if i != 3]  # one item has no translation
    task = get_task("classification")(tokenizer, hp(batch_size=4))
    items, pairs = code_switched_items(task, english, german)
    assert pairs == 9 and all(isinstance(item, tuple) and len(item) == 2 for item in items[10:])
    # a translated item with no English match is kept as it is; with nothing switched (single-text tasks) the
    # plain translate-train set: English and translated items, whatever the recipe
    lone = ClassificationExample("zz", "nur hier", "no", text_pair="x")
    for recipe in ("paper", "pairs_only", "originals"):
        assert code_switched_items(task, english, [lone], recipe) == ([*english, lone], 0)
        assert code_switched_items(task, english, [*german, lone], recipe)[0][-1] is lone
    groups = [item for item in items if isinstance(item, tuple)]
    xx_en, en_xx = groups[0]
    assert (xx_en.text, xx_en.text_pair) == (german[0].text, english[0].text_pair)
    assert (en_xx.text, en_xx.text_pair) == (english[0].text, german[0].text_pair)
    assert xx_en.label == en_xx.label == english[0].label
    task.fit_labels(english)
    features, units = encode_items(task, items, train=True)
    assert [len(u) for u in units].count(2) == 9
    lengths = [len(f["input_ids"]) for f in features]
    for seed in range(5):
        batches = length_grouped_batches(units, lengths, 4, random.Random(seed))
        where = {k: b for b, batch in enumerate(batches) for k in batch}
        assert sorted(where) == list(range(len(features)))
        assert all(where[u[0]] == where[u[1]] for u in units if len(u) == 2)
    # single-text examples have no code-switched form
    assert task.code_switch(ClassificationExample("a", "x", "y"), ClassificationExample("a", "z", "y")) is None


@pytest.mark.parametrize("budget", [8, 40, 100, 1000])
def test_token_budget_batches_keep_every_feature_once_within_the_budget(budget):
    rng = random.Random(0)
    lengths = [rng.randint(1, 30) for _ in range(300)]
    units = [[k] for k in range(200)] + [[k, k + 1] for k in range(200, 300, 2)]  # some units of two features
    for seed in range(3):
        batches = length_grouped_batches(units, lengths, 8, random.Random(seed), batch_tokens=budget)
        flat = [k for batch in batches for k in batch]
        assert sorted(flat) == list(range(300))  # every feature once
        where = {k: b for b, batch in enumerate(batches) for k in batch}
        assert all(where[u[0]] == where[u[-1]] for u in units)  # a unit is never split
        for batch in batches:
            cost = len(batch) * max(lengths[k] for k in batch)
            alone = any(sorted(batch) == sorted(u) for u in units)
            assert cost <= budget or alone, (budget, batch)
    # short features come in larger batches than long ones
    short = length_grouped_batches([[k] for k in range(64)], [4] * 64, 8, random.Random(0), batch_tokens=64)
    long = length_grouped_batches([[k] for k in range(64)], [32] * 64, 8, random.Random(0), batch_tokens=64)
    assert {len(b) for b in short} == {16} and {len(b) for b in long} == {2}
    # without a budget: batches of batch_size features, as before
    assert {len(b) for b in length_grouped_batches([[k] for k in range(64)], [4] * 64, 8, random.Random(0))} == {8}


def _languages(items: list, english: list) -> list:
    """Each training item as the languages of its (x, y) texts — a tuple's as a tuple of them: what a recipe trains
    on, pair by pair."""
    texts = {t for ex in english for t in (ex.text, ex.text_pair)}

    def of(ex):
        return ("en" if ex.text in texts else "de", "en" if ex.text_pair in texts else "de")

    return [tuple(of(ex) for ex in item) if isinstance(item, tuple) else of(item) for item in items]


def test_code_switch_recipes_train_the_sets_they_name(tokenizer):
    """PPA (Pan et al. 2021, Section 2.3) code-switches "when training on languages other than English" and its
    footnote 2 drops only the translated original (q_xx, c_xx): the default `paper` set is the English items plus
    both switched pairs per translated item. metaxlm trained the pairs alone by default (issue 26's reading), which
    this test fails on; that set stays as `pairs_only`."""
    rng = random.Random(3)
    english = [ClassificationExample(f"p{i}", sentence("en", rng), "yes" if i % 2 else "no",
                                     text_pair=sentence("en", rng)) for i in range(6)]
    german = [ClassificationExample(ex.id, sentence("de", rng), ex.label, text_pair=sentence("de", rng))
              for ex in english]
    task = get_task("classification")(tokenizer, hp(batch_size=4))
    en, de = ("en", "en"), ("de", "de")
    switched = [(("de", "en"), ("en", "de"))] * 6  # (x_de, y_en) and (x_en, y_de), one batch
    assert TaskSpec.model_fields["code_switch"].default == "paper"
    paper, pairs = code_switched_items(task, english, german)
    assert pairs == 6 and paper[:6] == english
    assert _languages(paper, english) == [en] * 6 + switched  # 6 + 6 items: no (x_de, y_de)
    assert _languages(code_switched_items(task, english, german, "pairs_only")[0], english) == switched
    assert _languages(code_switched_items(task, english, german, "originals")[0], english) == \
        [en] * 6 + [de, switched[0]] * 6
    assert code_switched_items(task, english, german, "none") == ([*english, *german], 0)


def test_code_switch_config_names_a_recipe():
    """`code_switch` names the recipe; true / false (the boolean it was) are paper / none; the two booleans that chose
    the recipe before are refused in one line (left out, code_switch_english meant no English items, which the
    default no longer is: mapping them would change a config's set without a word)."""
    def spec(**fields):
        return load_task_spec("pawsx", fields)

    assert spec().code_switch == "paper"
    assert (spec(code_switch=True).code_switch, spec(code_switch=False).code_switch) == ("paper", "none")
    assert spec(code_switch="pairs_only").code_switch == "pairs_only"
    for old in ({"code_switch_english": True}, {"code_switch_originals": True, "code_switch_english": False}):
        with pytest.raises(ConfigError, match="replaced by code_switch: paper .*pairs_only, originals or none") as err:
            spec(**old)
        assert len(str(err.value).splitlines()) == 1  # the config's name and the problem, one line
    with pytest.raises(ConfigError, match="code_switch"):
        spec(code_switch="english")


def test_qa_code_switch_keeps_answers_with_their_context():
    en = QAExample("q", "where?", "on the chair", (("chair", 7),))
    de = QAExample("q", "wo?", "auf dem Stuhl", (("Stuhl", 8),))
    xx_en, en_xx = get_task("qa").code_switch(None, en, de)
    assert (xx_en.question, xx_en.context, xx_en.answers) == ("wo?", "on the chair", (("chair", 7),))
    assert (en_xx.question, en_xx.context, en_xx.answers) == ("where?", "auf dem Stuhl", (("Stuhl", 8),))


# -- scenarios and results ---------------------------------------------------------------------------------

def test_summary_means_stds_and_transfer_gap():
    runs = {"en": [0.8, 0.9], "de": [0.6, 0.7], "fr": [0.5, 0.5]}
    out = summarize(runs, "en")
    assert out["per_language"]["de"] == {"mean": pytest.approx(0.65), "std": pytest.approx(math.sqrt(0.005)),
                                         "runs": [0.6, 0.7]}
    # per seed: average (0.6333, 0.7), target average (0.55, 0.6), gap (0.25, 0.3)
    assert out["average"]["mean"] == pytest.approx((1.9 / 3 + 0.7) / 2)
    assert out["average"]["std"] == pytest.approx(abs(0.7 - 1.9 / 3) / math.sqrt(2))
    assert out["target_average"]["mean"] == pytest.approx(0.575)
    assert out["transfer_gap"]["mean"] == pytest.approx(0.275)
    assert out["transfer_gap"]["std"] == pytest.approx(0.05 / math.sqrt(2))
    assert "transfer_gap" not in summarize(runs, None)


def test_document_split_is_deterministic_and_disjoint():
    examples = [ClassificationExample(f"page{i // 3}#{i}", "t", "l") for i in range(30)]
    train, test = split_by_document(examples)
    assert split_by_document(list(reversed(examples))) == (train, test)
    assert train.isdisjoint(test) and len(train | test) == 30
    pages = lambda ids: {i.split("#")[0] for i in ids}  # noqa: E731
    assert pages(train).isdisjoint(pages(test)) and len(pages(train)) == 5


def write_jsonl(path, examples) -> None:
    path.write_text("".join(json.dumps({"id": ex.id, "text": ex.text, "label": ex.label}) + "\n" for ex in examples),
                    encoding="utf-8")


@pytest.fixture()
def toy_task(tmp_path):
    """A demo_module-format task: en train; en/de/ru tests (translations of each other: same ids); zh empty."""
    rng = random.Random(5)
    train = [ClassificationExample(f"tr{i // 4}#{i}", sentence("en", rng) + (" house" if i % 2 else " cat"),
                                   "a" if i % 2 else "b") for i in range(24)]
    write_jsonl(tmp_path / "train.en.jsonl", train)
    for lang in ("en", "de", "ru"):
        test = [ClassificationExample(f"te{i // 3}#{i}", sentence(lang, rng), "a" if i % 2 else "b")
                for i in range(18)]
        write_jsonl(tmp_path / f"test.{lang}.jsonl", test)
    (tmp_path / "test.zh.jsonl").write_text("", encoding="utf-8")
    return TaskSpec(name="toy", type="classification", format="demo_module", metric="accuracy",
                    languages=["en", "de", "ru", "zh"], train=str(tmp_path / "train.{lang}.jsonl"),
                    test=str(tmp_path / "test.{lang}.jsonl"), max_test_items=12, seeds=[0, 1],
                    hyperparameters=hp(max_steps=3))


def test_zero_shot_entry_follows_the_results_schema(toy_task, model_dir, tokenizer_dir, tmp_path):
    entry = run_task(toy_task, model_dir, tmp_path / "out", scenario="zero_shot", languages=["en", "de", "ru", "zh"],
                     tokenizer_dir=tokenizer_dir, progress=False)
    assert entry["type"] == "classification" and entry["metric"] == "accuracy" and entry["scenario"] == "zero_shot"
    assert entry["seeds"] == [0, 1] and entry["source"] == "en"
    assert set(entry["per_language"]) == {"en", "de", "ru"}  # zh has no test items
    assert "zh" in entry["note"]
    for stats in entry["per_language"].values():
        assert len(stats["runs"]) == 2 and stats["mean"] == pytest.approx(np.mean(stats["runs"]))
        assert all(0.0 <= r <= 1.0 for r in stats["runs"])
    runs = {lang: v["runs"] for lang, v in entry["per_language"].items()}
    gaps = [runs["en"][i] - (runs["de"][i] + runs["ru"][i]) / 2 for i in range(2)]
    assert entry["transfer_gap"]["mean"] == pytest.approx(np.mean(gaps))
    details = json.loads((tmp_path / "out" / "zero_shot.json").read_text())
    assert [r["seed"] for r in details["runs"]] == [0, 1] and all(r["steps"] == 3 for r in details["runs"])
    assert all(r["train_items"] == 24 for r in details["runs"])
    # the same seeds again: the same scores
    again = run_task(toy_task, model_dir, None, scenario="zero_shot", languages=["en", "de", "ru"],
                     tokenizer_dir=tokenizer_dir, progress=False)
    assert again["per_language"] == entry["per_language"]


def test_transfer_matrix_rows_and_null_rows(toy_task, model_dir, tokenizer_dir):
    # with train files: only en has one (de, ru have neither train, translate_train nor dev): null rows
    spec = toy_task.model_copy(update={"seeds": [0]})
    matrix = run_task(spec, model_dir, None, scenario="transfer_matrix", tokenizer_dir=tokenizer_dir, progress=False)
    assert matrix["languages"] == ["en", "de", "ru", "zh"]
    scores = np.array(matrix["scores"], dtype=float)
    assert scores.shape == (4, 4)
    assert np.isfinite(scores[0, :3]).all() and np.isnan(scores[1:]).all() and np.isnan(scores[:, 3]).all()
    assert "no training data" in matrix["train_data"]["de"]
    # from half of the test documents: every language with test items is a source
    halves = spec.model_copy(update={"matrix_train_from": "test_half"})
    matrix = run_task(halves, model_dir, None, scenario="transfer_matrix", tokenizer_dir=tokenizer_dir,
                      progress=False)
    scores = np.array(matrix["scores"], dtype=float)
    assert np.isfinite(scores[:3, :3]).all() and np.isnan(scores[3]).all()


def test_zero_shot_from_half_of_the_test_documents(toy_task, model_dir, tokenizer_dir, tmp_path):
    spec = toy_task.model_copy(update={"train_from": "test_half", "seeds": [0], "max_test_items": None})
    entry = run_task(spec, model_dir, tmp_path, scenario="zero_shot", tokenizer_dir=tokenizer_dir, progress=False)
    assert entry["note"].startswith("split: the 6 documents of the test set are halved")
    (run,) = json.loads((tmp_path / "zero_shot.json").read_text())["runs"]
    assert run["train_items"] == 9 and set(run["scores"]) == {"en", "de", "ru"}  # 3 of 6 pages, 3 items each


def test_translate_train_from_half_of_the_test_documents(toy_task, model_dir, tokenizer_dir, tmp_path):
    # XQuAD-style: the language's own items of the training documents are the translated training data
    spec = toy_task.model_copy(update={"train_from": "test_half", "seeds": [0], "max_test_items": None})
    run_task(spec, model_dir, tmp_path, scenario="translate_train", tokenizer_dir=tokenizer_dir, progress=False)
    runs = {r["label"]: r for r in json.loads((tmp_path / "translate_train.json").read_text())["runs"]}
    assert runs["en"]["train_items"] == 9 and runs["en+de"]["train_items"] == 9 + 9  # 3 pages × 3 items each
    assert set(runs["en+de"]["scores"]) == {"de"}


def test_supervised_and_translate_train_skip_languages_without_data(toy_task, model_dir, tokenizer_dir):
    spec = toy_task.model_copy(update={"seeds": [0]})
    entry = run_task(spec, model_dir, None, scenario="supervised", tokenizer_dir=tokenizer_dir, progress=False)
    assert set(entry["per_language"]) == {"en"} and "transfer_gap" not in entry
    assert "no train file for de, ru" in entry["note"]
    entry = run_task(spec, model_dir, None, scenario="translate_train", tokenizer_dir=tokenizer_dir, progress=False)
    assert set(entry["per_language"]) == {"en"}


def test_translate_train_adds_code_switched_pairs(model_dir, tokenizer_dir, tmp_path):
    rng = random.Random(2)

    def write(path, lang):
        rows = [f"{i}\t{sentence(lang, rng)}\t{sentence(lang, rng)}\t{i % 2}" for i in range(12)]
        path.write_text("id\tsentence1\tsentence2\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")

    write(tmp_path / "train-en.tsv", "en")
    write(tmp_path / "translated-de.tsv", "de")
    for lang in ("en", "de"):
        write(tmp_path / f"test-{lang}.tsv", lang)
    spec = TaskSpec(name="pairs", type="classification", format="pawsx", metric="accuracy", languages=["en", "de"],
                    train=str(tmp_path / "train-{lang}.tsv"), test=str(tmp_path / "test-{lang}.tsv"),
                    translate_train=str(tmp_path / "translated-{lang}.tsv"), seeds=[0],
                    hyperparameters=hp(max_steps=2))
    entry = run_task(spec, model_dir, tmp_path / "out", scenario="translate_train", tokenizer_dir=tokenizer_dir,
                     progress=False)
    assert set(entry["per_language"]) == {"en", "de"}
    assert "code_switch: paper: code-switched pairs (Pan et al. 2021) per language, with the English items, " \
        "instead of the translated originals: de 12" in entry["note"]
    runs = json.loads((tmp_path / "out" / "translate_train.json").read_text())["runs"]
    # the 12 English items and 12 tuples of two code-switched examples, not the 12 translated originals (PPA)
    assert [(r["label"], r["train_items"]) for r in runs] == [("en", 12), ("en+de", 12 + 12)]
    for recipe, de_items, said in (("pairs_only", 12, "without the English items, instead of the translated"),
                                   ("originals", 12 + 12 + 12, "with the English items and the translated originals")):
        entry = run_task(spec.model_copy(update={"code_switch": recipe}), model_dir, tmp_path / recipe,
                         scenario="translate_train", tokenizer_dir=tokenizer_dir, progress=False)
        assert f"code_switch: {recipe}: code-switched pairs (Pan et al. 2021) per language, {said}" in entry["note"]
        runs = json.loads((tmp_path / recipe / "translate_train.json").read_text())["runs"]
        assert [(r["label"], r["train_items"]) for r in runs] == [("en", 12), ("en+de", de_items)]


# -- collapsed fine-tuning ------------------------------------------------------------------------------------

def test_each_task_type_names_a_collapsed_model_and_only_that(tokenizer):
    """One answer for >= 95% of test items is a collapse when the gold answers are less uniform; a test set that is
    itself uniform proves nothing, and a varied prediction is no collapse."""
    from metaxlm.data.examples import TranslationExample
    from metaxlm.finetune.tasks.base import collapsed_to_one

    assert collapsed_to_one(["a"] * 19 + ["b"], ["a", "b"] * 10) == ("a", 0.95)
    assert collapsed_to_one(["a"] * 18 + ["b"] * 2, ["a", "b"] * 10) is None      # 90%: not collapsed
    assert collapsed_to_one(["a"] * 20, ["a"] * 19 + ["b"]) is None               # the gold is as uniform
    assert collapsed_to_one([], []) is None
    h = hp()
    cls = [ClassificationExample(str(i), "x", "ab"[i % 2]) for i in range(20)]
    assert "predicts one class ('a') for 100% of test items" == get_task("classification")(tokenizer, h).collapse(
        cls, ["a"] * 20)
    assert get_task("classification")(tokenizer, h).collapse(cls, [ex.label for ex in cls]) is None
    tags = [TaggingExample(str(i), ("a", "b"), ("NOUN", "VERB")) for i in range(10)]
    tagging = get_task("tagging")(tokenizer, h)
    assert "one tag ('NOUN') for 100% of test words" in tagging.collapse(tags, [["NOUN", "NOUN"]] * 10)
    assert tagging.collapse(tags, [["NOUN", "VERB"]] * 10) is None
    spans = [SpanExample(str(i), "Strg+C", ((0, 6, "key"),)) for i in range(10)]
    span_task = get_task("spans")(tokenizer, h)
    assert "no span in 100%" in span_task.collapse(spans, [set()] * 10)
    assert span_task.collapse(spans, [{(0, 6, "key")}] * 10) is None
    qa = [QAExample(str(i), "q?", "a context", (("context", 2),)) for i in range(10)]
    qa_task = get_task("qa")(tokenizer, h)
    assert "empty answer to 100%" in qa_task.collapse(qa, {ex.id: "" for ex in qa})
    assert qa_task.collapse(qa, {ex.id: "context" for ex in qa}) is None  # one answer, but not an empty one
    mt = [TranslationExample(str(i), f"s{i}", f"t{i}") for i in range(10)]
    mt_task = get_task("translation")(tokenizer, h)
    assert "one output ('Klicken Sie') for 100%" in mt_task.collapse(mt, ["Klicken Sie"] * 10)
    assert mt_task.collapse(mt, [f"t{i}" for i in range(10)]) is None


def test_a_forced_collapse_is_marked_warned_and_reported(toy_task, model_dir, tokenizer_dir, tmp_path, capsys):
    """Training items of one class but one (of one class only, the task refuses them): the model predicts that
    class for every test item. The run is marked in
    the task entry (language, seed, what), a one-line warning names task, language, seed and the likely cause, and
    the report's table shows it next to the number."""
    from metaxlm.report.evaluation import format_task_table

    one_class = tmp_path / "one"
    one_class.mkdir()
    rows = [json.loads(line) for line in (tmp_path / "train.en.jsonl").read_text(encoding="utf-8").splitlines()]
    (one_class / "train.en.jsonl").write_text("".join(json.dumps({**r, "label": "b" if i == 0 else "a"}) + "\n"
                                                      for i, r in enumerate(rows)), encoding="utf-8")
    spec = toy_task.model_copy(update={"train": str(one_class / "train.{lang}.jsonl")})
    capsys.readouterr()
    entry = run_task(spec, model_dir, tmp_path / "out", scenario="zero_shot", languages=["en", "de"],
                     tokenizer_dir=tokenizer_dir, progress=False)
    assert set(entry["collapsed"]) == {"en", "de"}
    assert [run["seed"] for run in entry["collapsed"]["de"]] == [0, 1]
    assert entry["collapsed"]["de"][0]["what"] == "predicts one class ('a') for 100% of test items"
    warning = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "toy" in warning[0] and "de seed 1" in warning[0] and "learning rate" in warning[0]
    table = format_task_table("toy", {"model": entry})
    assert "(collapsed: 2/2 seeds)" in table and "predicts one class ('a')" in table


# -- task specs ----------------------------------------------------------------------------------------------

def test_every_task_config_loads():
    names = sorted(p.stem for p in TASK_CONFIG_DIR.glob("*.yaml"))
    assert {"demo_module", "demo_spans", "udpos", "sib200", "xquad", "xnli", "pawsx", "panx"} <= set(names)
    for name in names:
        spec = load_task_spec(name)
        assert spec.name == name
        get_task(spec.type)


def test_task_spec_overrides_and_errors(tmp_path):
    spec = load_task_spec("demo_module", ["hyperparameters.lr=3e-5", "max_train_items=100"])
    assert spec.hyperparameters.lr == 3e-5 and spec.max_train_items == 100  # "3e-5" is a str in YAML 1.1
    spec = load_task_spec("demo_module", {"task": "demo_module", "hyperparameters": {"max_steps": 7}})
    default = load_task_spec("demo_module").hyperparameters
    assert spec.hyperparameters == default.model_copy(update={"max_steps": 7})  # merged, not replaced
    assert load_task_spec("sib200").path("test", "zh").parts[-2] == "zho_Hans"
    with pytest.raises(ConfigError, match="hyperparamters: unknown key"):
        load_task_spec("demo_module", ["hyperparamters.lr=1e-5"])
    with pytest.raises(ConfigError, match="metric"):
        load_task_spec("demo_spans", ["metric=accuracy"])
    with pytest.raises(ConfigError, match="doc_stride"):
        load_task_spec("xquad", ["hyperparameters.doc_stride=400"])
    with pytest.raises(ConfigError, match="no task config"):
        load_task_spec("no_such_task")
