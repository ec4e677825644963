"""Benchmark task data from the Hugging Face Hub (`hub:NAME[:CONFIG][@REVISION]`, metaxlm.data.hub), offline: tiny
`datasets.Dataset`s shaped like each Hub dataset (its columns and feature types: ClassLabel, Sequence) stand in for
`datasets.load_dataset`; each converter must yield the examples the benchmark's file loader yields for the same
items, read the split the task field names, and say in one line what is wrong with a dataset of another shape."""

from __future__ import annotations

import datasets
import pytest
from test_benchmarks import CONLLU, write

from metaxlm.data.benchmarks import load_examples
from metaxlm.data.examples import ClassificationExample, QAExample, TaggingExample
from metaxlm.data.hub import HubRef, parse_hub
from metaxlm.errors import DataError
from metaxlm.finetune.spec import load_task_spec
from metaxlm.finetune.task_data import TaskData

Value, ClassLabel, Sequence = datasets.Value, datasets.ClassLabel, datasets.Sequence

# the label names in the order the Hub datasets declare them (their ClassLabel integers index these)
XNLI_NAMES = ["entailment", "neutral", "contradiction"]
PANX_NAMES = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]
UD_UPOS_NAMES = ["NOUN", "PUNCT", "ADP", "NUM", "SYM", "SCONJ", "ADJ", "PART", "DET", "CCONJ", "PROPN", "PRON", "X",
                 "_", "ADV", "INTJ", "VERB", "AUX"]  # universal_dependencies: "_" for multiword tokens
XTREME_UPOS_NAMES = ["ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
                     "PUNCT", "SCONJ", "SYM", "VERB", "X"]


class FakeHub:
    """datasets.load_dataset for datasets registered by (name, config, split); records each call's arguments."""

    def __init__(self):
        self.datasets: dict[tuple, datasets.Dataset] = {}
        self.calls: list[tuple] = []

    def add(self, name: str, config: str | None, split: str, rows: dict, features: dict) -> None:
        self.datasets[name, config, split] = datasets.Dataset.from_dict(rows, features=datasets.Features(features))

    def __call__(self, name, config=None, *, split=None, revision=None, **_):
        self.calls.append((name, config, split, revision))
        if (name, config, split) not in self.datasets:
            configs = sorted({c for n, c, _ in self.datasets if n == name})
            raise ValueError(f"BuilderConfig '{config}' not found. Available: {configs}")
        return self.datasets[name, config, split]


@pytest.fixture
def hub(monkeypatch) -> FakeHub:
    fake = FakeHub()
    monkeypatch.setattr(datasets, "load_dataset", fake)
    return fake


def test_hub_reference_parts():
    assert parse_hub("hub:facebook/xnli:de") == HubRef("facebook/xnli", "de", None)
    assert parse_hub("hub:google/xquad:xquad.en") == HubRef("google/xquad", "xquad.en", None)
    ref = parse_hub("hub:universal-dependencies/universal_dependencies:en_ewt@refs/convert/parquet")
    assert ref == HubRef("universal-dependencies/universal_dependencies", "en_ewt", "refs/convert/parquet")
    assert str(ref) == "hub:universal-dependencies/universal_dependencies:en_ewt@refs/convert/parquet"
    assert parse_hub("hub:Davlan/sib200") == HubRef("Davlan/sib200", None, None)


def test_sib200_as_the_tsv_gives_it(hub, tmp_path):
    rows = {"index_id": [7, 9], "category": ["science/technology", "travel"], "text": ["A sentence.", "Another."]}
    hub.add("Davlan/sib200", "eng_Latn", "test", rows,
            {"index_id": Value("int64"), "category": Value("string"), "text": Value("string")})
    tsv = write(tmp_path / "test.tsv", "index_id\tcategory\ttext\n7\tscience/technology\tA sentence.\n"
                                       "9\ttravel\tAnother.\n")
    from_hub = load_examples("sib200", "hub:Davlan/sib200:eng_Latn", lang="en", split="test")
    assert from_hub == load_examples("sib200", tsv, lang="en", split="test")
    assert from_hub[0] == ClassificationExample("7", "A sentence.", "science/technology")


def test_xnli_class_labels_become_their_names_and_dev_reads_validation(hub):
    hub.add("facebook/xnli", "de", "validation",
            {"premise": ["Er schläft.", "Sie singt."], "hypothesis": ["Er ist wach.", "Sie macht Musik."],
             "label": [2, 0]},
            {"premise": Value("string"), "hypothesis": Value("string"), "label": ClassLabel(names=XNLI_NAMES)})
    examples = load_examples("xnli", "hub:facebook/xnli:de", lang="de", split="dev")
    assert hub.calls == [("facebook/xnli", "de", "validation", None)]
    assert [ex.label for ex in examples] == ["contradiction", "entailment"]
    assert examples[0] == ClassificationExample("0", "Er schläft.", "contradiction", "Er ist wach.")


def test_pawsx_missing_label_is_an_unlabelled_item(hub):
    features = {"id": Value("int32"), "sentence1": Value("string"), "sentence2": Value("string"),
                "label": ClassLabel(names=["0", "1"])}
    hub.add("google-research-datasets/paws-x", "fr", "train",
            {"id": [1, 2], "sentence1": ["a b", "c d"], "sentence2": ["b a", "d c"], "label": [1, 0]}, features)
    hub.add("google-research-datasets/paws-x", "fr", "test",
            {"id": [3], "sentence1": ["e f"], "sentence2": ["f e"], "label": [-1]}, features)
    train = load_examples("pawsx", "hub:google-research-datasets/paws-x:fr", lang="fr", split="train")
    assert [(ex.id, ex.label, ex.text_pair) for ex in train] == [("1", "1", "b a"), ("2", "0", "d c")]
    with pytest.raises(DataError, match=r"paws-x:fr \(test split\): row 0: no 'label' label \(unlabelled"):
        load_examples("pawsx", "hub:google-research-datasets/paws-x:fr", lang="fr", split="test")


UD_FEATURES = {"idx": Value("string"), "text": Value("string"), "tokens": Sequence(Value("string")),
               "lemmas": Sequence(Value("string")), "upos": Sequence(ClassLabel(names=UD_UPOS_NAMES)),
               "xpos": Sequence(Value("string")), "feats": Sequence(Value("string")),
               "head": Sequence(Value("string")), "deprel": Sequence(Value("string")),
               "deps": Sequence(Value("string")), "misc": Sequence(Value("string"))}


def ud_rows(sentences: list[list[tuple[str, str, str]]], ids: list[str]) -> dict:
    """universal_dependencies rows of (form, upos, head) tokens, as its script wrote them (conllu.parse_incr: the
    multiword token and the empty node are tokens too, with upos "_" or a tag and head "None")."""
    def column(value):
        return [[value(token) for token in sentence] for sentence in sentences]

    rows = {"idx": ids, "text": [" ".join(form for form, _, _ in s) for s in sentences],
            "tokens": column(lambda t: t[0]), "lemmas": column(lambda t: t[0]),
            "upos": column(lambda t: UD_UPOS_NAMES.index(t[1])), "head": column(lambda t: t[2])}
    return rows | {name: column(lambda t: "None") for name in ("xpos", "feats", "deprel", "deps", "misc")}


def test_universal_dependencies_as_the_conllu_gives_it(hub, tmp_path):
    # CONLLU's sentences: s1 has the multiword token "ist's" (2-3) and the empty node 3.1, which are no words
    rows = ud_rows([[("Das", "PRON", "2"), ("ist's", "_", "None"), ("ist", "AUX", "0"), ("'s", "PRON", "2"),
                     ("leer", "X", "None"), (".", "PUNCT", "2")],
                    [("Ja", "INTJ", "0")]], ["s1", "s2"])
    hub.add("universal-dependencies/universal_dependencies", "de_pud", "test", rows, UD_FEATURES)
    ref = "hub:universal-dependencies/universal_dependencies:de_pud@refs/convert/parquet"
    from_hub = load_examples("udpos", ref, lang="de", split="test")
    assert hub.calls[-1][3] == "refs/convert/parquet"
    assert from_hub == load_examples("udpos", write(tmp_path / "de.conllu", CONLLU), lang="de", split="test")
    assert from_hub[0] == TaggingExample("s1", ("Das", "ist", "'s", "."), ("PRON", "AUX", "PRON", "PUNCT"))


def test_xtreme_udpos_pos_tags(hub):
    hub.add("google/xtreme", "udpos.German", "train", {"tokens": [["Das", "ist", "gut", "."]],
                                                       "pos_tags": [[10, 3, 0, 12]]},
            {"tokens": Sequence(Value("string")), "pos_tags": Sequence(ClassLabel(names=XTREME_UPOS_NAMES))})
    [example] = load_examples("udpos", "hub:google/xtreme:udpos.German", lang="de", split="train")
    assert example == TaggingExample("0", ("Das", "ist", "gut", "."), ("PRON", "AUX", "ADJ", "PUNCT"))


def test_panx_ner_tags(hub):
    features = {"tokens": Sequence(Value("string")), "ner_tags": Sequence(ClassLabel(names=PANX_NAMES)),
                "langs": Sequence(Value("string"))}
    hub.add("google/xtreme", "PAN-X.de", "test", {"tokens": [["Angela", "Merkel", "in", "Berlin"]],
                                                  "ner_tags": [[1, 2, 0, 5]], "langs": [["de"] * 4]}, features)
    [example] = load_examples("panx", "hub:google/xtreme:PAN-X.de", lang="de", split="test")
    assert example == TaggingExample("0", ("Angela", "Merkel", "in", "Berlin"), ("B-PER", "I-PER", "O", "B-LOC"))
    # placeholder tags (every word "O", as xtreme's builder writes for a word without a tag) are no labels
    hub.add("unimelb-nlp/wikiann", "fr", "test", {"tokens": [["Un", "chat"]], "ner_tags": [[0, 0]],
                                                  "langs": [["fr", "fr"]]}, features)
    with pytest.raises(DataError, match=r"no word of any sentence has an entity tag \(unlabelled"):
        load_examples("panx", "hub:unimelb-nlp/wikiann:fr", lang="fr", split="test")


QA_FEATURES = {"id": Value("string"), "context": Value("string"), "question": Value("string"),
               "answers": Sequence({"text": Value("string"), "answer_start": Value("int32")})}


def test_xquad_test_is_its_validation_split(hub):
    context = "Paris is the capital of France."
    hub.add("google/xquad", "xquad.en", "validation",
            {"id": ["q1"], "context": [context], "question": ["What is the capital of France?"],
             "answers": [{"text": ["Paris"], "answer_start": [0]}]}, QA_FEATURES)
    [example] = load_examples("squad", "hub:google/xquad:xquad.en", lang="en", split="test")
    assert hub.calls == [("google/xquad", "xquad.en", "validation", None)]
    assert example == QAExample("q1", "What is the capital of France?", context, (("Paris", 0),))


def test_qa_question_without_answers_is_unlabelled(hub):
    hub.add("google/xquad", "xquad.de", "validation",
            {"id": ["q9"], "context": ["Text."], "question": ["Was?"],
             "answers": [{"text": [], "answer_start": []}]}, QA_FEATURES)
    with pytest.raises(DataError, match=r"row 0: question 'q9' has no answers \(unlabelled"):
        load_examples("squad", "hub:google/xquad:xquad.de", lang="de", split="test")


def test_tatoeba_sides_without_line_ends(hub):
    hub.add("google/xtreme", "tatoeba.deu", "validation",
            {"source_sentence": ["Ich bin hier.\n", "Danke!\n"], "target_sentence": ["I am here.\n", "Thanks!\n"],
             "source_lang": ["deu", "deu"], "target_lang": ["eng", "eng"]},
            {name: Value("string") for name in ("source_sentence", "target_sentence", "source_lang", "target_lang")})
    src, tgt = load_examples("tatoeba", "hub:google/xtreme:tatoeba.deu", lang="deu", split="test")
    assert (src, tgt) == (["Ich bin hier.", "Danke!"], ["I am here.", "Thanks!"])


def test_a_dataset_of_another_shape_names_the_missing_column(hub):
    hub.add("someone/nli", "de", "test", {"sentence": ["x"], "label": [0]},
            {"sentence": Value("string"), "label": ClassLabel(names=XNLI_NAMES)})
    with pytest.raises(DataError) as info:
        load_examples("xnli", "hub:someone/nli:de", lang="de", split="test")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("hub:someone/nli:de (test split): no column 'premise' or 'sentence1' or 'text' (has: "
                              "sentence, label)")


def test_a_missing_config_is_one_line_naming_the_dataset(hub):
    hub.add("facebook/xnli", "de", "test", {"premise": ["a"], "hypothesis": ["b"], "label": [0]},
            {"premise": Value("string"), "hypothesis": Value("string"), "label": ClassLabel(names=XNLI_NAMES)})
    with pytest.raises(DataError) as info:
        load_examples("xnli", "hub:facebook/xnli:xx", lang="xx", split="test")
    assert str(info.value) == ("hub:facebook/xnli:xx: cannot load split 'test': BuilderConfig 'xx' not found. "
                               "Available: ['de']")


def test_a_loading_script_dataset_points_to_the_parquet_export(monkeypatch):
    def refuse(name, config=None, **_):
        raise RuntimeError("Dataset scripts are no longer supported, but found universal_dependencies.py")

    monkeypatch.setattr(datasets, "load_dataset", refuse)
    with pytest.raises(DataError, match=r"add @refs/convert/parquet to the hub: path"):
        load_examples("udpos", "hub:universal-dependencies/universal_dependencies:en_ewt", split="train")


def test_a_task_definition_reads_its_splits_from_the_hub(hub, tmp_path):
    """A task YAML whose paths are hub: datasets: {flores} / {lang} filled per language, each field its split, and
    the fine-tuning data (TaskData) loads them as it loads files."""
    features = {"index_id": Value("int64"), "category": Value("string"), "text": Value("string")}
    for config, split, text in [("eng_Latn", "train", "Hello."), ("eng_Latn", "validation", "Hi."),
                                ("deu_Latn", "test", "Hallo.")]:
        hub.add("Davlan/sib200", config, split, {"index_id": [1], "category": ["travel"], "text": [text]}, features)
    spec = load_task_spec("sib200", ["languages=[en,de]", "train=hub:Davlan/sib200:{flores}",
                                     "dev=hub:Davlan/sib200:{flores}", "test=hub:Davlan/sib200:{flores}"])
    data = TaskData(spec)
    assert [ex.text for ex in data.load("train", "en")] == ["Hello."]
    assert [ex.text for ex in data.load("dev", "en")] == ["Hi."]
    assert [ex.text for ex in data.load("test", "de")] == ["Hallo."]
    assert ("Davlan/sib200", "deu_Latn", "test", None) in hub.calls
